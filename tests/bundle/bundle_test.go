// Package bundle checks the committed OLM bundle and file-based catalog without a cluster: the bundle must pass
// the validators the community catalogs run (operator-sdk's `--select-optional suite=operatorframework`) with
// no error and no warning, bundle.Dockerfile must agree with bundle/metadata/annotations.yaml, and catalog/ must
// describe the bundle that bundle/ holds.
package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	valerrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	root        = "../.."
	packageName = "etcd-operator"
)

var (
	bundleDir  = filepath.Join(root, "bundle")
	catalogDir = filepath.Join(root, "catalog", packageName)
)

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("loading %s: %v", bundleDir, err)
	}
	if b.CSV == nil {
		t.Fatalf("%s has no ClusterServiceVersion", bundleDir)
	}
	return b
}

// TestBundleValidators runs operator-framework/api's default bundle validators and the operatorframework
// optional suite (OperatorHub metadata, capabilities, categories, deprecated APIs, good practices), plus the
// object validator, and fails on every error and every warning.
func TestBundleValidators(t *testing.T) {
	b := loadBundle(t)

	// The same objects `operator-sdk bundle validate` passes: typed CRDs and CSV, every manifest, the bundle,
	// and the optional values.
	objs := b.ObjectsToValidate()
	optional := map[string]string{"k8s-version": testedFloor(t)}
	objs = append(objs, optional)

	suites := map[string]interfaces.Validators{
		"default":               validation.DefaultBundleValidators,
		"operatorhubv2":         {validation.OperatorHubV2Validator},
		"capabilities":          {validation.StandardCapabilitiesValidator},
		"categories":            {validation.StandardCategoriesValidator},
		"alpha-deprecated-apis": {validation.AlphaDeprecatedAPIsValidator},
		"good-practices":        {validation.GoodPracticesValidator},
		"objects":               {validation.ObjectValidator},
	}
	for name, validators := range suites {
		t.Run(name, func(t *testing.T) {
			for _, result := range validators.Validate(objs...) {
				for _, e := range result.Errors {
					t.Errorf("error (%s): %s", result.Name, describe(e))
				}
				for _, w := range result.Warnings {
					t.Errorf("warning (%s): %s", result.Name, describe(w))
				}
			}
		})
	}
}

func describe(e valerrors.Error) string {
	if e.Field != "" {
		return e.Field + ": " + e.Error()
	}
	return e.Error()
}

