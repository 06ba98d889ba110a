// Package operatorhub writes the operator's submission to the community catalogs (OperatorHub.io's
// k8s-operatorhub/community-operators and OpenShift's community-operators-prod) in their repositories' layout:
//
//	operators/<package>/<version>/{manifests,metadata,tests}   one bundle per release, as released
//	operators/<package>/ci.yaml                                the file-based-catalog workflow and its mapping
//	operators/<package>/catalog-templates/basic.yaml           the catalog as an olm.template.basic
//	catalogs/<catalog>/<package>/                              the rendered catalog (written by `opm render`)
//
// Everything comes from what the project already keeps: the frozen bundles under releases/, the bundle of the
// version in development under bundle/, and the file-based catalog under catalog/, whose channels and upgrade
// edges are the template's. Nothing is written that the catalog does not say.
package operatorhub

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Source is where the project keeps what the submission is made of.
type Source struct {
	// Root is the repository's root.
	Root string
	// Package is the OLM package name (the catalog's directory and the CSV names' prefix).
	Package string
	// Version is the version in development, whose bundle is bundle/; older versions are under releases/.
	Version string
}

// Blob is one file-based-catalog object: the fields the submission reads, and the object itself.
type Blob struct {
	Schema  string `json:"schema"`
	Name    string `json:"name"`
	Package string `json:"package"`
	Image   string `json:"image"`
	Entries []struct {
		Name      string   `json:"name"`
		Replaces  string   `json:"replaces,omitempty"`
		Skips     []string `json:"skips,omitempty"`
		SkipRange string   `json:"skipRange,omitempty"`
	} `json:"entries"`
	Raw map[string]any `json:"-"`
}

// ReadCatalog reads every object of the package's catalog directory (catalog/<package>), in file order.
func ReadCatalog(dir string) ([]Blob, error) {
	var blobs []Blob
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))) == 0 {
				continue
			}
			var b Blob
			if err := yaml.Unmarshal(doc, &b); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := yaml.Unmarshal(doc, &b.Raw); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			blobs = append(blobs, b)
		}
		return nil
	})
	if err == nil && len(blobs) == 0 {
		err = fmt.Errorf("%s holds no catalog objects", dir)
	}
	return blobs, err
}

// BundleDirs maps every version the catalog lists to the bundle directory it was released from:
// releases/<version>/bundle, or bundle/ for the version in development.
func (s Source) BundleDirs(blobs []Blob) (map[string]string, error) {
	if !slices.ContainsFunc(blobs, func(b Blob) bool { return b.Schema == "olm.bundle" && b.Name == s.Package+".v"+s.Version }) {
		return nil, fmt.Errorf("the catalog has no bundle %s.v%s (run `make catalog`)", s.Package, s.Version)
	}
	dirs := map[string]string{}
	for _, b := range blobs {
		if b.Schema != "olm.bundle" {
			continue
		}
		v, ok := strings.CutPrefix(b.Name, s.Package+".v")
		if !ok {
			return nil, fmt.Errorf("bundle %s: the name is not %s.v<version>", b.Name, s.Package)
		}
		dir := filepath.Join(s.Root, "releases", v, "bundle")
		if v == s.Version {
			dir = filepath.Join(s.Root, "bundle")
		}
		if _, err := os.Stat(filepath.Join(dir, "manifests")); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", b.Name, err)
		}
		dirs[v] = dir
	}
	return dirs, nil
}

// Write writes the submission for the catalogs named in catalogs (the rendered catalogs themselves are opm's
// to write, under out/catalogs/<catalog>/<package>).
func Write(s Source, out string, catalogs []string) error {
	if len(catalogs) == 0 {
		return errors.New("no catalog named")
	}
	blobs, err := ReadCatalog(filepath.Join(s.Root, "catalog", s.Package))
	if err != nil {
		return err
	}
	dirs, err := s.BundleDirs(blobs)
	if err != nil {
		return err
	}
	pkgDir := filepath.Join(out, "operators", s.Package)
	for v, dir := range dirs {
		for _, sub := range []string{"manifests", "metadata", "tests"} {
			if err := copyTree(filepath.Join(dir, sub), filepath.Join(pkgDir, v, sub)); err != nil {
				return err
			}
		}
		if err := addOpenShiftVersions(filepath.Join(pkgDir, v)); err != nil {
			return err
		}
	}
	if err := writeYAML(filepath.Join(pkgDir, "catalog-templates", TemplateName), BasicTemplate(blobs)); err != nil {
		return err
	}
	ci := map[string]any{"fbc": map[string]any{"enabled": true, "catalog_mapping": []any{map[string]any{
		"template_name": TemplateName, "catalogs_names": catalogs, "type": "olm.template.basic"}}}}
	return writeYAML(filepath.Join(pkgDir, "ci.yaml"), ci)
}

