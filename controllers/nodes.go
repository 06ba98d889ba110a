package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/internal/membership"
)

// The nodes read (RBAC, cache, watch, the pod index by node) is spread.go's: both features read the same
// cached Node, reduced by trimNode to its zone label and Ready condition.

// nodeReadiness is what the planner needs of a member pod's node: why it does not run the pod (one of
// membership.NodeNotReady, NodeUnknown, NodeGone; "" while Ready), and since when.
type nodeReadiness struct {
	down  string
	since time.Time
}

func (a nodeReadiness) equal(b nodeReadiness) bool { return a.down == b.down && a.since.Equal(b.since) }

// readinessOf reads a Node's Ready condition. A node without one has never reported: nothing runs there yet.
func readinessOf(n *corev1.Node) nodeReadiness {
	for _, cond := range n.Status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		switch cond.Status {
		case corev1.ConditionTrue:
			return nodeReadiness{}
		case corev1.ConditionFalse:
			return nodeReadiness{down: membership.NodeNotReady, since: cond.LastTransitionTime.Time}
		}
		return nodeReadiness{down: membership.NodeUnknown, since: cond.LastTransitionTime.Time}
	}
	return nodeReadiness{down: membership.NodeUnknown, since: n.CreationTimestamp.Time}
}

// readNode reads the readiness of node name from the cache. A node missing there is confirmed with the API server
// before it counts as gone: a gone node lets a pod be deleted without its kubelet, and the live read
// happens only while the cache has no such node.
func (r *EtcdClusterReconciler) readNode(ctx context.Context, name string) (nodeReadiness, error) {
	n := &corev1.Node{}
	err := r.Get(ctx, client.ObjectKey{Name: name}, n)
	if apierrors.IsNotFound(err) {
		err = r.liveReader().Get(ctx, client.ObjectKey{Name: name}, n)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nodeReadiness{down: membership.NodeGone}, nil
	case err != nil:
		return nodeReadiness{}, err
	}
	return readinessOf(n), nil
}

// observeNodes reads the readiness of the nodes the member pods are bound to.
func (r *EtcdClusterReconciler) observeNodes(ctx context.Context, pods []corev1.Pod) (map[string]nodeReadiness, error) {
	out := map[string]nodeReadiness{}
	for i := range pods {
		name := pods[i].Spec.NodeName
		if _, seen := out[name]; seen || name == "" {
			continue
		}
		nr, err := r.readNode(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = nr
	}
	return out, nil
}