// testedFloor is the oldest Kubernetes minor the suites run on, as 1.<minor>.0: the main version's wrapper module
// and the compatibility suites' (make test-compat). Removed APIs are checked against it, and the CSV's
// minKubeVersion must be it.
func testedFloor(t *testing.T) string {
	t.Helper()
	mods, err := filepath.Glob(filepath.Join(root, "hack", "tools", "kube-apiserver", "*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mods = append(mods, filepath.Join(root, "hack", "tools", "kubernetes", "go.mod"))
	oldest := -1
	for _, mod := range mods {
		data, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "require" && f[1] == "k8s.io/kubernetes" {
				parts := strings.Split(strings.TrimPrefix(f[2], "v"), ".")
				minor, err := strconv.Atoi(parts[1])
				if err != nil || parts[0] != "1" {
					t.Fatalf("%s: k8s.io/kubernetes %s", mod, f[2])
				}
				if oldest < 0 || minor < oldest {
					oldest = minor
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("%s requires no k8s.io/kubernetes", mod)
		}
	}
	return fmt.Sprintf("1.%d.0", oldest)
}

// TestCSVContent checks what the issue asks of the CSV beyond what validators check.
func TestCSVContent(t *testing.T) {
	b := loadBundle(t)
	csv := b.CSV

	if got, want := csv.Name, packageName+".v"+csv.Spec.Version.String(); got != want {
		t.Errorf("CSV name %q, want %q", got, want)
	}
	if csv.Spec.DisplayName != "etcd Operator" {
		t.Errorf("displayName %q", csv.Spec.DisplayName)
	}
	if floor := testedFloor(t); csv.Spec.MinKubeVersion != floor {
		t.Errorf("minKubeVersion %q, want %q: the oldest Kubernetes the suites run on (hack/tools/kubernetes and "+
			"hack/tools/kube-apiserver/*, make test-compat)", csv.Spec.MinKubeVersion, floor)
	}
	for _, key := range []string{"alm-examples", "capabilities", "categories", "containerImage", "createdAt", "repository", "description"} {
		if csv.Annotations[key] == "" {
			t.Errorf("annotation %s is missing", key)
		}
	}
	if len(csv.Spec.Icon) == 0 || csv.Spec.Icon[0].MediaType != "image/svg+xml" {
		t.Errorf("want an SVG icon, got %d icons", len(csv.Spec.Icon))
	}

	// Every install mode is supported; OLM v1 installs AllNamespaces.
	for _, m := range csv.Spec.InstallModes {
		if !m.Supported {
			t.Errorf("install mode %s is not supported", m.Type)
		}
	}
	if len(csv.Spec.InstallModes) != 4 {
		t.Errorf("want 4 install modes, got %d", len(csv.Spec.InstallModes))
	}

	// OLM v1 compatibility: no APIServices, no webhooks, no dependencies.
	if len(csv.Spec.APIServiceDefinitions.Owned)+len(csv.Spec.APIServiceDefinitions.Required) != 0 {
		t.Error("the CSV declares APIServices")
	}
	if len(csv.Spec.WebhookDefinitions) != 0 {
		t.Error("the CSV declares webhooks")
	}
	if len(b.Dependencies) != 0 {
		t.Errorf("the bundle declares %d dependencies", len(b.Dependencies))
	}
	if _, err := os.Stat(filepath.Join(bundleDir, "metadata", "dependencies.yaml")); err == nil {
		t.Error("bundle/metadata/dependencies.yaml exists")
	}

	// Owned CRDs (EtcdCluster, EtcdBackup), one entry per served version: the current version's with descriptors
	// for every top-level spec field, a deprecated version's saying what to use instead.
	ownedKinds, servedVersions := map[string]bool{}, 0
	for _, crd := range b.V1CRDs {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				servedVersions++
			}
		}
	}
	for _, owned := range csv.Spec.CustomResourceDefinitions.Owned {
		if deprecatedVersion(b.V1CRDs, owned.Name, owned.Version) {
			if !strings.Contains(owned.Description, "deprecated") || !strings.Contains(owned.DisplayName, "deprecated") {
				t.Errorf("owned CRD %s %s is a deprecated version: its description and display name must say so", owned.Name, owned.Version)
			}
			continue
		}
		ownedKinds[owned.Kind] = true
		if len(owned.Resources) == 0 {
			t.Errorf("owned CRD %s lists no resources", owned.Name)
		}
		specPaths := map[string]bool{}
		for _, d := range owned.SpecDescriptors {
			specPaths[d.Path] = true
		}
		found := false
		for _, crd := range b.V1CRDs {
			if crd.Name != owned.Name {
				continue
			}
			found = true
			for _, v := range crd.Spec.Versions {
				if v.Name != owned.Version {
					continue
				}
				for field := range v.Schema.OpenAPIV3Schema.Properties["spec"].Properties {
					if !specPaths[field] {
						t.Errorf("%s: spec field %q has no spec descriptor", owned.Kind, field)
					}
				}
			}
		}
		if !found {
			t.Errorf("owned CRD %s is not in the bundle", owned.Name)
		}
		if len(owned.StatusDescriptors) < 4 {
			t.Errorf("%s: want status descriptors for the main status fields, got %d", owned.Kind, len(owned.StatusDescriptors))
		}
	}
	if !ownedKinds["EtcdCluster"] || !ownedKinds["EtcdBackup"] || len(b.V1CRDs) != 2 || servedVersions != len(csv.Spec.CustomResourceDefinitions.Owned) {
		t.Errorf("want the owned CRDs EtcdCluster and EtcdBackup, an entry per served version, and exactly those CRDs in the bundle; got %v, %d entries for %d served versions, and %d CRDs",
			ownedKinds, len(csv.Spec.CustomResourceDefinitions.Owned), servedVersions, len(b.V1CRDs))
	}

	// WATCH_NAMESPACE comes from the OperatorGroup's target namespaces; related images from RELATED_IMAGE_*.
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 || len(deployments[0].Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one deployment with one container")
	}
	container := deployments[0].Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range container.Env {
		env[e.Name] = e
	}
	watch := env["WATCH_NAMESPACE"]
	if watch.ValueFrom == nil || watch.ValueFrom.FieldRef == nil ||
		watch.ValueFrom.FieldRef.FieldPath != "metadata.annotations['olm.targetNamespaces']" {
		t.Errorf("WATCH_NAMESPACE must come from olm.targetNamespaces, got %+v", watch)
	}
	related := map[string]string{}
	for _, r := range csv.Spec.RelatedImages {
		related[r.Image] = r.Name
	}
	for name, e := range env {
		if strings.HasPrefix(name, "RELATED_IMAGE_") {
			if _, ok := related[e.Value]; !ok {
				t.Errorf("%s=%s is not in relatedImages", name, e.Value)
			}
		}
	}
	if _, ok := related[container.Image]; !ok {
		t.Errorf("the operator image %s is not in relatedImages", container.Image)
	}
	if got := csv.Annotations["containerImage"]; got != container.Image {
		t.Errorf("containerImage annotation %q differs from the deployment's image %q", got, container.Image)
	}
	if env["OPERATOR_IMAGE"].Value != container.Image {
		t.Errorf("OPERATOR_IMAGE %q differs from the deployment's image %q", env["OPERATOR_IMAGE"].Value, container.Image)
	}

	// No permission to manage CRDs, and nothing cluster-wide but the metrics endpoint's auth checks and
	// reading Nodes (cluster-scoped: a member on a lost node is replaced by what its node says).
	readsNodes := false
	for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		for _, r := range p.Rules {
			if slices.Equal(r.APIGroups, []string{""}) && slices.Equal(r.Resources, []string{"nodes"}) {
				readsNodes = true
				if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
					t.Errorf("clusterPermissions grant %v on nodes: reading them is all the operator does", r.Verbs)
				}
				continue
			}
			for _, g := range r.APIGroups {
				if g != "authentication.k8s.io" && g != "authorization.k8s.io" {
					t.Errorf("clusterPermissions grant %v on %v in group %q: namespaced rules belong in permissions", r.Verbs, r.Resources, g)
				}
			}
		}
	}
	if !readsNodes {
		t.Errorf("clusterPermissions do not let the operator read nodes (a Role in the target namespaces cannot)")
	}
}

