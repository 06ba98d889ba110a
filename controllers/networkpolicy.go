package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	np := &networkingv1.NetworkPolicy{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.NetworkPolicyName(c)}, np)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(np, c) {
		return nil // not ours
	}
	if err := r.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete NetworkPolicy: %w", err)
	}
	r.Recorder.Eventf(c, np, corev1.EventTypeNormal, ReasonDeleted, "Delete", "NetworkPolicy %s deleted: spec.networkPolicy.enabled is false", np.Name)
	return nil
}
