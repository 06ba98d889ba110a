package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/resources"
)

var _ = Describe("A member claim outside the operator's cache", func() {
	It("is read live before quorum-loss recovery counts its member's data as lost", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		c.Spec.Recovery.QuorumLoss = etcdv1beta1.QuorumLossFromSurvivor
		createAndSettle(ctx, c)

		// Members 0 and 1 keep their data on claims a user created without the operator's managed-by label
		// (the cache holds only labelled claims); member 2's claim is gone.
		claim := func(i int, labels map[string]string) {
			Expect(k8sClient.Create(ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: resources.DataVolumeName + "-" + resources.MemberName(c, i), Namespace: c.Namespace, Labels: labels},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
			})).To(Succeed())
		}
		claim(0, resources.SelectorLabels(c))
		claim(1, nil)

		makeMemberPods(ctx, c, 3, resources.Image(c, resources.DefaultOptions()))
		for i := range 3 {
			setPodReady(ctx, c, i, true)
		}
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionTrue, ReasonQuorumHealthy))
		setPodReady(ctx, c, 1, false)
		setPodReady(ctx, c, 2, false)
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionFalse, ReasonQuorumLost))

		// What status held when etcd last answered (this suite runs no etcd): three voters, and a majority
		// lost long enough ago for recovery to act.
		Eventually(func() error {
			Expect(get(ctx, c)).To(Succeed())
			c.Status.Members = []etcdv1beta1.MemberStatus{
				{Name: resources.MemberName(c, 0), ID: "a1", Healthy: true},
				{Name: resources.MemberName(c, 1), ID: "a2"},
				{Name: resources.MemberName(c, 2), ID: "a3"},
			}
			apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable).LastTransitionTime =
				metav1.NewTime(time.Now().Add(-time.Hour))
			return k8sClient.Status().Update(ctx, c)
		}, timeout, interval).Should(Succeed())
		// A status write does not trigger a reconcile; an annotation does.
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.SetAnnotations(map[string]string{"test/poke": "1"}) })).To(Succeed())

		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(
			HaveField("Message", ContainSubstring("2 of 3 voters still hold their data (quorum 2), so the majority may come back")))
		Consistently(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ConfigMapName(c)), cm)).To(Succeed())
			g.Expect(cm.Data).NotTo(HaveKey(membergate.EnvForceNewClusterMember), "no forced start while a majority may come back")
			g.Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(g)).To(
				HaveField("Message", ContainSubstring("2 of 3 voters still hold their data")))
		}, 2*time.Second, interval).Should(Succeed())
	})
})
