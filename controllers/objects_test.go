package controllers

import (
	"context"
	"testing"

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

func TestHolds(t *testing.T) {
	want := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
		"spec":     map[string]any{"endpoints": []any{map[string]any{"port": "metrics"}}, "jobLabel": "x"},
	}
	for _, tc := range []struct {
		name string
		have any
		held bool
	}{
		{"the same", want, true},
		{"with fields the API server or another manager added", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"a": "1", "release": "prom"}, "resourceVersion": "7"},
			"spec":     map[string]any{"endpoints": []any{map[string]any{"port": "metrics", "interval": "30s"}}, "jobLabel": "x"},
		}, true},
		{"a value changed", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"a": "2"}},
			"spec":     map[string]any{"endpoints": []any{map[string]any{"port": "metrics"}}, "jobLabel": "x"},
		}, false},
		{"a field missing", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
			"spec":     map[string]any{"endpoints": []any{map[string]any{"port": "metrics"}}},
		}, false},
		{"a list element added", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
			"spec":     map[string]any{"endpoints": []any{map[string]any{"port": "metrics"}, map[string]any{"port": "client"}}, "jobLabel": "x"},
		}, false},
		{"a map where a list belongs", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"a": "1"}},
			"spec":     map[string]any{"endpoints": map[string]any{"port": "metrics"}, "jobLabel": "x"},
		}, false},
	} {
		if got := holds(tc.have, want); got != tc.held {
			t.Errorf("%s: holds = %v, want %v", tc.name, got, tc.held)
		}
	}
}
