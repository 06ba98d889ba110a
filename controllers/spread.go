package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Nodes are cluster-scoped: reading them takes a ClusterRole of its own, bound cluster-wide in every install
// mode (config/rbac/node_reader_role_binding.yaml; the CSV's clusterPermissions), while the manager's other
// rules stay namespaced. The operator reads a node's zone label and readiness, nothing else.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch,roleName=manager-node-reader-role

// Reasons of the Spread condition.
const (
	// ReasonVotersSpread: no node or zone holds enough voting members for its loss alone to cost quorum.
	ReasonVotersSpread = "VotersSpread"
	// ReasonVotersShareNode: voting members share a node whose loss alone would cost quorum.
	ReasonVotersShareNode = "VotersShareNode"
	// ReasonVotersShareZone: voting members share a zone whose loss alone would cost quorum.
	ReasonVotersShareZone = "VotersShareZone"
)

// podNodeNameField indexes the cached member pods by the node they run on, for mapping a node's change to
// the clusters with members there.
const podNodeNameField = "spec.nodeName"

func podNodeName(o client.Object) []string {
	if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}
	}
	return nil
}

// nodeToClusters maps a node to the clusters with a member pod on it.
func (r *EtcdClusterReconciler) nodeToClusters(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.MatchingFields{podNodeNameField: o.GetName()}); err != nil {
		return nil
	}
	seen := map[reconcile.Request]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		for _, req := range podToCluster(ctx, &pods.Items[i]) {
			if !seen[req] {
				seen[req] = true
				out = append(out, req)
			}
		}
	}
	return out
}

// nodeChanged passes the node events failure tolerance and lost-node replacement depend on: a node added or
// removed, its zone label or its readiness (and since when) changed. The kubelet's periodic status updates
// change none of these.
var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okNew := e.ObjectNew.(*corev1.Node)
		return !okOld || !okNew || nodeOf(old) != nodeOf(cur) || !readinessOf(old).equal(readinessOf(cur))
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// memberNode is what failure tolerance reads of a member's node.
type memberNode struct {
	// zone is the node's topology.kubernetes.io/zone label ("" without one).
	zone string
	// notReady: the node's Ready condition is False or Unknown (the node controller's verdict on a node
	// it has lost). A node without the condition is not judged.
	notReady bool
}

func nodeOf(n *corev1.Node) memberNode {
	m := memberNode{zone: n.Labels[corev1.LabelTopologyZone]}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			m.notReady = c.Status != corev1.ConditionTrue
		}
	}
	return m
}

// trimNode keeps of a cached node its name, creation time, zone label and Ready condition (with its
// transition time: how long a node has been down decides a lost member's replacement): nodes are many, and
// their status (images, addresses, capacity) is most of their size.
func trimNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	var labels map[string]string
	if zone, ok := n.Labels[corev1.LabelTopologyZone]; ok {
		labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	var conds []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			conds = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	n.ObjectMeta = metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: labels,
		CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp}
	n.Spec = corev1.NodeSpec{}
	n.Status = corev1.NodeStatus{Conditions: conds}
}

