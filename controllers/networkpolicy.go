package controllers

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	"github.com/seedops/etcd-operator/internal/resources"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// reconcileNetworkPolicy applies the cluster's NetworkPolicy while spec.networkPolicy.enabled, and deletes
// the one it created once it is turned off.
func (r *EtcdClusterReconciler) reconcileNetworkPolicy(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	if c.Spec.NetworkPolicy.Enabled {
		changed, err := applyIfChanged(ctx, r.objects(), &networkingv1.NetworkPolicy{}, resources.NetworkPolicy(c, s.obs.options), networkingv1ac.ExtractNetworkPolicy)
		s.applied.add(ctx, changed, "NetworkPolicy", resources.NetworkPolicyName(c))
		return err
	}
	return r.deleteOwned(ctx, c, &networkingv1.NetworkPolicy{}, resources.NetworkPolicyName(c), "NetworkPolicy", "spec.networkPolicy.enabled is false")
}
