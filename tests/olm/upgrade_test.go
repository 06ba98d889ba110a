//go:build olm

package olm

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/framework"
)

// podState is what would change if an etcd pod were recreated or restarted.
type podState struct {
	uid      string
	revision string
	restarts int32
}

func memberPods(c *etcdv1alpha1.EtcdCluster) map[string]podState {
	pods := &corev1.PodList{}
	ExpectWithOffset(1, k8s.List(ctx, pods, client.InNamespace(c.Namespace), framework.MemberLabels(c.Name))).To(Succeed())
	out := map[string]podState{}
	for _, p := range pods.Items {
		s := podState{uid: string(p.UID), revision: p.Labels["controller-revision-hash"]}
		for _, st := range p.Status.ContainerStatuses {
			s.restarts += st.RestartCount
		}
		out[p.Name] = s
	}
	return out
}

// expectSameMemberTemplate checks that the StatefulSet's update revision is its current one, or differs from
// it in placement only (affinity, topology spread constraints): the operator restarts no member for that,
// and the new placement applies when a member's pod is next created.
func expectSameMemberTemplate(sts *appsv1.StatefulSet) {
	if sts.Status.UpdateRevision == sts.Status.CurrentRevision {
		return
	}
	digest := func(name string) string {
		cr := &appsv1.ControllerRevision{}
		ExpectWithOffset(2, k8s.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: name}, cr)).To(Succeed())
		d, err := resources.RevisionDigest(cr.Data.Raw)
		ExpectWithOffset(2, err).NotTo(HaveOccurred(), "revision %s", name)
		return d
	}
	ExpectWithOffset(1, digest(sts.Status.UpdateRevision)).To(Equal(digest(sts.Status.CurrentRevision)),
		"update revision %s differs from current revision %s beyond placement", sts.Status.UpdateRevision, sts.Status.CurrentRevision)
}

// pendingInstallPlan waits for the Subscription to point at an unapproved InstallPlan that installs csv.
func pendingInstallPlan(sub *operatorsv1alpha1.Subscription, csv string) *operatorsv1alpha1.InstallPlan {
	ip := &operatorsv1alpha1.InstallPlan{}
	EventuallyWithOffset(1, func(g Gomega) {
		cur := &operatorsv1alpha1.Subscription{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sub), cur)).To(Succeed())
		g.Expect(cur.Status.InstallPlanRef).NotTo(BeNil())
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: sub.Namespace, Name: cur.Status.InstallPlanRef.Name}, ip)).To(Succeed())
		g.Expect(ip.Spec.ClusterServiceVersionNames).To(ContainElement(csv))
		g.Expect(ip.Spec.Approval).To(Equal(operatorsv1alpha1.ApprovalManual))
		g.Expect(ip.Spec.Approved).To(BeFalse())
		g.Expect(ip.Status.Phase).To(Equal(operatorsv1alpha1.InstallPlanPhaseRequiresApproval))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return ip
}

func approve(ip *operatorsv1alpha1.InstallPlan) {
	patch := client.MergeFrom(ip.DeepCopy())
	ip.Spec.Approved = true
	ExpectWithOffset(1, k8s.Patch(ctx, ip, patch)).To(Succeed())
}