// TemplateName is the catalog template's file name under catalog-templates/.
const TemplateName = "basic.yaml"

// BasicTemplate is the catalog as an olm.template.basic: the package and channels as they are, each bundle
// by its image only (the catalogs' pipelines render the rest from the image).
func BasicTemplate(blobs []Blob) map[string]any {
	var entries []any
	// The package, then its channels, then the bundles, as a reader of the template looks for them.
	for _, schema := range []string{"olm.package", "olm.channel", "olm.bundle"} {
		for _, b := range blobs {
			switch {
			case b.Schema != schema:
			case schema == "olm.bundle":
				entries = append(entries, map[string]any{"schema": "olm.bundle", "image": b.Image})
			default:
				entries = append(entries, b.Raw)
			}
		}
	}
	return map[string]any{"schema": "olm.template.basic", "entries": entries}
}

// OpenShiftVersionsAnnotation is the bundle annotation that tells OpenShift's community catalogs which
// releases may list the bundle.
const OpenShiftVersionsAnnotation = "com.redhat.openshift.versions"

// OpenShiftVersions is the annotation's value for a bundle that needs Kubernetes minKubeVersion: the
// OpenShift release built on that Kubernetes minor and later ones (OpenShift 4.N runs Kubernetes 1.N+13).
func OpenShiftVersions(minKubeVersion string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(minKubeVersion, "v"), ".")
	if len(parts) < 2 || parts[0] != "1" {
		return "", fmt.Errorf("minKubeVersion %q: want 1.<minor>[.<patch>]", minKubeVersion)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < 13+1 {
		return "", fmt.Errorf("minKubeVersion %q: no OpenShift 4 release runs it", minKubeVersion)
	}
	return fmt.Sprintf("v4.%d", minor-13), nil
}

// MinKubeVersion reads spec.minKubeVersion of the bundle's ClusterServiceVersion.
func MinKubeVersion(bundleDir string) (string, error) {
	csvs, err := filepath.Glob(filepath.Join(bundleDir, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil || len(csvs) != 1 {
		return "", fmt.Errorf("%s: want one ClusterServiceVersion, found %d (%v)", bundleDir, len(csvs), err)
	}
	var csv struct {
		Spec struct {
			MinKubeVersion string `json:"minKubeVersion"`
		} `json:"spec"`
	}
	if err := readYAML(csvs[0], &csv); err != nil {
		return "", err
	}
	if csv.Spec.MinKubeVersion == "" {
		return "", fmt.Errorf("%s has no spec.minKubeVersion", csvs[0])
	}
	return csv.Spec.MinKubeVersion, nil
}

// addOpenShiftVersions adds the OpenShift annotation, derived from the CSV's minKubeVersion, to the bundle's
// metadata/annotations.yaml.
func addOpenShiftVersions(bundleDir string) error {
	minKube, err := MinKubeVersion(bundleDir)
	if err != nil {
		return err
	}
	versions, err := OpenShiftVersions(minKube)
	if err != nil {
		return fmt.Errorf("%s: %w", bundleDir, err)
	}
	path := filepath.Join(bundleDir, "metadata", "annotations.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if bytes.Contains(data, []byte(OpenShiftVersionsAnnotation+":")) {
		return fmt.Errorf("%s already sets %s", path, OpenShiftVersionsAnnotation)
	}
	data = append(bytes.TrimRight(data, "\n"), []byte(fmt.Sprintf("\n\n  # OpenShift releases that may list the bundle (from minKubeVersion %s).\n  %s: %q\n",
		minKube, OpenShiftVersionsAnnotation, versions))...)
	return os.WriteFile(path, data, 0o644)
}

// copyTree copies the files under src to dst; a missing src is nothing to copy.
func copyTree(src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

func writeYAML(path string, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), data...), 0o644)
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
