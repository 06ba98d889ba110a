package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// unmanagedSecretRetry is how often a Secret left alone for lack of the operator's label is looked at
// again: relabelling it brings it into the cache, but a Secret without the cluster's owner reference
// sends no event.
const unmanagedSecretRetry = 15 * time.Second

// unmanagedSecret stops a phase that would create one of the Secrets the cluster relies on (its CA, root's
// password) because a Secret of that name exists without the operator's managed-by label. The operator's
// cache holds only labelled Secrets, so such a Secret looks missing there; creating it anew would replace
// the CA every certificate chains to, or a password etcd already holds. Status reports it under
// ReasonSecretNotManaged.
type unmanagedSecret struct{ msg string }

func (e unmanagedSecret) Error() string { return e.msg }

// liveSecret reads Secret name from the API server, for a phase about to create it: the cache holds only
// Secrets with the operator's managed-by label, so a miss there (the label removed, the cache not synced
// yet) is no proof that none exists. It returns the Secret when it carries the label (the cache was behind),
// nil when there is none, and an unmanagedSecret error, with a Warning event, when one exists without the
// label: that Secret is left untouched. holds says what the Secret keeps, lost what replacing it would break.
func (r *EtcdClusterReconciler) liveSecret(ctx context.Context, c *etcdv1beta1.EtcdCluster, name, holds, lost string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Secret %s: %w", name, err)
	}
	if s.Labels[resources.LabelManagedBy] == resources.ManagedBy {
		return s, nil
	}
	msg := fmt.Sprintf("Secret %s exists without the label %s=%s, so the operator left it untouched: it may hold %s, "+
		"and replacing it would %s. If it is this cluster's, restore the label (kubectl label secret -n %s %s %s=%s); "+
		"if not, move it out of the way so the operator can create its own",
		name, resources.LabelManagedBy, resources.ManagedBy, holds, lost, c.Namespace, name, resources.LabelManagedBy, resources.ManagedBy)
	r.Recorder.Eventf(c, s, corev1.EventTypeWarning, ReasonSecretNotManaged, "Refuse", "%s", msg)
	return nil, waitError{unmanagedSecret{msg}, unmanagedSecretRetry}
}