// TestBundleDockerfileMatchesAnnotations checks that bundle.Dockerfile labels and
// bundle/metadata/annotations.yaml carry the same keys and values.
func TestBundleDockerfileMatchesAnnotations(t *testing.T) {
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	readYAML(t, filepath.Join(bundleDir, "metadata", "annotations.yaml"), &meta)

	labels := map[string]string{}
	f, err := os.Open(filepath.Join(root, "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if rest, ok := strings.CutPrefix(line, "LABEL "); ok {
			k, v, _ := strings.Cut(rest, "=")
			labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for k, v := range meta.Annotations {
		if labels[k] != v {
			t.Errorf("annotation %s=%q, bundle.Dockerfile label %q", k, v, labels[k])
		}
	}
	for k := range labels {
		if _, ok := meta.Annotations[k]; !ok {
			t.Errorf("bundle.Dockerfile label %s is not in annotations.yaml", k)
		}
	}
	if got := meta.Annotations["operators.operatorframework.io.bundle.package.v1"]; got != packageName {
		t.Errorf("bundle package %q, want %q", got, packageName)
	}
	if got := meta.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]; got != "stable" {
		t.Errorf("default channel %q, want stable", got)
	}
	channels := strings.Split(meta.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",")
	slices.Sort(channels)
	if !slices.Equal(channels, []string{"candidate", "stable"}) {
		t.Errorf("bundle channels %v, want candidate and stable", channels)
	}
}

// fbc is the part of a file-based catalog blob the checks below read.
type fbc struct {
	Schema         string  `json:"schema"`
	Name           string  `json:"name"`
	Package        string  `json:"package"`
	DefaultChannel string  `json:"defaultChannel"`
	Image          string  `json:"image"`
	Entries        []entry `json:"entries"`
	Properties     []struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	} `json:"properties"`
}

