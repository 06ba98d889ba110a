package kubectlplugin

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMigrateStorage: objects written while v1alpha1 was the storage version (the 0.2.0 release's CRDs) stay
// stored so after an upgrade to the current CRDs (v1beta1 stored); migrate-storage rewrites each (etcd's own
// bytes show it), trims
// storedVersions to [v1beta1] only once every object is rewritten, changes no field, and is a no-op when
// run again. An object it cannot rewrite (an admission policy refuses the update) leaves storedVersions as
// it was and names the object.
func TestMigrateStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join("..", "..", "releases", "0.2.0", "bundle", "manifests", "etcd.seedops.io_etcdclusters.yaml"),
			filepath.Join("..", "..", "releases", "0.2.0", "bundle", "manifests", "etcd.seedops.io_etcdbackups.yaml"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest needs KUBEBUILDER_ASSETS (make envtest, or `make test`): %v", err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	etcdCli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = etcdCli.Close() }()
	// storedAs reads the apiVersion etcd holds for an EtcdCluster, as the API server encoded it.
	storedAs := func(ns, name string) string {
		t.Helper()
		resp, err := etcdCli.Get(ctx, fmt.Sprintf("/registry/etcd.seedops.io/etcdclusters/%s/%s", ns, name))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("etcd key of %s/%s: %v (%d keys)", ns, name, err, len(resp.Kvs))
		}
		for _, v := range []string{"v1alpha1", "v1beta1"} {
			// (The object's own apiVersion comes first; managedFields name the versions of earlier writes.)
			if bytes.HasPrefix(resp.Kvs[0].Value, []byte(`{"apiVersion":"etcd.seedops.io/`+v+`"`)) {
				return v
			}
		}
		t.Fatalf("etcd holds %s/%s as %q", ns, name, resp.Kvs[0].Value)
		return ""
	}
	storedVersions := func() []string {
		t.Helper()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: MigratedCRDs[0]}, crd); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(slices.Values(crd.Status.StoredVersions))
	}
	cluster := func(version, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": "3.5.9", "replicas": int64(3)}}}
		u.SetAPIVersion("etcd.seedops.io/" + version)
		u.SetKind("EtcdCluster")
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}

	// 0.2.0's CRDs: objects are written as v1alpha1.
	namespaces := []string{"migrate-a", "migrate-b"}
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	var old []*unstructured.Unstructured
	for i := range 5 {
		u := cluster("v1alpha1", namespaces[i%2], fmt.Sprintf("old-%d", i))
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		old = append(old, u)
	}
	// The upgrade: the current CRDs, v1beta1 stored, v1alpha1 still served.
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	fresh := cluster("v1beta1", namespaces[0], "new")
	if err := c.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got := storedVersions(); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("storedVersions after the upgrade: %v", got)
	}
	if got := storedAs(old[0].GetNamespace(), old[0].GetName()); got != "v1alpha1" {
		t.Fatalf("an object written before the upgrade is stored as %s", got)
	}
	// What every object reads as before the migration (the new schema's defaults included).
	before := map[string]*unstructured.Unstructured{}
	for _, u := range append(old, fresh) {
		got := cluster("v1beta1", u.GetNamespace(), u.GetName())
		if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			t.Fatal(err)
		}
		before[u.GetNamespace()+"/"+u.GetName()] = got
	}

	// An object the migration cannot rewrite: nothing is trimmed, and it is named.
	lock := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "lock-old-3"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"etcd.seedops.io"}, APIVersions: []string{"*"}, Resources: []string{"etcdclusters"}}},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'old-3'", Message: "old-3 is locked"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "lock-old-3"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: lock.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	for _, o := range []client.Object{lock, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The policy takes effect once the API server has loaded it: until an update of old-3 is refused.
	locked := old[3]
	updateLocked := func() error {
		u := locked.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		return c.Update(ctx, u)
	}
	waitFor(t, func() bool {
		err := updateLocked()
		return err != nil && strings.Contains(err.Error(), "old-3 is locked")
	})
	var out bytes.Buffer
	err = MigrateStorage(ctx, cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "old-3") || !strings.Contains(err.Error(), "storedVersions left") {
		t.Fatalf("migration with a locked object: %v", err)
	}
	if got := storedVersions(); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) {
		t.Fatalf("storedVersions trimmed although old-3 was not rewritten: %v", got)
	}
	for _, o := range []client.Object{binding, lock} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// Once nothing refuses it: every object rewritten as v1beta1, storedVersions trimmed, no field changed.
	waitFor(t, func() bool { return updateLocked() == nil })
	out.Reset()
	err = MigrateStorage(ctx, cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if got := storedVersions(); !slices.Equal(got, []string{"v1beta1"}) {
		t.Fatalf("storedVersions after the migration: %v", got)
	}
	for _, u := range append(old, fresh) {
		if got := storedAs(u.GetNamespace(), u.GetName()); got != "v1beta1" {
			t.Errorf("%s/%s stored as %s after the migration", u.GetNamespace(), u.GetName(), got)
		}
		for _, version := range []string{"v1alpha1", "v1beta1"} {
			got := cluster(version, u.GetNamespace(), u.GetName())
			if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				t.Fatal(err)
			}
			was := before[u.GetNamespace()+"/"+u.GetName()]
			if !equality.Semantic.DeepEqual(got.Object["spec"], was.Object["spec"]) || got.GetGeneration() != was.GetGeneration() {
				t.Errorf("%s/%s through %s: spec %v generation %d, before the migration %v generation %d", u.GetNamespace(), u.GetName(), version,
					got.Object["spec"], got.GetGeneration(), was.Object["spec"], was.GetGeneration())
			}
		}
	}
	out.Reset()
	if err := MigrateStorage(ctx, cfg, &out); err != nil || !strings.Contains(out.String(), "stored as v1beta1 already") {
		t.Fatalf("a second run: %v\n%s", err, out.String())
	}
}

// waitFor polls done until it holds, for at most 30 seconds (the API server loads admission policies from
// its informers, asynchronously).
func waitFor(t *testing.T, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !done(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
