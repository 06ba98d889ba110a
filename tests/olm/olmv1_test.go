//go:build olm

package olm

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/seedops/etcd-operator/tests/framework"
)

// OLM v1's API is used unstructured: its Go module is a tool of the harness (hack/tools/olmv1), not a dependency of
// the operator.
var clusterExtensionGVK = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterExtension"}

var _ = Describe("OLM v1: a ClusterExtension from a ClusterCatalog", Ordered, Label("olmv1"), func() {
	var ns string
	ext := &unstructured.Unstructured{}

	BeforeAll(func() {
		// OLM v1 never adopts objects it did not create: the bundle's cluster-scoped objects left by OLM v0 or
		// `make deploy` (both CRDs, the admin/editor/viewer and metrics-reader ClusterRoles) have to go first. A CRD
		// only when no object of its kind exists anywhere, since deleting it deletes them all. Each is put back (from
		// bundle/) afterwards, as the other installs on the node expect them.
		files, err := filepath.Glob("../../bundle/manifests/*.yaml")
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed(), f)
			var cur client.Object
			switch obj.GetKind() {
			case "CustomResourceDefinition":
				cur = &apiextensionsv1.CustomResourceDefinition{}
			case "ClusterRole":
				cur = &rbacv1.ClusterRole{}
			default:
				continue // namespaced (created in the install namespace) or the CSV
			}
			key := client.ObjectKey{Name: obj.GetName()}
			if err := k8s.Get(ctx, key, cur); err != nil {
				Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
				continue
			}
			if crd, ok := cur.(*apiextensionsv1.CustomResourceDefinition); ok {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group,
					Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
				Expect(k8s.List(ctx, list)).To(Succeed())
				Expect(list.Items).To(BeEmpty(), "%s exist on the node: OLM v1 cannot take over their CRD", crd.Spec.Names.Plural)
			}
			Expect(k8s.Delete(ctx, cur)).To(Succeed())
			fw.ExpectGone(cur.DeepCopyObject().(client.Object), 2*time.Minute)
			DeferCleanup(func() {
				// Uninstalling the ClusterExtension deletes what it installed: let that finish first.
				Eventually(func() bool {
					again := cur.DeepCopyObject().(client.Object)
					err := k8s.Get(context.Background(), key, again)
					return apierrors.IsNotFound(err) || (err == nil && again.GetDeletionTimestamp() == nil)
				}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeTrue())
				out, err := framework.RunLogged(kubectl, nil, "apply", "--server-side", "--force-conflicts", "-f", f)
				Expect(err).NotTo(HaveOccurred(), out)
			})
		}
		ns = fw.NewNamespace("olmv1")
		// OLM v1 installs with a service account the cluster admin provides; this one may do anything (the bundle
		// has cluster-scoped objects: the CRD and ClusterRoles).
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-operator-installer"}}
		Expect(k8s.Create(ctx, sa)).To(Succeed())
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-installer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}},
		}
		Expect(k8s.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), crb))).To(Succeed()) })
	})

	// The ClusterExtension lives through every spec of this ordered container (a DeferCleanup inside the first It
	// would delete it as soon as that spec ends); the last spec deletes it, this catches a failure before that.
	AfterAll(func() {
		if ext.GetName() == "" {
			return
		}
		Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), ext))).To(Succeed())
	})

	It("installs the current bundle", func() {
		start := time.Now()
		ext.SetGroupVersionKind(clusterExtensionGVK)
		ext.SetName(packageName)
		Expect(unstructured.SetNestedMap(ext.Object, map[string]any{
			"namespace":      ns,
			"serviceAccount": map[string]any{"name": "etcd-operator-installer"},
			"source": map[string]any{
				"sourceType": "Catalog",
				"catalog": map[string]any{
					"packageName": packageName,
					"version":     currentVersion,
					"selector": map[string]any{"matchLabels": map[string]any{
						"olm.operatorframework.io/metadata.name": catalogSource}},
				},
			},
		}, "spec")).To(Succeed())
		Expect(k8s.Create(ctx, ext)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(clusterExtensionGVK)
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: packageName}, cur)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			var cs []metav1.Condition
			for _, c := range conds {
				m := c.(map[string]any)
				cs = append(cs, metav1.Condition{Type: m["type"].(string), Status: metav1.ConditionStatus(m["status"].(string)),
					Message: m["message"].(string)})
			}
			installed := meta.FindStatusCondition(cs, "Installed")
			g.Expect(installed).NotTo(BeNil())
			g.Expect(installed.Status).To(Equal(metav1.ConditionTrue), installed.Message)
			bundle, _, _ := unstructured.NestedString(cur.Object, "status", "install", "bundle", "name")
			g.Expect(bundle).To(Equal(csvName(currentVersion)))
		}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("ClusterExtension Installed", time.Since(start))
	})

	It("runs the operator, watching every namespace", func() {
		pod := operatorPod(ns, image("OPERATOR", currentVersion), 3*time.Minute)
		c := newCluster(fw.NewNamespace("olmv1-any"), "olmv1", 1)
		waitAvailable(c, 4*time.Minute)
		expectNoOperatorErrors(pod)
	})

	It("removes the operator when the ClusterExtension is deleted", func() {
		Expect(k8s.Delete(ctx, ext)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