// entry is a channel entry: a bundle name and its upgrade edges.
type entry struct {
	Name      string   `json:"name"`
	Replaces  string   `json:"replaces"`
	Skips     []string `json:"skips"`
	SkipRange string   `json:"skipRange"`
}

// TestCatalogMatchesBundle checks that catalog/etcd-operator describes package etcd-operator with channels
// stable (default) and candidate, both reaching the bundle in bundle/, and a bundle blob for that CSV with the
// same version and API.
func TestCatalogMatchesBundle(t *testing.T) {
	b := loadBundle(t)
	blobs := readCatalog(t)

	var pkgs, bundles []fbc
	channels := map[string]fbc{}
	for _, blob := range blobs {
		switch blob.Schema {
		case "olm.package":
			pkgs = append(pkgs, blob)
		case "olm.channel":
			channels[blob.Name] = blob
		case "olm.bundle":
			bundles = append(bundles, blob)
		}
	}
	if len(pkgs) != 1 || pkgs[0].Name != packageName {
		t.Fatalf("want one olm.package %s, got %+v", packageName, pkgs)
	}
	if pkgs[0].DefaultChannel != b.DefaultChannel {
		t.Errorf("catalog default channel %q, bundle default channel %q", pkgs[0].DefaultChannel, b.DefaultChannel)
	}
	for _, name := range b.Channels {
		ch, ok := channels[name]
		if !ok {
			t.Errorf("catalog has no channel %q (the bundle's channels are %v)", name, b.Channels)
			continue
		}
		if ch.Package != packageName {
			t.Errorf("channel %s belongs to package %q", name, ch.Package)
		}
		i := slices.IndexFunc(ch.Entries, func(e entry) bool { return e.Name == b.CSV.Name })
		if i < 0 {
			t.Errorf("channel %s has no entry for %s", name, b.CSV.Name)
			continue
		}
		// A catalog built from the CSVs alone (replaces mode: OperatorHub's pipelines, operator-sdk's index
		// builds) takes the upgrade edge from the CSV: it must be the channel's.
		if e := ch.Entries[i]; e.Replaces != b.CSV.Spec.Replaces || e.SkipRange != b.CSV.Annotations["olm.skipRange"] {
			t.Errorf("channel %s: %s replaces %q, skipRange %q; the CSV says spec.replaces %q, olm.skipRange %q "+
				"(set them in %s)", name, e.Name, e.Replaces, e.SkipRange, b.CSV.Spec.Replaces,
				b.CSV.Annotations["olm.skipRange"], "config/manifests/bases")
		}
	}

	idx := slices.IndexFunc(bundles, func(x fbc) bool { return x.Name == b.CSV.Name })
	if idx < 0 {
		t.Fatalf("catalog has no olm.bundle %s", b.CSV.Name)
	}
	blob := bundles[idx]
	if blob.Package != packageName {
		t.Errorf("bundle blob package %q", blob.Package)
	}
	if blob.Image == "" {
		t.Error("bundle blob has no image")
	}
	var version string
	var gvks []string
	for _, p := range blob.Properties {
		switch p.Type {
		case "olm.package":
			var v struct {
				PackageName string `json:"packageName"`
				Version     string `json:"version"`
			}
			if err := yaml.Unmarshal(p.Value, &v); err != nil {
				t.Fatal(err)
			}
			version = v.Version
		case "olm.gvk":
			var v struct{ Group, Kind, Version string }
			if err := yaml.Unmarshal(p.Value, &v); err != nil {
				t.Fatal(err)
			}
			gvks = append(gvks, v.Group+"/"+v.Version+"/"+v.Kind)
		case "olm.csv.metadata":
			// The catalog's copy of the CSV metadata must be the CSV in bundle/.
			var v struct {
				Annotations     map[string]string                           `json:"annotations"`
				Description     string                                      `json:"description"`
				CRDDescriptions operatorsv1alpha1.CustomResourceDefinitions `json:"crdDescriptions"`
				InstallModes    []operatorsv1alpha1.InstallMode             `json:"installModes"`
				MinKubeVersion  string                                      `json:"minKubeVersion"`
			}
			if err := yaml.Unmarshal(p.Value, &v); err != nil {
				t.Fatal(err)
			}
			csv := b.CSV.Spec
			if !maps.Equal(v.Annotations, b.CSV.Annotations) || v.Description != csv.Description ||
				!reflect.DeepEqual(v.CRDDescriptions, csv.CustomResourceDefinitions) ||
				!reflect.DeepEqual(v.InstallModes, csv.InstallModes) || v.MinKubeVersion != csv.MinKubeVersion {
				t.Errorf("catalog/%s/bundles/%s.yaml is stale: its CSV metadata differs from bundle/ (run `make catalog`)", packageName, b.CSV.Name)
			}
		case "olm.package.required", "olm.gvk.required":
			t.Errorf("bundle blob declares a dependency (%s): OLM v1 does not resolve dependencies", p.Type)
		}
	}
	if version != b.CSV.Spec.Version.String() {
		t.Errorf("catalog bundle version %q, CSV version %q", version, b.CSV.Spec.Version.String())
	}
	for _, crd := range b.CSV.Spec.CustomResourceDefinitions.Owned {
		group := strings.SplitN(crd.Name, ".", 2)[1]
		if !slices.Contains(gvks, group+"/"+crd.Version+"/"+crd.Kind) {
			t.Errorf("catalog bundle does not provide %s/%s/%s (has %v)", group, crd.Version, crd.Kind, gvks)
		}
	}
}