// memberNodes reads the nodes the member pods run on from the cache; a node the cache does not hold (gone,
// or not seen yet) is left out.
func (r *EtcdClusterReconciler) memberNodes(ctx context.Context, pods []corev1.Pod) (map[string]memberNode, error) {
	out := map[string]memberNode{}
	for i := range pods {
		name := pods[i].Spec.NodeName
		if _, seen := out[name]; name == "" || seen {
			continue
		}
		n := &corev1.Node{}
		switch err := r.Get(ctx, client.ObjectKey{Name: name}, n); {
		case err == nil:
			out[name] = nodeOf(n)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return out, nil
}

// placedVoter is a voting member as placement sees it.
type placedVoter struct {
	name string
	// node and zone it runs in: "" while its pod is not scheduled (or it has none), and zone "" on a node
	// without a zone label.
	node, zone string
	// up: it counts towards quorum now (healthy, scheduled, its node known and not NotReady).
	up bool
	// managed: a member of the operator's (one of its pods' ordinals), whose pod is to be scheduled.
	managed bool
}

// placedVoters lists the voting members of status with their placement: every non-learner member (members
// the operator did not add vote too, and count towards quorum, though their placement is unknown).
func placedVoters(c *etcdv1beta1.EtcdCluster, obs observation, members []etcdv1beta1.MemberStatus) []placedVoter {
	var out []placedVoter
	for _, m := range members {
		if m.Learner {
			continue
		}
		v := placedVoter{name: m.Name}
		if ord := resources.MemberOrdinal(c, m.Name); ord >= 0 && !m.Unknown {
			v.managed = true
			if p := obs.podByOrdinal[ord]; p != nil {
				v.node = p.Spec.NodeName
			}
		}
		if n, ok := obs.placement[v.node]; ok && v.node != "" {
			v.zone, v.up = n.zone, m.Healthy && !n.notReady
		}
		out = append(out, v)
	}
	return out
}

func byNode(v placedVoter) string { return v.node }
func byZone(v placedVoter) string { return v.zone }

// tolerated is how many domains (nodes or zones, by domain) the voters survive losing at once: the largest
// k such that losing the k domains holding the most voters that are up leaves a quorum of all voters up. A
// voter in no known domain (its zone unknown) counts as lost in every failure, so the figure is one the
// cluster is sure to survive.
func tolerated(voters []placedVoter, domain func(placedVoter) string) int32 {
	quorum := len(voters)/2 + 1
	up, perDomain := 0, map[string]int{}
	for _, v := range voters {
		if d := domain(v); v.up && d != "" {
			up++
			perDomain[d]++
		}
	}
	counts := slices.SortedFunc(maps.Values(perDomain), func(a, b int) int { return b - a })
	var k int32
	for _, n := range counts {
		if up-n < quorum {
			break
		}
		up -= n
		k++
	}
	return k
}

// sharedDomain is the node or zone (by domain) holding the most voters, when it holds two or more and
// losing it alone would leave fewer than a quorum of voters, whatever their health: a placement that one
// failure can take quorum from, which a member on a domain of its own would not. Its voters are named.
func sharedDomain(voters []placedVoter, domain func(placedVoter) string) (string, []string) {
	quorum := len(voters)/2 + 1
	held := map[string][]string{}
	for _, v := range voters {
		if d := domain(v); d != "" {
			held[d] = append(held[d], v.name)
		}
	}
	var worst string
	for _, d := range slices.Sorted(maps.Keys(held)) {
		if n := len(held[d]); n >= 2 && len(voters)-n < quorum && n > len(held[worst]) {
			worst = d
		}
	}
	if worst == "" {
		return "", nil
	}
	names := slices.Clone(held[worst])
	slices.Sort(names)
	return worst, names
}

// spreadCondition judges the voters' placement: False when a node, else a zone, holds voters whose loss
// would cost quorum, True otherwise. It needs every voter of the operator's scheduled: while one is not (a
// member being recreated, which may land anywhere) ok is false and the last judgement stands, so that a
// rolling restart does not flip the condition, and its events, with each member.
func spreadCondition(voters []placedVoter) (st conditionState, ok bool) {
	nodes, zones := map[string]bool{}, map[string]bool{}
	var unzoned []string
	for _, v := range voters {
		if v.managed && v.node == "" {
			return conditionState{}, false
		}
		if v.node == "" {
			continue
		}
		nodes[v.node] = true
		if v.zone != "" {
			zones[v.zone] = true
		} else if !slices.Contains(unzoned, v.node) {
			unzoned = append(unzoned, v.node)
		}
	}
	if len(nodes) == 0 {
		return conditionState{}, false
	}
	quorum := len(voters)/2 + 1
	lost := func(kind, d string, names []string) string {
		return fmt.Sprintf("%s %s holds voting members %s: losing it leaves %d of %d voters, below the quorum of %d",
			kind, d, strings.Join(names, ", "), len(voters)-len(names), len(voters), quorum)
	}
	if d, names := sharedDomain(voters, byNode); d != "" {
		return conditionState{metav1.ConditionFalse, ReasonVotersShareNode, lost("node", d, names)}, true
	}
	if d, names := sharedDomain(voters, byZone); d != "" {
		return conditionState{metav1.ConditionFalse, ReasonVotersShareZone, lost("zone", d, names)}, true
	}
	msg := fmt.Sprintf("%s on %s in %s: no node or zone holds enough of them for its loss alone to cost quorum",
		count(len(voters), "voting member"), count(len(nodes), "node"), count(len(zones), "zone"))
	if len(unzoned) > 0 {
		slices.Sort(unzoned)
		msg += fmt.Sprintf("; the zone of %s is unknown (no %s label, or the node is gone): its voters count as lost in every zone failure",
			count(len(unzoned), "node")+" "+strings.Join(unzoned, ", "), corev1.LabelTopologyZone)
	}
	return conditionState{metav1.ConditionTrue, ReasonVotersSpread, msg}, true
}

// count is "1 node", "3 nodes".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// spreadStatus sets status.failureTolerance from the voters of members (status's, as this reconcile
// computed them), and judges their placement for the Spread condition (ok false: keep the last judgement).
// Nothing while there is no voter. The placement is judged only once the cluster has formed: before, the
// voters are the member pods seen so far, and a bootstrap seen half-way (two of three pods created) would
// be judged as a cluster of two.
func spreadStatus(s *etcdv1beta1.EtcdClusterStatus, c *etcdv1beta1.EtcdCluster, obs observation, members []etcdv1beta1.MemberStatus) (conditionState, bool) {
	voters := placedVoters(c, obs, members)
	if len(voters) == 0 {
		return conditionState{}, false
	}
	s.FailureTolerance = &etcdv1beta1.FailureTolerance{Nodes: tolerated(voters, byNode), Zones: tolerated(voters, byZone)}
	if !obs.formed(c) {
		return conditionState{}, false
	}
	return spreadCondition(voters)
}
