package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeletePodsAndClaims makes the named member pods lose their data for sure: it deletes each pod's claim
// (data-<pod>) and then the pods, and returns once every old claim is gone. The StatefulSet controller and
// the scheduler read claims from their caches, so on a busy node a pod can be recreated and started on a
// claim that is still being deleted (kubernetes/kubernetes#74374): the kubelet lets it mount the claim, whose
// pvc-protection finalizer then keeps it while the new pod runs on the old data. Such a pod (new, scheduled,
// not terminating, while its old claim still exists) is deleted once more, as an administrator would, and
// logf says so. Polls every poll until timeout.
func DeletePodsAndClaims(ctx context.Context, c client.Client, ns string, pods []string, poll, timeout time.Duration,
	logf func(format string, args ...any)) error {
	oldClaims, oldPods := map[string]types.UID{}, map[string]types.UID{}
	for _, name := range pods {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, pvc); err != nil {
			return err
		}
		oldClaims[name] = pvc.UID
		p := &corev1.Pod{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); {
		case err == nil:
			oldPods[name] = p.UID
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	for _, name := range pods {
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = ns, "data-"+name
		if err := client.IgnoreNotFound(c.Delete(ctx, pvc, client.Preconditions{UID: ptr.To(oldClaims[name])})); err != nil {
			return err
		}
	}
	for _, name := range pods {
		p := &corev1.Pod{}
		p.Namespace, p.Name = ns, name
		if err := client.IgnoreNotFound(c.Delete(ctx, p)); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		remaining := ""
		for _, name := range pods {
			pvc := &corev1.PersistentVolumeClaim{}
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, pvc)
			switch {
			case apierrors.IsNotFound(err), err == nil && pvc.UID != oldClaims[name]:
				continue
			case err != nil:
				return err
			}
			remaining += " data-" + name
			p := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err == nil &&
				p.UID != oldPods[name] && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				logf("pod %s was recreated on its claim while the claim was being deleted: deleting the pod again", name)
				if err := client.IgnoreNotFound(c.Delete(ctx, p, client.Preconditions{UID: &p.UID})); err != nil {
					return err
				}
			}
		}
		if remaining == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claims still there after %s:%s", timeout, remaining)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
