package controllers

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
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

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.NetworkPolicy.Enabled = true })).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, npKey, np) }, timeout, interval).Should(Succeed())
		Expect(np.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)))
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(resources.SelectorLabels(c)))
		Expect(np.Spec.Ingress).To(HaveLen(3))
		Expect(np.Spec.Ingress[1].From).To(ContainElement(HaveField("PodSelector.MatchLabels", HaveKeyWithValue(resources.LabelClient, c.Name))))

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.NetworkPolicy.Enabled = false })).To(Succeed())
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

// TestPodMonitorKindRemoved: prometheus-operator uninstalled while the operator runs costs the cluster
// nothing: where the API server no longer serves the kind (the error an apply then gets), the PodMonitor
// phase reports no error, so the reconcile goes on as before.
func TestPodMonitorKindRemoved(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"}}
	for name, gone := range map[string]error{
		"no REST mapping":         &meta.NoKindMatchError{GroupKind: resources.PodMonitorGVK.GroupKind(), SearchedVersions: []string{"v1"}},
		"404 from the API server": apierrors.NewNotFound(schema.GroupResource{Group: "monitoring.coreos.com", Resource: "podmonitors"}, "c"),
	} {
		cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
				return gone
			},
		}).Build()
		r := &EtcdClusterReconciler{Client: cl, podMonitors: cl, Recorder: &events.FakeRecorder{}}
		s := &reconcileScope{cluster: c, applied: &appliedObjects{}}
		if err := r.reconcilePodMonitor(context.Background(), s); err != nil {
			t.Errorf("%s: reconcilePodMonitor with the kind gone: %v", name, err)
		}
	}
	// Any other error is the reconcile's to report and retry.
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "monitoring.coreos.com", Resource: "podmonitors"}, "c", errors.New("RBAC"))
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return refused
		},
	}).Build()
	r := &EtcdClusterReconciler{Client: cl, podMonitors: cl, Recorder: &events.FakeRecorder{}}
	if err := r.reconcilePodMonitor(context.Background(), &reconcileScope{cluster: c, applied: &appliedObjects{}}); !apierrors.IsForbidden(err) {
		t.Errorf("a refused apply: got %v, want the Forbidden error", err)
	}
}

// TestConfirmForcing: a forced start's instruction is written only against the configuration the API server
// holds. A reconcile that planned from a cache without the instruction another reconcile wrote (naming
// member 0) must not name member 1 too, nor bring back an instruction already taken out.
func TestConfirmForcing(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	a := &membership.ForceNewCluster{Member: "c-0", OldPod: "u0"}
	b := &membership.ForceNewCluster{Member: "c-1", OldPod: "u1"}
	configWith := func(f *membership.ForceNewCluster) client.Object {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: resources.ConfigMapName(c), Namespace: c.Namespace}}
		cm.Data = resources.ConfigMap(c, resources.MemberConfig{ForceNewCluster: f}).Data
		return cm
	}
	for _, tc := range []struct {
		name          string
		live          client.Object
		cached, write *membership.ForceNewCluster
		ok            bool
	}{
		{"nothing to force: nothing read", nil, nil, nil, true},
		{"a first instruction, none live", configWith(nil), nil, b, true},
		{"a first instruction, no configuration yet", nil, nil, b, true},
		{"the instruction the cache shows, kept", configWith(a), a, a, true},
		{"a second member named while the first is forced (stale cache)", configWith(a), nil, b, false},
		{"the first member named again with its new pod as the old one (stale cache)", configWith(a), nil, &membership.ForceNewCluster{Member: "c-0", OldPod: "u0-new"}, false},
		{"an instruction already taken out, brought back (stale cache)", configWith(nil), a, a, false},
	} {
		builder := fake.NewClientBuilder()
		if tc.live != nil {
			builder = builder.WithObjects(tc.live)
		}
		cl := builder.Build()
		r := &EtcdClusterReconciler{Client: cl, APIReader: cl}
		if err := r.confirmForcing(context.Background(), c, tc.cached, tc.write); (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
