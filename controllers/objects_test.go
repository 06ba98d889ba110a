package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/resources"
)

var _ = Describe("EtcdCluster NetworkPolicy", func() {
	ctx := context.Background()

	It("is created only when enabled, and deleted when turned off", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		np := &networkingv1.NetworkPolicy{}
		npKey := key(c.Namespace, resources.NetworkPolicyName(c))
		Expect(k8sClient.Get(ctx, npKey, np)).To(Satisfy(apierrors.IsNotFound), "off by default")

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1alpha1.EtcdCluster).Spec.NetworkPolicy.Enabled = true })).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, npKey, np) }, timeout, interval).Should(Succeed())
		Expect(np.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)))
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(resources.SelectorLabels(c)))
		Expect(np.Spec.Ingress).To(HaveLen(3))
		Expect(np.Spec.Ingress[1].From).To(ContainElement(HaveField("PodSelector.MatchLabels", HaveKeyWithValue(resources.LabelClient, c.Name))))

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1alpha1.EtcdCluster).Spec.NetworkPolicy.Enabled = false })).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, npKey, np) }, timeout, interval).Should(Satisfy(apierrors.IsNotFound))
	})
})
