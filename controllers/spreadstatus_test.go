package controllers

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// createNode plays a node of the given zone ("" for none), Ready.
func createNode(ctx context.Context, name, zone string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	Expect(k8sClient.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, n))).To(Succeed()) })
	setNodeReady(ctx, name, corev1.ConditionTrue)
}

func setNodeReady(ctx context.Context, name string, st corev1.ConditionStatus) {
	n := &corev1.Node{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
}

func setNodeZone(ctx context.Context, name, zone string) {
	Expect(retryUpdate(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(o client.Object) {
		o.GetLabels()[corev1.LabelTopologyZone] = zone
	})).To(Succeed())
}

// makeScheduledPods plays the StatefulSet controller, the scheduler and the kubelet: member i's pod on
// nodes[i], all created, then all ready.
func makeScheduledPods(ctx context.Context, c *etcdv1beta1.EtcdCluster, nodes map[int]string) {
	for i, node := range nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i), Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentEtcd)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "etcd",
				Image: resources.Image(c, resources.DefaultOptions())}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	}
	for i := range nodes {
		setPodReady(ctx, c, i, true)
	}
}

// failuresTolerated is the value of etcd_operator_cluster_failures_tolerated for c and topology, as the
// manager's metrics endpoint serves it; -1 when there is no such series.
func failuresTolerated(c *etcdv1beta1.EtcdCluster, topology string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, mf := range families {
		if mf.GetName() != metricsPrefix+"cluster_failures_tolerated" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == c.Namespace && labels["cluster"] == c.Name && labels["topology"] == topology {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// expectTolerance waits until status and the metrics say the cluster survives nodes node and zones zone
// failures.
func expectTolerance(ctx context.Context, c *etcdv1beta1.EtcdCluster, nodes, zones int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(get(ctx, c)).To(Succeed())
		g.Expect(c.Status.FailureTolerance).To(Equal(&etcdv1beta1.FailureTolerance{Nodes: nodes, Zones: zones}))
		g.Expect(failuresTolerated(c, topologyNode)).To(Equal(float64(nodes)))
		g.Expect(failuresTolerated(c, topologyZone)).To(Equal(float64(zones)))
	}, timeout, interval).Should(Succeed())
}

var _ = Describe("Failure tolerance", func() {
	It("reports voters sharing a node in status, a condition, one Warning event and the metrics, and follows the nodes", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		nodeA, nodeB, nodeC := c.Name+"-node-a", c.Name+"-node-b", c.Name+"-node-c"
		createNode(ctx, nodeA, "zone-1")
		createNode(ctx, nodeB, "zone-2")
		createNode(ctx, nodeC, "zone-3")

		By("two of three voters on one node: losing it costs quorum")
		makeScheduledPods(ctx, c, map[int]string{0: nodeA, 1: nodeA, 2: nodeB})
		Eventually(condition(ctx, c, etcdv1beta1.ConditionSpread), timeout, interval).Should(And(
			statusIs(metav1.ConditionFalse, ReasonVotersShareNode),
			HaveField("Message", ContainSubstring(fmt.Sprintf("node %s holds voting members %s, %s", nodeA,
				resources.MemberName(c, 0), resources.MemberName(c, 1))))))
		expectTolerance(ctx, c, 0, 0)
		Expect(c.Status.Phase).NotTo(Equal(etcdv1beta1.PhaseDegraded), "placement is reported, it degrades nothing")
		Eventually(func(g Gomega) {
			events, err := eventsWithReason(ctx, c, ReasonVotersShareNode)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events).To(HaveLen(1))
			g.Expect(events[0].Type).To(Equal(corev1.EventTypeWarning))
			g.Expect(events[0].Note).To(ContainSubstring(nodeA))
		}, timeout, interval).Should(Succeed())

		By("a steady-state reconcile writes nothing and repeats no event")
		for round := range 2 {
			writes.reset()
			before := reconciles.Load()
			Expect(retryUpdate(ctx, c, func(o client.Object) { o.SetAnnotations(map[string]string{"test/round": fmt.Sprint(round)}) })).To(Succeed())
			Eventually(reconciles.Load, timeout, interval).Should(BeNumerically(">", before))
			Expect(writes.about(c.Name)).To(BeEmpty(), "steady-state reconcile %d wrote", round)
		}
		Expect(eventsWithReason(ctx, c, ReasonVotersShareNode)).To(HaveLen(1))

		By("the member moved to a node of its own, in a zone of its own")
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.MemberName(c, 1)}},
			client.GracePeriodSeconds(0))).To(Succeed())
		makeScheduledPods(ctx, c, map[int]string{1: nodeC})
		Eventually(condition(ctx, c, etcdv1beta1.ConditionSpread), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonVotersSpread), HaveField("Message", ContainSubstring("on 3 nodes in 3 zones"))))
		expectTolerance(ctx, c, 1, 1)

		By("a node's zone label changes: voters now share a zone")
		setNodeZone(ctx, nodeC, "zone-1")
		Eventually(condition(ctx, c, etcdv1beta1.ConditionSpread), timeout, interval).Should(And(
			statusIs(metav1.ConditionFalse, ReasonVotersShareZone), HaveField("Message", ContainSubstring("zone zone-1"))))
		expectTolerance(ctx, c, 1, 0)
		Eventually(func() ([]string, error) {
			events, err := eventsWithReason(ctx, c, ReasonVotersShareZone)
			types := []string{}
			for _, e := range events {
				types = append(types, e.Type)
			}
			return types, err
		}, timeout, interval).Should(Equal([]string{corev1.EventTypeWarning}))

		By("a node goes NotReady: its voter no longer counts, the placement is judged as before")
		setNodeReady(ctx, nodeB, corev1.ConditionFalse)
		expectTolerance(ctx, c, 0, 0)
		Expect(condition(ctx, c, etcdv1beta1.ConditionSpread)(Default)).To(statusIs(metav1.ConditionFalse, ReasonVotersShareZone))
		setNodeReady(ctx, nodeB, corev1.ConditionTrue)
		expectTolerance(ctx, c, 1, 0)
		Expect(eventsWithReason(ctx, c, ReasonVotersShareNode)).To(HaveLen(1), "one Warning per transition, none per reconcile")
	})
})
