package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/seedops/etcd-operator/internal/membership"
)

// Nodes are cluster-scoped: their rule is a ClusterRole of its own, bound cluster-wide (config/rbac), so it
// lands in the bundle's clusterPermissions while the manager's namespaced rules stay under permissions.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch,roleName=node-reader-role

// podNodeNameField indexes the cached pods by the node they are bound to, so a node's change maps to the
// clusters with members there without listing every pod.
const podNodeNameField = "spec.nodeName"

// podNodeName is podNodeNameField's index function.
func podNodeName(o client.Object) []string {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}
	}
	return nil
}

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

// nodeToClusters maps a node to the clusters with member pods bound to it.
func (r *EtcdClusterReconciler) nodeToClusters(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingFields{podNodeNameField: o.GetName()}); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		for _, req := range podToCluster(ctx, &pods.Items[i]) {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				out = append(out, req)
			}
		}
	}
	return out
}

// nodeReadinessChanged passes a node's creation and deletion, and updates that change its readiness: a
// node's status is rewritten as its kubelet reports, and none of that but Ready matters here.
var nodeReadinessChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Node)
		after, ok2 := e.ObjectNew.(*corev1.Node)
		return !ok1 || !ok2 || !readinessOf(before).equal(readinessOf(after))
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// trimNode drops the node's image list, most of a Node's size, which the operator never reads.
func trimNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
}
