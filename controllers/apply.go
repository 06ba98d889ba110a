package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// FieldOwner is the server-side apply field manager of everything this operator writes.
const FieldOwner = "etcd-operator"

// applyIfChanged server-side-applies desired unless the fields this operator owns on the existing object
// already hold exactly the desired values. The comparison is what keeps a steady-state reconcile free of
// API writes, and it still catches drift: a field someone else changed is no longer ours (or no longer
// equal), and a deleted object is simply missing.
//
// The cache holds objects without managedFields (CacheOptions strips them: most of a cached object's
// size), so the owned fields are extracted from a live read, made only when the cached object's
// resourceVersion moved since its fields were last found equal.
func applyIfChanged[O client.Object, A any](ctx context.Context, ap objectApplier, existing O, desired *A,
	extract func(O, string) (*A, error),
) (bool, error) {
	c, live, unchanged := ap.c, ap.live, ap.unchanged
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
	cached, err := cachedForm(existing, c.Scheme())
	if err != nil {
		return false, err
	}
	err = c.Get(ctx, key, cached)
	ck := fmt.Sprintf("%T/%s", existing, key)
	hash, hashErr := hashOf(desired)
	switch {
	case err == nil:
		if hashErr == nil && unchanged.is(ck, cached.GetResourceVersion(), hash) {
			return false, nil
		}
		if err := live.Get(ctx, key, existing); apierrors.IsNotFound(err) {
			break // deleted since the cache saw it: create it again
		} else if err != nil {
			return false, fmt.Errorf("get %s: %w", key, err)
		}
		current, err := extract(existing, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("extract owned fields of %s: %w", key, err)
		}
		if equality.Semantic.DeepEqual(current, desired) {
			if hashErr == nil {
				unchanged.set(ck, existing.GetResourceVersion(), hash)
			}
			return false, nil
		}
		if log := logf.FromContext(ctx).V(1); log.Enabled() {
			log.Info("drift from desired state", "object", key, "diff", cmp.Diff(current, desired))
		}
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get %s: %w", key, err)
	}
	unchanged.forget(ck)
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %T %s: %w", existing, key, err)
	}
	// The apply answered with the object as it now is (decoded into desired): exactly the desired
	// fields are ours at the resourceVersion it returned.
	if rv := resourceVersionOf(desired); rv != "" && hashErr == nil {
		unchanged.set(ck, rv, hash)
	}
	return true, nil
}

// deleteOwned deletes the object of obj's type named name when the cluster controls it, for a spec that no
// longer asks for it; what names the object in errors and the Deleted event, why says why it went.
func (r *EtcdClusterReconciler) deleteOwned(ctx context.Context, c *etcdv1beta1.EtcdCluster, kind client.Object, name, what, why string) error {
	obj, err := cachedForm(kind, r.Client.Scheme())
	if err != nil {
		return err
	}
	err = r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(obj, c) {
		return nil // not ours
	}
	uid := obj.GetUID()
	if err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s: %w", what, err)
	}
	r.Recorder.Eventf(c, obj, corev1.EventTypeNormal, ReasonDeleted, "Delete", "%s %s deleted: %s", what, obj.GetName(), why)
	return nil
}

// patchStatusIfChanged writes obj's status with patch when it changed; an object deleted meanwhile has no
// status left to write, which is no error.
func patchStatusIfChanged(ctx context.Context, c client.Client, changed bool, obj client.Object, patch client.Patch) error {
	if !changed {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// objectApplier is what applyIfChanged works with: the reconciler's client, a live reader (the cache holds
// no managedFields), and the reconciler's memory of objects found unchanged.
type objectApplier struct {
	c         client.Client
	live      client.Reader
	unchanged *noopCache
}

// noopCache remembers, per object, the resourceVersion at which the fields this operator owns were last
// found (or made) equal to the desired apply configuration, with a hash of that configuration. While
// neither the object nor the desired configuration changed, applyIfChanged skips extracting the owned
// fields from managedFields, which is most of a steady reconcile's allocation. Any change to the object
// (another writer, a deletion and re-creation, a status update) changes its resourceVersion and brings the
// full comparison back. A nil cache remembers nothing.
func newNoopCache() *noopCache { return &noopCache{entries: map[string]noopEntry{}} }

type noopEntry struct {
	resourceVersion string
	hash            uint64
}

type noopCache struct {
	mu      sync.Mutex
	entries map[string]noopEntry
}

func (n *noopCache) is(key, rv string, hash uint64) bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.entries[key]
	return ok && rv != "" && e.resourceVersion == rv && e.hash == hash
}

// maxNoopEntries bounds the cache (entries of deleted clusters are never looked up again): past it,
// the cache starts over, which costs one full comparison per object.
const maxNoopEntries = 50000

func (n *noopCache) set(key, rv string, hash uint64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.entries) >= maxNoopEntries {
		clear(n.entries)
	}
	n.entries[key] = noopEntry{resourceVersion: rv, hash: hash}
}

func (n *noopCache) forget(key string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.entries, key)
}

func hashOf(desired any) (uint64, error) {
	b, err := json.Marshal(desired)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64(), nil
}

// resourceVersionOf reads the resourceVersion an apply response left in an apply configuration.
func resourceVersionOf(desired any) string {
	v := reflect.ValueOf(desired)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return ""
	}
	if v.Elem().Kind() != reflect.Struct {
		return ""
	}
	sf, ok := v.Elem().Type().FieldByName("ResourceVersion")
	if !ok {
		return ""
	}
	f, err := v.Elem().FieldByIndexErr(sf.Index) // the embedded object metadata may be nil
	if err != nil || f.Kind() != reflect.Pointer || f.IsNil() || f.Elem().Kind() != reflect.String {
		return ""
	}
	return f.Elem().String()
}

// appliedObjects collects, for one reconcile, the objects an apply changed, so the reconcile records one
// Applied event naming them all. One event per reconcile, not one per object: client-go's event
// broadcaster folds events of the same object, reason and action seen within 6 minutes into a series,
// and closes every series with one more PATCH 6 minutes later, a write long after the cluster settled.
type appliedObjects struct{ names []string }

// add logs an apply that changed something and names its object in the reconcile's Applied event.
func (l *appliedObjects) add(ctx context.Context, changed bool, kind, name string) {
	if !changed {
		return
	}
	logf.FromContext(ctx).Info("applied", "kind", kind, "object", name)
	l.names = append(l.names, kind+" "+name)
}

// maxEventNote is the API's limit on an event's note.
const maxEventNote = 1024

// record emits the reconcile's one Applied event, if any apply changed something.
func (l *appliedObjects) record(rec recorder.EventRecorder, c *etcdv1beta1.EtcdCluster) {
	if len(l.names) == 0 {
		return
	}
	note := strings.Join(l.names, ", ") + " applied"
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	rec.Eventf(c, nil, corev1.EventTypeNormal, ReasonApplied, "Apply", "%s", note)
}
