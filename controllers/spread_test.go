package controllers

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// layout builds voters from "node/zone" places, all up: "" is a voter not scheduled, "n1/" one on a node
// without a zone label.
func layout(places ...string) []placedVoter {
	out := make([]placedVoter, len(places))
	for i, p := range places {
		node, zone, _ := strings.Cut(p, "/")
		out[i] = placedVoter{name: fmt.Sprintf("m-%d", i), node: node, zone: zone, up: node != "", managed: true}
	}
	return out
}

// down marks voters i as not up (unhealthy, or on a node that is NotReady).
func down(vs []placedVoter, i ...int) []placedVoter {
	for _, j := range i {
		vs[j].up = false
	}
	return vs
}

func TestTolerated(t *testing.T) {
	for name, tc := range map[string]struct {
		voters       []placedVoter
		nodes, zones int32
	}{
		"one voter: nothing to spare":                 {layout("n1/a"), 0, 0},
		"3 voters on 3 nodes in 3 zones":              {layout("n1/a", "n2/b", "n3/c"), 1, 1},
		"3 voters on 2 nodes":                         {layout("n1/a", "n1/a", "n2/b"), 0, 0},
		"3 voters on 3 nodes in 2 zones":              {layout("n1/a", "n2/a", "n3/b"), 1, 0},
		"3 voters on 3 nodes in one zone":             {layout("n1/a", "n2/a", "n3/a"), 1, 0},
		"3 voters, nodes without zone labels":         {layout("n1/", "n2/", "n3/"), 1, 0},
		"3 voters, one not scheduled":                 {layout("n1/a", "n2/b", ""), 0, 0},
		"3 voters, one down":                          {down(layout("n1/a", "n2/b", "n3/c"), 2), 0, 0},
		"3 voters, two down: quorum already lost":     {down(layout("n1/a", "n2/b", "n3/c"), 1, 2), 0, 0},
		"5 voters on 5 nodes in 5 zones":              {layout("n1/a", "n2/b", "n3/c", "n4/d", "n5/e"), 2, 2},
		"5 voters in 3 zones, 2-2-1":                  {layout("n1/a", "n2/a", "n3/b", "n4/b", "n5/c"), 2, 1},
		"5 voters in 3 zones, 3-1-1":                  {layout("n1/a", "n2/a", "n3/a", "n4/b", "n5/c"), 2, 0},
		"5 voters on 3 nodes, 2-2-1":                  {layout("n1/a", "n1/a", "n2/b", "n2/b", "n3/c"), 1, 1},
		"5 voters in 3 zones, 2-2-1, one down":        {down(layout("n1/a", "n2/a", "n3/b", "n4/b", "n5/c"), 4), 1, 0},
		"5 voters, one zone unknown: counted as lost": {layout("n1/a", "n2/b", "n3/c", "n4/d", "n5/"), 2, 1},
		"5 voters, two zones unknown":                 {layout("n1/a", "n2/b", "n3/c", "n4/", "n5/"), 2, 0},
		"7 voters in 3 zones, 3-2-2":                  {layout("n1/a", "n2/a", "n3/a", "n4/b", "n5/b", "n6/c", "n7/c"), 3, 1},
		"7 voters in 4 zones, 2-2-2-1":                {layout("n1/a", "n2/a", "n3/b", "n4/b", "n5/c", "n6/c", "n7/d"), 3, 1},
		"7 voters in 7 zones":                         {layout("n1/a", "n2/b", "n3/c", "n4/d", "n5/e", "n6/f", "n7/g"), 3, 3},
		"4 voters mid-scale on 4 nodes":               {layout("n1/a", "n2/b", "n3/c", "n4/d"), 1, 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tolerated(tc.voters, byNode); got != tc.nodes {
				t.Errorf("node failures tolerated: %d, want %d", got, tc.nodes)
			}
			if got := tolerated(tc.voters, byZone); got != tc.zones {
				t.Errorf("zone failures tolerated: %d, want %d", got, tc.zones)
			}
		})
	}
}

