package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
)

func TestSweepStatus(t *testing.T) {
	now := time.Date(2026, 11, 25, 3, 0, 30, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	const nightly = "0 3 * * *"
	running := &etcdv1beta1.DefragmentationSweep{Trigger: "request", StartTime: *at(-time.Minute), Defragmented: []string{"c-1"}}
	cases := []struct {
		name       string
		schedule   etcdv1beta1.CronSchedule
		annotation string
		before     *etcdv1beta1.DefragmentationStatus
		want       *etcdv1beta1.DefragmentationStatus
		started    bool
	}{
		{name: "nothing asked: nothing recorded"},
		{name: "a schedule just set counts from now, starting nothing", schedule: nightly,
			want: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(0)}},
		{name: "a changed schedule counts from now", schedule: "0 4 * * *",
			before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-24 * time.Hour)},
			want:   &etcdv1beta1.DefragmentationStatus{Schedule: "0 4 * * *", LastScheduleTime: at(0)}},
		{name: "not yet due", schedule: nightly,
			before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-30 * time.Second)},
			want:   &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-30 * time.Second)}},
		{name: "due: a sweep starts", schedule: nightly, started: true,
			before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-24*time.Hour - 30*time.Second)},
			want: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-30 * time.Second),
				Current: &etcdv1beta1.DefragmentationSweep{Trigger: "schedule", StartTime: *at(0)}}},
		{name: "due while a sweep is under way: covered by it", schedule: nightly,
			before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-24*time.Hour - 30*time.Second), Current: running},
			want:   &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-30 * time.Second), Current: running}},
		{name: "a request starts a sweep", annotation: "now", started: true,
			want: &etcdv1beta1.DefragmentationStatus{LastRequest: "now", Current: &etcdv1beta1.DefragmentationSweep{Trigger: "request", StartTime: *at(0)}}},
		{name: "a request already served starts nothing", annotation: "now",
			before: &etcdv1beta1.DefragmentationStatus{LastRequest: "now", LastCompletionTime: at(-time.Hour)},
			want:   &etcdv1beta1.DefragmentationStatus{LastRequest: "now", LastCompletionTime: at(-time.Hour)}},
		{name: "a request waits for the sweep under way", annotation: "again",
			before: &etcdv1beta1.DefragmentationStatus{LastRequest: "now", Current: running},
			want:   &etcdv1beta1.DefragmentationStatus{LastRequest: "now", Current: running}},
		{name: "a removed schedule is forgotten, the rest kept",
			before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-time.Hour), LastCompletionTime: at(-time.Hour)},
			want:   &etcdv1beta1.DefragmentationStatus{LastCompletionTime: at(-time.Hour)}},
		{name: "nothing left: no status at all", before: &etcdv1beta1.DefragmentationStatus{Schedule: nightly, LastScheduleTime: at(-time.Hour)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1beta1.EtcdCluster{}
			c.Spec.Defragmentation.Schedule = tc.schedule
			c.Status.Defragmentation = tc.before.DeepCopy()
			if tc.annotation != "" {
				c.Annotations = map[string]string{etcdv1beta1.DefragmentAnnotation: tc.annotation}
			}
			got, started, err := sweepStatus(c, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || started != tc.started {
				t.Fatalf("started %v, want %v; status (-want +got):\n%s", started, tc.started, diff)
			}
		})
	}
}

func TestSweepStatusRefusesAScheduleThatNeverFallsDue(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{}
	c.Spec.Defragmentation.Schedule = "0 0 30 2 *"
	c.Status.Defragmentation = &etcdv1beta1.DefragmentationStatus{Schedule: "0 0 30 2 *", LastScheduleTime: &metav1.Time{Time: time.Now()}}
	if _, _, err := sweepStatus(c, time.Now()); err == nil {
		t.Fatal("no error for February 30th")
	}
}

// TestRequeueAfterComesBackWhenTheScheduleFallsDue: a cluster at rest is looked at again when its sweep falls due.
func TestRequeueAfterComesBackWhenTheScheduleFallsDue(t *testing.T) {
	now := time.Date(2026, 11, 25, 2, 59, 0, 0, time.UTC)
	r := &EtcdClusterReconciler{Clock: clocktesting.NewFakePassiveClock(now)}
	c := &etcdv1beta1.EtcdCluster{}
	c.Spec.Defragmentation.Schedule = "0 3 * * *"
	c.Status.Defragmentation = &etcdv1beta1.DefragmentationStatus{Schedule: "0 3 * * *", LastScheduleTime: &metav1.Time{Time: now.Add(-time.Hour)}}
	if got := r.requeueAfter(c, observation{}, membership.Decision{}, false, false); got != 61*time.Second {
		t.Fatalf("requeueAfter = %v, want 61s (the schedule's next time, a second late)", got)
	}
	obs, stable := observation{pods: []corev1.Pod{{}}}, membership.Decision{Phase: membership.PhaseStable}
	if got := r.requeueAfter(c, obs, stable, false, false); got != r.healthInterval() {
		t.Fatalf("a running cluster: requeueAfter = %v, want the health interval %v, sooner than the schedule", got, r.healthInterval())
	}
	c.Status.Defragmentation.Current = &etcdv1beta1.DefragmentationSweep{Trigger: "request"}
	if got := r.requeueAfter(c, obs, stable, false, false); got != r.stepInterval() {
		t.Fatalf("a sweep under way: requeueAfter = %v, want the step interval %v", got, r.stepInterval())
	}
}

// TestRequeueAfterARoutineDefragmentation: after one member's routine defragmentation the next member is looked
// at after the step interval, not a health interval later (three members then take seconds, not minutes).
func TestRequeueAfterARoutineDefragmentation(t *testing.T) {
	r := &EtcdClusterReconciler{}
	c := &etcdv1beta1.EtcdCluster{}
	obs, stable := observation{pods: []corev1.Pod{{}}}, membership.Decision{Phase: membership.PhaseStable}
	if got := r.requeueAfter(c, obs, stable, false, false); got != r.healthInterval() {
		t.Fatalf("nothing taken: requeueAfter = %v, want the health interval %v", got, r.healthInterval())
	}
	if got := r.requeueAfter(c, obs, stable, true, false); got != r.stepInterval() {
		t.Fatalf("a defragmentation taken: requeueAfter = %v, want the step interval %v", got, r.stepInterval())
	}
}