var _ = Describe("Upgrade through OLM with manual approval", Ordered, Label("upgrade"), func() {
	var (
		ns     string
		sub    *operatorsv1alpha1.Subscription
		c      *etcdv1alpha1.EtcdCluster
		w      *framework.Writer
		before map[string]podState
	)
	previousCSV, currentCSV := csvName(previousVersion), csvName(currentVersion)

	BeforeAll(func() {
		removeBundleObjects("CustomResourceDefinition")
		ns = fw.NewNamespace("upgrade")
		sub = install(ns, []string{ns}, previousCSV, operatorsv1alpha1.ApprovalManual)
	})

	It("installs the previous release once its InstallPlan is approved", func() {
		approve(pendingInstallPlan(sub, previousCSV))
		waitCSV(ns, previousCSV, 4*time.Minute)
		operatorPod(ns, image("OPERATOR", previousVersion), 3*time.Minute)
	})

	It("runs a 3-member EtcdCluster that takes writes", func() {
		c = newCluster(ns, "upgrade", 3)
		waitAvailable(c, 5*time.Minute)
		w = fw.StartWriter(current(c), "upgrade")
		w.WaitProgress(50, time.Minute)
		before = memberPods(c)
		Expect(before).To(HaveLen(3))
		// The backup CronJob runs the operator's own image (OPERATOR_IMAGE): which operator reconciled last.
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-backup"}, cj)).To(Succeed())
			g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(image("OPERATOR", previousVersion)))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("offers the current release in an InstallPlan that waits for approval", func() {
		ip := pendingInstallPlan(sub, currentCSV)
		Expect(ip.Spec.ClusterServiceVersionNames).NotTo(ContainElement(previousCSV))
		cur := &operatorsv1alpha1.Subscription{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sub), cur)).To(Succeed())
		Expect(cur.Status.State).To(BeEquivalentTo(operatorsv1alpha1.SubscriptionStateUpgradePending))
		Expect(cur.Status.InstalledCSV).To(Equal(previousCSV))
		// Nothing moves before the approval.
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: currentCSV}, &operatorsv1alpha1.ClusterServiceVersion{})).
			NotTo(Succeed())
		approve(ip)
	})

	It("replaces the previous CSV with the current one", func() {
		start := time.Now()
		csv := waitCSV(ns, currentCSV, 5*time.Minute)
		Expect(csv.Spec.Replaces).To(Equal(previousCSV))
		fw.ExpectGone(&operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: previousCSV}}, 3*time.Minute)
		operatorPod(ns, image("OPERATOR", currentVersion), 3*time.Minute)
		Eventually(func(g Gomega) {
			cur := &operatorsv1alpha1.Subscription{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sub), cur)).To(Succeed())
			g.Expect(cur.Status.InstalledCSV).To(Equal(currentCSV))
			g.Expect(cur.Status.State).To(BeEquivalentTo(operatorsv1alpha1.SubscriptionStateAtLatest))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("upgrade (approval to new operator running)", time.Since(start))
	})

	It("lets the new operator take over the cluster, which stays Available and writable", func() {
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-backup"}, cj)).To(Succeed())
			g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(image("OPERATOR", currentVersion)))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitAvailable(c, 2*time.Minute)
		w.WaitProgress(50, time.Minute)
	})

	It("serves the cluster written through v1alpha1 as the same object through v1beta1, and takes writes through either", func() {
		old, cur := &etcdv1alpha1.EtcdCluster{}, &etcdv1beta1.EtcdCluster{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), old)).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		asCurrent := &etcdv1beta1.EtcdCluster{}
		sameFields(old, asCurrent)
		Expect(asCurrent.Spec).To(Equal(cur.Spec))
		Expect(asCurrent.Status).To(Equal(cur.Status))
		// A label written through each version reads back through the other.
		for version, obj := range map[string]client.Object{"v1alpha1": old, "v1beta1": cur} {
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			obj.SetLabels(map[string]string{"example.com/written-through-" + version: "true"})
			Expect(k8s.Patch(ctx, obj, patch)).To(Succeed())
		}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), old)).To(Succeed())
		Expect(old.Labels).To(HaveKey("example.com/written-through-v1beta1"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		Expect(cur.Labels).To(HaveKey("example.com/written-through-v1alpha1"))
	})

	It("migrates the stored objects to v1beta1 and trims the CRDs' storedVersions, with the user's rights", func() {
		migrateStorage(c)
	})

	It("keeps every acknowledged key", func() {
		w.StopAndVerify(current(c))
	})

	It("did not restart or recreate etcd pods (the previous and current releases build the same member pods, but for placement)", func() {
		Expect(memberPods(c)).To(Equal(before))
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, sts)).To(Succeed())
		expectSameMemberTemplate(sts)
		revs := []string{}
		for _, s := range before {
			revs = append(revs, s.revision)
		}
		Expect(slices.Compact(revs)).To(Equal([]string{sts.Status.CurrentRevision}))
	})
})