func TestSpreadCondition(t *testing.T) {
	stranger := placedVoter{name: "stranger"} // a member the operator did not add: no pod, placement unknown
	for name, tc := range map[string]struct {
		voters  []placedVoter
		judged  bool
		status  metav1.ConditionStatus
		reason  string
		message []string
	}{
		"3 voters on 3 nodes in 3 zones": {voters: layout("n1/a", "n2/b", "n3/c"), judged: true,
			status: metav1.ConditionTrue, reason: ReasonVotersSpread, message: []string{"3 voting members on 3 nodes in 3 zones"}},
		"a single voter": {voters: layout("n1/a"), judged: true, status: metav1.ConditionTrue, reason: ReasonVotersSpread,
			message: []string{"1 voting member on 1 node in 1 zone:"}},
		"two of 3 voters on one node": {voters: layout("n1/a", "n2/b", "n1/a"), judged: true,
			status: metav1.ConditionFalse, reason: ReasonVotersShareNode,
			message: []string{"node n1 holds voting members m-0, m-2", "leaves 1 of 3 voters, below the quorum of 2"}},
		"two of 3 voters in one zone": {voters: layout("n1/a", "n2/a", "n3/b"), judged: true,
			status: metav1.ConditionFalse, reason: ReasonVotersShareZone, message: []string{"zone a holds voting members m-0, m-1"}},
		"a shared node is reported before a shared zone": {voters: layout("n1/a", "n1/a", "n2/a"), judged: true,
			status: metav1.ConditionFalse, reason: ReasonVotersShareNode, message: []string{"node n1"}},
		"5 voters, two per node is not enough to cost quorum": {voters: layout("n1/a", "n1/a", "n2/b", "n2/b", "n3/c"), judged: true,
			status: metav1.ConditionTrue, reason: ReasonVotersSpread},
		"5 voters, three on one node": {voters: layout("n1/a", "n1/a", "n1/a", "n2/b", "n3/c"), judged: true,
			status: metav1.ConditionFalse, reason: ReasonVotersShareNode, message: []string{"leaves 2 of 5 voters, below the quorum of 3"}},
		"5 voters in 3 zones, 2-2-1": {voters: layout("n1/a", "n2/a", "n3/b", "n4/b", "n5/c"), judged: true,
			status: metav1.ConditionTrue, reason: ReasonVotersSpread},
		"placement, not health, is judged": {voters: down(layout("n1/a", "n2/b", "n3/c"), 0, 1), judged: true,
			status: metav1.ConditionTrue, reason: ReasonVotersSpread},
		"nodes without zone labels": {voters: layout("n1/", "n2/", "n3/a"), judged: true,
			status: metav1.ConditionTrue, reason: ReasonVotersSpread,
			message: []string{"the zone of 2 nodes n1, n2 is unknown (no topology.kubernetes.io/zone label"}},
		"a voter being recreated: the last judgement stands": {voters: layout("n1/a", "n1/a", "")},
		"no voter scheduled yet":                             {voters: layout("", "", "")},
		"a member the operator did not add counts towards quorum only": {voters: append(layout("n1/a", "n1/a", "n2/b"), stranger), judged: true,
			status: metav1.ConditionFalse, reason: ReasonVotersShareNode, message: []string{"leaves 2 of 4 voters, below the quorum of 3"}},
	} {
		t.Run(name, func(t *testing.T) {
			st, judged := spreadCondition(tc.voters)
			if judged != tc.judged {
				t.Fatalf("judged %v, want %v (%+v)", judged, tc.judged, st)
			}
			if !judged {
				return
			}
			if st.status != tc.status || st.reason != tc.reason {
				t.Errorf("%s/%s, want %s/%s: %s", st.status, st.reason, tc.status, tc.reason, st.message)
			}
			for _, m := range tc.message {
				if !strings.Contains(st.message, m) {
					t.Errorf("message %q does not say %q", st.message, m)
				}
			}
		})
	}
}

