package operatorhub

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	root        = "../.."
	packageName = "etcd-operator"
)

// developedVersion is VERSION of the Makefile: the version whose bundle is bundle/.
func developedVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION ?= "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("the Makefile sets no VERSION")
	return ""
}

// TestSubmissionTree writes the submission and checks it against catalog/: one directory per bundle the
// catalog lists, holding that release's CSV under the package's name, metadata naming the package and the
// OpenShift releases of its minKubeVersion; a CSV's upgrade edge equal to the catalog's; a ci.yaml whose
// template exists and says the catalog's package, channels and bundle images, and nothing else.
func TestSubmissionTree(t *testing.T) {
	out := t.TempDir()
	src := Source{Root: root, Package: packageName, Version: developedVersion(t)}
	if err := Write(src, out, []string{"v4.20", "v4.21"}); err != nil {
		t.Fatal(err)
	}
	blobs, err := ReadCatalog(filepath.Join(root, "catalog", packageName))
	if err != nil {
		t.Fatal(err)
	}
	pkgDir := filepath.Join(out, "operators", packageName)

	edges := map[string][2]string{} // CSV name -> replaces, skipRange, the same in every channel
	for _, b := range blobs {
		if b.Schema != "olm.channel" {
			continue
		}
		for _, e := range b.Entries {
			edge := [2]string{e.Replaces, e.SkipRange}
			if prev, ok := edges[e.Name]; ok && prev != edge {
				t.Errorf("%s has upgrade edges %v and %v in different channels", e.Name, prev, edge)
			}
			edges[e.Name] = edge
		}
	}

	versions := 0
	for _, b := range blobs {
		if b.Schema != "olm.bundle" {
			continue
		}
		versions++
		v := strings.TrimPrefix(b.Name, packageName+".v")
		var csv struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Replaces       string `json:"replaces"`
				Version        string `json:"version"`
				MinKubeVersion string `json:"minKubeVersion"`
			} `json:"spec"`
		}
		mustRead(t, filepath.Join(pkgDir, v, "manifests", packageName+".clusterserviceversion.yaml"), &csv)
		if csv.Metadata.Name != b.Name || csv.Spec.Version != v {
			t.Errorf("%s/manifests: CSV %s version %s, want %s version %s", v, csv.Metadata.Name, csv.Spec.Version, b.Name, v)
		}
		// A CSV without an edge is fine (the catalog holds it); one with an edge must say the catalog's.
		if e := edges[b.Name]; csv.Spec.Replaces != "" && (csv.Spec.Replaces != e[0] || csv.Metadata.Annotations["olm.skipRange"] != e[1]) {
			t.Errorf("%s: the CSV replaces %q (skipRange %q), the catalog %q (%q)", b.Name, csv.Spec.Replaces,
				csv.Metadata.Annotations["olm.skipRange"], e[0], e[1])
		}
		var meta struct {
			Annotations map[string]string `json:"annotations"`
		}
		mustRead(t, filepath.Join(pkgDir, v, "metadata", "annotations.yaml"), &meta)
		if got := meta.Annotations["operators.operatorframework.io.bundle.package.v1"]; got != packageName {
			t.Errorf("%s/metadata: package %q, want %q (the directory's name)", v, got, packageName)
		}
		want, err := OpenShiftVersions(csv.Spec.MinKubeVersion)
		if err != nil {
			t.Fatal(err)
		}
		if got := meta.Annotations[OpenShiftVersionsAnnotation]; got != want {
			t.Errorf("%s/metadata: %s %q, want %q for minKubeVersion %s", v, OpenShiftVersionsAnnotation, got, want, csv.Spec.MinKubeVersion)
		}
	}
	entries, err := os.ReadDir(pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	if dirs := len(entries) - 2; dirs != versions { // ci.yaml and catalog-templates besides the versions
		t.Errorf("%d entries under operators/%s for %d bundles in the catalog", len(entries), packageName, versions)
	}

	var ci struct {
		FBC struct {
			Enabled        bool `json:"enabled"`
			CatalogMapping []struct {
				TemplateName  string   `json:"template_name"`
				CatalogsNames []string `json:"catalogs_names"`
				Type          string   `json:"type"`
			} `json:"catalog_mapping"`
		} `json:"fbc"`
	}
	mustRead(t, filepath.Join(pkgDir, "ci.yaml"), &ci)
	if !ci.FBC.Enabled || len(ci.FBC.CatalogMapping) != 1 || ci.FBC.CatalogMapping[0].Type != "olm.template.basic" ||
		!reflect.DeepEqual(ci.FBC.CatalogMapping[0].CatalogsNames, []string{"v4.20", "v4.21"}) {
		t.Fatalf("ci.yaml: %+v", ci)
	}
	var tmpl struct {
		Schema  string           `json:"schema"`
		Entries []map[string]any `json:"entries"`
	}
	mustRead(t, filepath.Join(pkgDir, "catalog-templates", ci.FBC.CatalogMapping[0].TemplateName), &tmpl)
	if tmpl.Schema != "olm.template.basic" || len(tmpl.Entries) != len(blobs) {
		t.Fatalf("template: schema %q with %d entries for %d catalog objects", tmpl.Schema, len(tmpl.Entries), len(blobs))
	}
	for _, b := range blobs {
		want := b.Raw
		if b.Schema == "olm.bundle" {
			want = map[string]any{"schema": "olm.bundle", "image": b.Image}
		}
		found := false
		for _, e := range tmpl.Entries {
			found = found || reflect.DeepEqual(e, want)
		}
		if !found {
			t.Errorf("the template lacks the catalog's %s %s", b.Schema, b.Name)
		}
	}
}

func TestOpenShiftVersions(t *testing.T) {
	for in, want := range map[string]string{"1.33.0": "v4.20", "1.29": "v4.16", "v1.30.2": "v4.17"} {
		if got, err := OpenShiftVersions(in); err != nil || got != want {
			t.Errorf("OpenShiftVersions(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "2.1.0", "1.x", "1.13.0"} {
		if got, err := OpenShiftVersions(in); err == nil {
			t.Errorf("OpenShiftVersions(%q) = %q, want an error", in, got)
		}
	}
}

// TestWriteRefusesAnUncutCatalog: a catalog without the developed version's bundle is stale, not submittable.
func TestWriteRefusesAnUncutCatalog(t *testing.T) {
	src := Source{Root: root, Package: packageName, Version: "99.0.0"}
	err := Write(src, t.TempDir(), []string{"v4.20"})
	if err == nil || !strings.Contains(err.Error(), "make catalog") {
		t.Fatalf("Write for a version the catalog lacks: %v", err)
	}
}

func mustRead(t *testing.T, path string, into any) {
	t.Helper()
	if err := readYAML(path, into); err != nil {
		t.Fatal(err)
	}
}