func readCatalog(t *testing.T) []fbc {
	t.Helper()
	var blobs []fbc
	err := filepath.WalkDir(catalogDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := filepath.Ext(path)
		if ext != ".yaml" && ext != ".yml" && ext != ".json" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs, err := splitDocuments(data, ext == ".json")
		if err != nil {
			return err
		}
		for _, doc := range docs {
			var blob fbc
			if err := yaml.Unmarshal(doc, &blob); err != nil {
				return errors.Join(errors.New(path), err)
			}
			blobs = append(blobs, blob)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", catalogDir, err)
	}
	if len(blobs) == 0 {
		t.Fatalf("%s holds no catalog blobs", catalogDir)
	}
	return blobs
}

// splitDocuments splits a YAML stream on "---" lines, or a JSON stream into its top-level values.
func splitDocuments(data []byte, isJSON bool) ([][]byte, error) {
	var docs [][]byte
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == io.EOF {
				return docs, nil
			} else if err != nil {
				return nil, err
			}
			docs = append(docs, raw)
		}
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// deprecatedVersion reports whether version of the named CRD is served as deprecated.
func deprecatedVersion(crds []*apiextensionsv1.CustomResourceDefinition, name, version string) bool {
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if crd.Name == name && v.Name == version {
				return v.Deprecated
			}
		}
	}
	return false
}