// TestPlacedVoters: voters come from status's members (learners do not vote), with their pods' nodes; a
// voter counts as up only while healthy on a known node that is not NotReady.
func TestPlacedVoters(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	pod := func(i int, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i)}, Spec: corev1.PodSpec{NodeName: node}}
	}
	obs := observation{
		podByOrdinal: map[int]*corev1.Pod{0: pod(0, "n1"), 1: pod(1, "n2"), 2: pod(2, ""), 3: pod(3, "n3"), 4: pod(4, "gone"), 5: pod(5, "n1")},
		placement:    map[string]memberNode{"n1": {zone: "a"}, "n2": {zone: "b", notReady: true}, "n3": {}},
	}
	members := []etcdv1beta1.MemberStatus{
		{Name: "c-0", Healthy: true},
		{Name: "c-1", Healthy: true},
		{Name: "c-2", Healthy: true},
		{Name: "c-3", Healthy: false},
		{Name: "c-4", Healthy: true},
		{Name: "c-5", Healthy: true, Learner: true},
		{Name: "stranger", Healthy: true, Unknown: true},
	}
	want := []placedVoter{
		{name: "c-0", node: "n1", zone: "a", up: true, managed: true},
		{name: "c-1", node: "n2", zone: "b", managed: true}, // its node is NotReady
		{name: "c-2", managed: true},                        // not scheduled
		{name: "c-3", node: "n3", managed: true},            // unhealthy, on a node without a zone label
		{name: "c-4", node: "gone", managed: true},          // on a node the cache does not hold
		{name: "stranger"},
	}
	if diff := cmp.Diff(want, placedVoters(c, obs, members), cmp.AllowUnexported(placedVoter{})); diff != "" {
		t.Errorf("voters (-want +got):\n%s", diff)
	}

	obs.reachable = true
	s := &etcdv1beta1.EtcdClusterStatus{}
	if _, judged := spreadStatus(s, c, obs, nil); judged || s.FailureTolerance != nil {
		t.Errorf("no voter: judged %v, tolerance %+v", judged, s.FailureTolerance)
	}
	if _, judged := spreadStatus(s, c, obs, members); judged || s.FailureTolerance == nil || *s.FailureTolerance != (etcdv1beta1.FailureTolerance{}) {
		t.Errorf("a voter not scheduled: judged %v, tolerance %+v", judged, s.FailureTolerance)
	}
	placed := members[:2]
	if st, judged := spreadStatus(s, c, obs, placed); !judged || st.reason != ReasonVotersSpread || *s.FailureTolerance != (etcdv1beta1.FailureTolerance{}) {
		t.Errorf("two voters on two nodes, one NotReady: judged %v %+v, tolerance %+v", judged, st, s.FailureTolerance)
	}
	// Before the cluster formed, the voters are the pods seen so far: no judgement yet.
	obs.reachable = false
	if _, judged := spreadStatus(s, c, obs, placed); judged || s.FailureTolerance == nil {
		t.Errorf("before the cluster formed: judged %v, tolerance %+v", judged, s.FailureTolerance)
	}
}

// Nodes enter the cache as their zone label and readiness; a node event reaches the clusters only when one
// of them changed.
func TestCachedNodes(t *testing.T) {
	var transform func(any) (any, error)
	for obj, by := range CacheOptions("etcd-a").ByObject {
		if _, ok := obj.(*corev1.Node); ok {
			transform = by.Transform
			if by.Label != nil || by.Namespaces != nil {
				t.Errorf("nodes are read whatever their labels, cluster-wide: %+v", by)
			}
		}
	}
	if transform == nil {
		t.Fatal("Node: no transform")
	}
	node := func(zone string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7", Labels: map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: "n1"},
				Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
			Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: ready, Message: "kubelet is posting ready status"}},
				Images: []corev1.ContainerImage{{Names: []string{"etcd"}, SizeBytes: 1 << 20}}},
		}
	}
	n := node("a", corev1.ConditionTrue)
	if _, err := transform(n); err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7", Labels: map[string]string{corev1.LabelTopologyZone: "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if diff := cmp.Diff(want, n); diff != "" {
		t.Errorf("cached node (-want +got):\n%s", diff)
	}
	if got := nodeOf(n); got != (memberNode{zone: "a"}) {
		t.Errorf("read as %+v", got)
	}
	if got := nodeOf(&corev1.Node{}); got != (memberNode{}) {
		t.Errorf("a node without labels and conditions read as %+v", got)
	}

	for name, tc := range map[string]struct {
		old, cur *corev1.Node
		want     bool
	}{
		"a status update":     {node("a", corev1.ConditionTrue), node("a", corev1.ConditionTrue), false},
		"zone label changed":  {node("a", corev1.ConditionTrue), node("b", corev1.ConditionTrue), true},
		"became NotReady":     {node("a", corev1.ConditionTrue), node("a", corev1.ConditionFalse), true},
		"readiness unknown":   {node("a", corev1.ConditionTrue), node("a", corev1.ConditionUnknown), true},
		"back to Ready again": {node("a", corev1.ConditionUnknown), node("a", corev1.ConditionTrue), true},
	} {
		if got := nodeChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("%s: passed %v, want %v", name, got, tc.want)
		}
	}
	if !nodeChanged.Create(event.CreateEvent{Object: node("a", corev1.ConditionTrue)}) || !nodeChanged.Delete(event.DeleteEvent{Object: node("a", corev1.ConditionTrue)}) {
		t.Error("a node added or removed must reach the clusters on it")
	}
}
