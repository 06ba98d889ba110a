package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// reconcileSnapshotServer runs the snapshot server while the members' template restores from a claim (a
// bootstrap until status records the restore, a quorum-loss recovery until its record ends: templateRestore),
// and deletes it then; its token Secret stays with the cluster. It runs before the StatefulSet's phase, so
// the Secret the restore step's environment names exists when the members start.
func (r *EtcdClusterReconciler) reconcileSnapshotServer(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	src := s.templateRestore()
	if !resources.ServedBySnapshotServer(src) {
		const why = "no member restores from a backup claim"
		name := resources.SnapshotServerName(c)
		if err := r.deleteOwned(ctx, c, &appsv1.StatefulSet{}, name, "snapshot server StatefulSet", why); err != nil {
			return err
		}
		if err := r.deleteOwned(ctx, c, &corev1.Service{}, name, "snapshot server Service", why); err != nil {
			return err
		}
		return r.deleteOwned(ctx, c, &networkingv1.NetworkPolicy{}, name, "snapshot server NetworkPolicy", why)
	}
	if err := r.snapshotServerToken(ctx, c); err != nil {
		return err
	}
	changed, err := applyIfChanged(ctx, r.objects(), &networkingv1.NetworkPolicy{}, resources.SnapshotServerNetworkPolicy(c), networkingv1ac.ExtractNetworkPolicy)
	s.applied.add(ctx, changed, "NetworkPolicy", resources.SnapshotServerName(c))
	if err != nil {
		return err
	}
	changed, err = applyIfChanged(ctx, r.objects(), &corev1.Service{}, resources.SnapshotServerService(c), corev1ac.ExtractService)
	s.applied.add(ctx, changed, "Service", resources.SnapshotServerName(c))
	if err != nil {
		return err
	}
	changed, err = applyIfChanged(ctx, r.objects(), &appsv1.StatefulSet{}, resources.SnapshotServerStatefulSet(c, *src, s.obs.options), appsv1ac.ExtractStatefulSet)
	s.applied.add(ctx, changed, "StatefulSet", resources.SnapshotServerName(c))
	return err
}

// snapshotServerToken makes the server's Secret with a random token, unless it exists. The token never
// changes: members restoring, and a server running, keep reading the one they started with.
func (r *EtcdClusterReconciler) snapshotServerToken(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	name := resources.SnapshotServerName(c)
	secret := &corev1.Secret{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	// Not in the cache, which holds only labelled Secrets: create it only if the API server has none either.
	existing, err := r.liveSecret(ctx, c, name, "the snapshot server's token", "refuse the members restoring with the token they hold")
	if err != nil || existing != nil {
		return err
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	if err := r.Apply(ctx, resources.SnapshotServerSecret(c, base64.RawURLEncoding.EncodeToString(buf)),
		client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("create the snapshot server's Secret %s: %w", name, err)
	}
	return nil
}

// observeSnapshotServer says why members restoring from a claim wait for the snapshot server ("" when it
// serves, or when there is none): its pod is not created, cannot be scheduled (it must run where the claim
// is), has stopped (a snapshot missing from the claim, say), or is not ready yet.
func (r *EtcdClusterReconciler) observeSnapshotServer(ctx context.Context, c *etcdv1beta1.EtcdCluster) (string, error) {
	sts := &appsv1.StatefulSet{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.SnapshotServerName(c)}, sts); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", err
	}
	name := resources.SnapshotServerName(c) + "-0"
	pod := &corev1.Pod{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod); {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("members restoring from a backup claim wait for the snapshot server: its pod %s is not created yet", name), nil
	case err != nil:
		return "", err
	}
	return snapshotServerWait(pod), nil
}

// snapshotServerWait is why the server's pod does not serve yet ("" when it is ready).
func snapshotServerWait(pod *corev1.Pod) string {
	if podReady(pod) {
		return ""
	}
	prefix := "members restoring from a backup claim wait for the snapshot server (pod " + pod.Name + ")"
	if reason := podUnschedulable(pod); reason != "" {
		claim := ""
		for _, ctr := range pod.Spec.Containers {
			for _, a := range ctr.Args {
				if v, ok := strings.CutPrefix(a, "--pvc-claim="); ok {
					claim = " " + v
				}
			}
		}
		return fmt.Sprintf("%s: it must run on the node of the backup claim%s, and cannot be scheduled: %s", prefix, claim, reason)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != resources.SnapshotServerContainerName {
			continue
		}
		if msg, failed := resources.ContainerFailure(cs); failed {
			return fmt.Sprintf("%s: it stopped: %s", prefix, msg)
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return strings.TrimSuffix(fmt.Sprintf("%s: %s: %s", prefix, w.Reason, w.Message), ": ")
		}
	}
	return prefix + ": it is not ready yet"
}
