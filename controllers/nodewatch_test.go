package controllers

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// This suite runs no etcd: the operator reports etcd unreachable, with the member pods whose nodes are down.
var _ = Describe("EtcdCluster controller and its members' nodes", func() {
	It("reports a member's node going down, and makes zero API writes while nothing changes, whatever nodes report", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-of-" + c.Name}}
		Expect(k8sClient.Create(ctx, node)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, node))).To(Succeed()) })
		report := func(ready corev1.ConditionStatus, transition bool) {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
			cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: ready, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
			if len(node.Status.Conditions) > 0 && !transition {
				cond.LastTransitionTime = node.Status.Conditions[0].LastTransitionTime
			}
			node.Status.Conditions = []corev1.NodeCondition{cond}
			Expect(k8sClient.Status().Update(ctx, node)).To(Succeed())
		}
		report(corev1.ConditionTrue, true)
		makeMemberPods(ctx, c, 3, resources.Image(c, resources.DefaultOptions()))
		for i := range 3 {
			pod := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
			Expect(k8sClient.SubResource("binding").Create(ctx, pod, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
				Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}})).To(Succeed())
			setPodReady(ctx, c, i, true)
		}
		progressing := condition(ctx, c, etcdv1beta1.ConditionProgressing)
		Eventually(progressing, timeout, interval).Should(HaveField("Message", Equal("etcd is unreachable; waiting")))

		// A reconcile of what was already reported writes nothing: the node's heartbeats pass no reconcile
		// (nodeReadinessChanged), and an annotation change on the cluster makes one.
		steady := func(round string) {
			Eventually(func(g Gomega) {
				writes.reset()
				before := reconciles.Load()
				report(node.Status.Conditions[0].Status, false)
				Expect(get(ctx, c)).To(Succeed())
				c.Annotations = map[string]string{"test/round": fmt.Sprint(round, before)}
				Expect(k8sClient.Update(ctx, c)).To(Succeed())
				g.Eventually(reconciles.Load, timeout, interval).Should(BeNumerically(">", before))
				g.Expect(writes.about(c.Name)).To(BeEmpty(), "steady-state reconcile (%s) wrote", round)
			}, timeout, interval).Should(Succeed())
		}
		steady("ready")

		By("the node stopping to report")
		report(corev1.ConditionUnknown, true)
		Eventually(progressing, timeout, interval).Should(HaveField("Message", MatchRegexp(
			`^etcd is unreachable; waiting \(member 0: its node node-of-\S+ stopped reporting \(Ready Unknown\) since \S+; member 1: .*; member 2: .*\)$`)))
		steady("not reporting")

		By("the node back")
		report(corev1.ConditionTrue, true)
		Eventually(progressing, timeout, interval).Should(HaveField("Message", Equal("etcd is unreachable; waiting")))
	})
})
