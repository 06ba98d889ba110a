package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// A second reconcile that read its cluster before the cache showed the first one's status patch sees the
// same transitions again: they are reported once.
func TestTransitionsReportedOnceDespiteAStaleRead(t *testing.T) {
	rec := &events.FakeRecorder{Events: make(chan string, 10)}
	r := &EtcdClusterReconciler{Recorder: rec, reported: newConditionMemory()}
	stale := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "uid-transitions"}}
	after := stale.DeepCopy()
	after.Status.Conditions = []metav1.Condition{
		{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: ReasonBootstrapping},
		{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "Healthy"},
	}
	r.recordTransitions(stale, after)
	r.recordTransitions(stale, after) // the stale second reconcile
	if n := len(rec.Events); n != 2 {
		t.Fatalf("%d events, want 2 (one per condition)", n)
	}
	back := after.DeepCopy()
	back.Status.Conditions[0].Status, back.Status.Conditions[0].Reason = metav1.ConditionTrue, ReasonQuorumHealthy
	r.recordTransitions(after, back)
	again := back.DeepCopy()
	again.Status.Conditions[0].Status, again.Status.Conditions[0].Reason = metav1.ConditionFalse, ReasonBootstrapping
	r.recordTransitions(back, again)
	if n := len(rec.Events); n != 4 {
		t.Fatalf("%d events, want 4: a real transition back is reported", n)
	}
}
