package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

func nodeWith(conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Status: corev1.NodeStatus{Conditions: conds}}
}

// A node's readiness is its Ready condition: True runs pods, False and Unknown (its kubelet stopped
// reporting) do not, since the condition last changed; a node that never reported runs nothing yet.
func TestReadinessOf(t *testing.T) {
	since := metav1.NewTime(time.Unix(1000, 0))
	pressure := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, LastTransitionTime: since}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want nodeReadiness
	}{
		{"Ready", nodeWith(pressure, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: since}), nodeReadiness{}},
		{"NotReady", nodeWith(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: since}),
			nodeReadiness{down: membership.NodeNotReady, since: since.Time}},
		{"not reporting", nodeWith(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: since}),
			nodeReadiness{down: membership.NodeUnknown, since: since.Time}},
		{"never reported", nodeWith(pressure), nodeReadiness{down: membership.NodeUnknown, since: time.Unix(100, 0)}},
	} {
		if got := readinessOf(tc.node); !got.equal(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Node updates reach the controller only when readiness changes: a kubelet's status reports (heartbeats,
// images, pressure) do not.
func TestNodeReadinessChanged(t *testing.T) {
	ready := func(status corev1.ConditionStatus, at int64) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(time.Unix(at+5, 0)),
			LastTransitionTime: metav1.NewTime(time.Unix(at, 0))}
	}
	heartbeat := nodeWith(ready(corev1.ConditionTrue, 10))
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(99, 0))
	heartbeat.Status.Images = []corev1.ContainerImage{{Names: []string{"etcd"}}}
	for _, tc := range []struct {
		name          string
		before, after *corev1.Node
		want          bool
	}{
		{"heartbeat", nodeWith(ready(corev1.ConditionTrue, 10)), heartbeat, false},
		{"NotReady", nodeWith(ready(corev1.ConditionTrue, 10)), nodeWith(ready(corev1.ConditionFalse, 20)), true},
		{"stopped reporting", nodeWith(ready(corev1.ConditionFalse, 20)), nodeWith(ready(corev1.ConditionUnknown, 30)), true},
		{"back", nodeWith(ready(corev1.ConditionUnknown, 30)), nodeWith(ready(corev1.ConditionTrue, 40)), true},
	} {
		if got := nodeChanged.Update(event.UpdateEvent{ObjectOld: tc.before, ObjectNew: tc.after}); got != tc.want {
			t.Errorf("%s: passed %v, want %v", tc.name, got, tc.want)
		}
	}
	if !nodeChanged.Create(event.CreateEvent{Object: nodeWith()}) || !nodeChanged.Delete(event.DeleteEvent{Object: nodeWith()}) {
		t.Error("a node's creation and deletion must pass")
	}
}

// The planner sees each member pod's node as observed; a pod not bound to a node has none.
func TestPlanInputNodes(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	c.Spec.Replicas = 3
	since := time.Unix(1000, 0)
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, 0)}, Spec: corev1.PodSpec{NodeName: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, 1)}, Spec: corev1.PodSpec{NodeName: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, 2)}},
	}
	obs := observation{podByOrdinal: map[int]*corev1.Pod{0: &pods[0], 1: &pods[1], 2: &pods[2]},
		nodes: map[string]nodeReadiness{"a": {}, "b": {down: membership.NodeUnknown, since: since}}}
	in := obs.planInput(c, time.Unix(2000, 0), time.Minute)
	for ord, want := range map[int]membership.Pod{0: {Node: "a"}, 1: {Node: "b", NodeDown: membership.NodeUnknown, NodeDownSince: since}, 2: {}} {
		got := in.Pods[ord]
		if got.Node != want.Node || got.NodeDown != want.NodeDown || !got.NodeDownSince.Equal(want.NodeDownSince) {
			t.Errorf("pod %d: node %q %q %s, want %q %q %s", ord, got.Node, got.NodeDown, got.NodeDownSince, want.Node, want.NodeDown, want.NodeDownSince)
		}
	}
}

// A node's change reaches each cluster with a member pod bound to it, once, and no other.
func TestNodeToClusters(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, cluster string, ord int, node string) *corev1.Pod {
		c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: ns}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, ord), Namespace: ns,
			Labels: resources.Labels(c, resources.ComponentEtcd)}, Spec: corev1.PodSpec{NodeName: node}}
	}
	cli := fake.NewClientBuilder().WithScheme(s).WithIndex(&corev1.Pod{}, podNodeNameField, podNodeName).WithObjects(
		pod("a", "one", 0, "n1"), pod("a", "one", 1, "n1"), pod("a", "two", 0, "n2"), pod("b", "three", 0, "n1"), pod("b", "four", 0, ""),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "a"}, Spec: corev1.PodSpec{NodeName: "n1"}},
	).Build()
	r := &EtcdClusterReconciler{Client: cli}
	var got []string
	for _, req := range r.nodeToClusters(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}) {
		got = append(got, req.String())
	}
	slices.Sort(got)
	if want := []string{"a/one", "b/three"}; !slices.Equal(got, want) {
		t.Errorf("node n1 maps to %v, want %v", got, want)
	}
}
