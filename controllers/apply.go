package controllers

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// FieldOwner is the server-side apply field manager of everything this operator writes.
const FieldOwner = "etcd-operator"

// applyIfChanged server-side-applies desired unless the fields this operator owns on the existing object
// already hold exactly the desired values. The comparison is what keeps a steady-state reconcile free of
// API writes, and it still catches drift: a field someone else changed is no longer ours (or no longer
// equal), and a deleted object is simply missing.
func applyIfChanged[O client.Object, A any](ctx context.Context, c client.Client, existing O, desired *A,
	extract func(O, string) (*A, error),
) (bool, error) {
	ac, ok := any(desired).(runtime.ApplyConfiguration)
	if !ok {
		return false, fmt.Errorf("%T is not an apply configuration", desired)
	}
	meta, ok := any(desired).(interface {
		GetName() *string
		GetNamespace() *string
	})
	if !ok {
		return false, fmt.Errorf("%T has no object metadata", desired)
	}
	key := client.ObjectKey{Namespace: *meta.GetNamespace(), Name: *meta.GetName()}
	err := c.Get(ctx, key, existing)
	switch {
	case err == nil:
		current, err := extract(existing, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("extract owned fields of %s: %w", key, err)
		}
		if equality.Semantic.DeepEqual(current, desired) {
			return false, nil
		}
		if log := logf.FromContext(ctx).V(1); log.Enabled() {
			log.Info("drift from desired state", "object", key, "diff", cmp.Diff(current, desired))
		}
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get %s: %w", key, err)
	}
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %T %s: %w", existing, key, err)
	}
	return true, nil
}

// appliedObjects collects, for one reconcile, the objects an apply changed, so the reconcile records one
// Applied event naming them all. One event per reconcile, not one per object: client-go's event
// broadcaster folds events of the same object, reason and action seen within 6 minutes into a series,
// and closes every series with one more PATCH 6 minutes later, a write long after the cluster settled.
type appliedObjects struct{ names []string }

type appliedObjectsKey struct{}

// withAppliedObjects returns a context whose applies are collected in the returned list.
func withAppliedObjects(ctx context.Context) (context.Context, *appliedObjects) {
	l := &appliedObjects{}
	return context.WithValue(ctx, appliedObjectsKey{}, l), l
}

// maxEventNote is the API's limit on an event's note.
const maxEventNote = 1024

// record emits the reconcile's one Applied event, if any apply changed something.
func (l *appliedObjects) record(r *EtcdClusterReconciler, c *etcdv1alpha1.EtcdCluster) {
	if len(l.names) == 0 {
		return
	}
	note := strings.Join(l.names, ", ") + " applied"
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonApplied, "Apply", "%s", note)
}
