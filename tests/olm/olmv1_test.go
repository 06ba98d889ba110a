//go:build olm

package olm

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// OLM v1's API is used unstructured: its Go module is a tool of the harness (hack/tools/olmv1), not a dependency of
// the operator.
var clusterExtensionGVK = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterExtension"}

var _ = Describe("OLM v1: a ClusterExtension from a ClusterCatalog", Ordered, Label("olmv1"), func() {
	var ns, clusterNS string
	ext := &unstructured.Unstructured{}

	BeforeAll(func() {
		// OLM v1 never adopts objects it did not create: the bundle's cluster-scoped objects left by OLM v0 or
		// `make deploy` (both CRDs, the admin/editor/viewer and metrics-reader ClusterRoles) have to go first.
		removeBundleObjects("CustomResourceDefinition", "ClusterRole")
		ns = fw.NewNamespace("olmv1")
		// The cluster lives through the upgrade: its namespace is the container's (a namespace made in a spec goes
		// when that spec ends).
		clusterNS = fw.NewNamespace("olmv1-any")
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

	// installed waits for the ClusterExtension to report Installed with the bundle of version.
	installed := func(version string, timeout time.Duration) {
		EventuallyWithOffset(1, func(g Gomega) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(clusterExtensionGVK)
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: packageName}, cur)).To(Succeed())
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			var cs []metav1.Condition
			for _, c := range conds {
				m := c.(map[string]any)
				cs = append(cs, metav1.Condition{Type: m["type"].(string), Status: metav1.ConditionStatus(m["status"].(string)),
					Reason: m["reason"].(string), Message: m["message"].(string)})
			}
			// Progressing carries why a resolution or an upgrade is refused (e.g. the CRD upgrade safety check).
			progressing := meta.FindStatusCondition(cs, "Progressing")
			inst := meta.FindStatusCondition(cs, "Installed")
			g.Expect(inst).NotTo(BeNil(), "conditions: %v", cs)
			g.Expect(inst.Status).To(Equal(metav1.ConditionTrue), "Installed: %s; Progressing: %v", inst.Message, progressing)
			bundle, _, _ := unstructured.NestedString(cur.Object, "status", "install", "bundle", "name")
			g.Expect(bundle).To(Equal(csvName(version)), "Progressing: %v", progressing)
		}).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
	}

	var (
		c      *etcdv1alpha1.EtcdCluster
		before map[string]podState
	)

	It("installs the previous release", func() {
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
					"version":     previousVersion,
					"selector": map[string]any{"matchLabels": map[string]any{
						"olm.operatorframework.io/metadata.name": catalogSource}},
				},
			},
		}, "spec")).To(Succeed())
		Expect(k8s.Create(ctx, ext)).To(Succeed())
		installed(previousVersion, 5*time.Minute)
		framework.ReportDuration("ClusterExtension Installed ("+previousVersion+")", time.Since(start))
	})

	It("runs the operator, watching every namespace", func() {
		// Its log is not judged: 0.1.0 may not create core events in its namespace (its leader-election event is
		// refused), which 0.2.0 fixed; the current release's log is judged after the upgrade.
		operatorPod(ns, image("OPERATOR", previousVersion), 3*time.Minute)
		c = newCluster(clusterNS, "olmv1", 1)
		waitAvailable(c, 4*time.Minute)
		before = memberPods(c)
		Expect(before).To(HaveLen(1))
	})

	It("upgrades to the current release along the catalog's upgrade edge", func() {
		start := time.Now()
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(clusterExtensionGVK)
		Expect(k8s.Get(ctx, client.ObjectKey{Name: packageName}, cur)).To(Succeed())
		patch := client.MergeFrom(cur.DeepCopy())
		Expect(unstructured.SetNestedField(cur.Object, currentVersion, "spec", "source", "catalog", "version")).To(Succeed())
		Expect(k8s.Patch(ctx, cur, patch)).To(Succeed())
		// OLM v1's CRD upgrade safety check stays enforced: this upgrade adds a served version with the same schema
		// and keeps every stored one, which the check accepts (docs/olm.md).
		enforcement, _, _ := unstructured.NestedString(cur.Object, "spec", "install", "preflight", "crdUpgradeSafety", "enforcement")
		Expect(enforcement).NotTo(Equal("None"))
		installed(currentVersion, 5*time.Minute)
		pod := operatorPod(ns, image("OPERATOR", currentVersion), 3*time.Minute)
		framework.ReportDuration("ClusterExtension upgrade ("+previousVersion+" to "+currentVersion+", new operator running)", time.Since(start))
		waitAvailable(c, 2*time.Minute)
		expectNoOperatorErrors(pod)
	})

	It("left the cluster's members untouched", func() {
		// The new operator has reconciled the cluster (the backup CronJob runs its image) before this is judged.
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-backup"}, cj)).To(Succeed())
			g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(image("OPERATOR", currentVersion)))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(memberPods(c)).To(Equal(before))
	})

	It("migrates the stored objects to v1beta1 and trims the CRDs' storedVersions", func() {
		migrateStorage(c)
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
