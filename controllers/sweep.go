package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
)

// Sweeps defragment every member in turn (internal/maintenance, sweep.go): on spec.defragmentation.schedule
// or when the etcd.seedops.io/defragment annotation takes a new value. status.defragmentation holds the one
// under way, so a restarted operator carries on where it stopped.

// sweepStatus returns status.defragmentation at now: a sweep started if one is due and none is under way.
// A scheduled time that falls while a sweep is under way is covered by it; a request waits for it to finish
// (the member it already did would otherwise be skipped). The schedule's times count from when it was set,
// so setting one does not start a sweep for times before.
func sweepStatus(c *etcdv1beta1.EtcdCluster, now time.Time) (st *etcdv1beta1.DefragmentationStatus, started bool, err error) {
	st = &etcdv1beta1.DefragmentationStatus{}
	if c.Status.Defragmentation != nil {
		st = c.Status.Defragmentation.DeepCopy()
	}
	start := func(trigger string) {
		st.Current, started = &etcdv1beta1.DefragmentationSweep{Trigger: trigger, StartTime: metav1.NewTime(now)}, true
	}
	switch schedule := string(c.Spec.Defragmentation.Schedule); {
	case schedule == "":
		st.Schedule, st.LastScheduleTime = "", nil
	case st.Schedule != schedule || st.LastScheduleTime == nil:
		st.Schedule, st.LastScheduleTime = schedule, &metav1.Time{Time: now}
	default:
		latest, _, err := maintenance.LatestScheduled(schedule, st.LastScheduleTime.Time, now)
		if err != nil {
			return nil, false, fmt.Errorf("spec.defragmentation.schedule: %w", err)
		}
		if !latest.IsZero() {
			st.LastScheduleTime = &metav1.Time{Time: latest}
			if st.Current == nil {
				start(maintenance.TriggerSchedule)
			}
		}
	}
	if request := c.Annotations[etcdv1beta1.DefragmentAnnotation]; request != "" && request != st.LastRequest && st.Current == nil {
		st.LastRequest = request
		start(maintenance.TriggerRequest)
	}
	if equality.Semantic.DeepEqual(st, &etcdv1beta1.DefragmentationStatus{}) {
		return nil, false, nil
	}
	return st, started, nil
}

// sweepUnderWay reports whether a sweep is under way (as of this reconcile's status).
func sweepUnderWay(c *etcdv1beta1.EtcdCluster) bool {
	return c.Status.Defragmentation != nil && c.Status.Defragmentation.Current != nil
}

// nextSweep is when spec.defragmentation.schedule next falls due (zero without a schedule).
func nextSweep(c *etcdv1beta1.EtcdCluster, now time.Time) time.Time {
	st := c.Status.Defragmentation
	if c.Spec.Defragmentation.Schedule == "" || st == nil || st.LastScheduleTime == nil {
		return time.Time{}
	}
	_, next, err := maintenance.LatestScheduled(string(c.Spec.Defragmentation.Schedule), st.LastScheduleTime.Time, now)
	if err != nil {
		return time.Time{}
	}
	return next
}

// reconcileSweep starts a sweep when one is due and takes its next step: one member defragmented, or the
// sweep finished. It waits, saying for what in status, while NOSPACE recovery or a membership change is
// under way or a member is unhealthy.
func (r *EtcdClusterReconciler) reconcileSweep(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	st, started, err := sweepStatus(c, r.now())
	if err != nil {
		return err
	}
	c.Status.Defragmentation = st
	if !sweepUnderWay(c) {
		return nil
	}
	sweep := st.Current
	if started {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonDefragmentationStarted, "Defragment",
			"defragmenting every member in turn, followers first, the leader last (%s)", sweepCause(c, sweep))
	}
	switch {
	case s.space.Kind != maintenance.SpaceNone:
		sweep.Waiting = "waiting for NOSPACE recovery: " + s.space.Reason
		return nil
	case s.decision.Phase != membership.PhaseStable || s.decision.Action.Type != membership.ActionNone:
		sweep.Waiting = "waiting for the membership to be stable: " + s.decision.Message
		return nil
	}
	in := s.obs.spaceInput(c)
	step, finished := maintenance.PlanSweep(in.Members, sweep.Defragmented)
	switch {
	case finished:
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonDefragmentationCompleted, "Defragment",
			"defragmented every member in turn: %v (%s)", sweep.Defragmented, sweepCause(c, sweep))
		st.Current, st.LastCompletionTime = nil, &metav1.Time{Time: r.now()}
		return nil
	case step.Kind == maintenance.SpaceWait:
		sweep.Waiting = step.Reason
		return nil
	}
	sweep.Waiting = ""
	if err := r.applyMaintenance(ctx, s, step); err != nil {
		return err
	}
	sweep.Defragmented = append(sweep.Defragmented, step.Member.Name)
	return nil
}

// sweepCause says what started a sweep, for events.
func sweepCause(c *etcdv1beta1.EtcdCluster, sweep *etcdv1beta1.DefragmentationSweep) string {
	if sweep.Trigger == maintenance.TriggerSchedule {
		return fmt.Sprintf("spec.defragmentation.schedule %q", c.Spec.Defragmentation.Schedule)
	}
	return fmt.Sprintf("requested by the %s annotation", etcdv1beta1.DefragmentAnnotation)
}
