package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// spaceInput is what the NOSPACE recovery plan needs from the observation.
func (obs observation) spaceInput(c *etcdv1alpha1.EtcdCluster) maintenance.SpaceObserved {
	in := maintenance.SpaceObserved{
		Alarms:            obs.alarms,
		RecoveredRevision: c.Status.CompactedRevision,
		// A member that started before the operator set the quota in the configuration runs with etcd's
		// default until it restarts, and etcd does not say which quota a member has: the alarm is disarmed
		// only below both.
		QuotaBytes: min(resources.QuotaBackendBytes(c), resources.EtcdDefaultQuotaBytes),
	}
	for _, m := range obs.members {
		st, answered := obs.statuses[m.ID]
		in.Members = append(in.Members, maintenance.Member{ID: m.ID, Name: m.Name, Answered: answered, Healthy: obs.healthy[m.ID],
			Leader: answered && st.Leader == m.ID, Learner: m.IsLearner, DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse})
		in.Revision = max(in.Revision, st.Revision)
	}
	return in
}

// defragPolicy is spec.defragmentation with its defaults (the API server sets them; older objects may lack them).
func defragPolicy(c *etcdv1alpha1.EtcdCluster) maintenance.DefragPolicy {
	p := maintenance.DefragPolicy{FreePercent: 50, MinFreeBytes: 64 << 20}
	if d := c.Spec.Defragmentation; d.FreePercent != nil {
		p.FreePercent = int64(*d.FreePercent)
	}
	if d := c.Spec.Defragmentation; d.MinFreeSize != nil {
		p.MinFreeBytes = d.MinFreeSize.Value()
	}
	return p
}

// planMaintenance returns the next step of NOSPACE recovery and, when there is none, the next routine
// defragmentation (internal/maintenance).
func planMaintenance(c *etcdv1alpha1.EtcdCluster, obs observation) (space, defrag maintenance.SpaceStep) {
	in := obs.spaceInput(c)
	if space = maintenance.PlanSpace(in); space.Kind == maintenance.SpaceNone {
		defrag = maintenance.PlanDefragmentation(in.Members, defragPolicy(c))
	}
	return space, defrag
}

// reconcileSpace takes the planned maintenance: the whole NOSPACE recovery (compaction, every voter
// defragmented, the alarm disarmed), a disarm, or one routine defragmentation. A membership step planned in
// this reconcile goes first, and a routine defragmentation waits for the membership to be stable and for a
// sweep under way (sweep.go) to finish; the short requeue while the alarm is active brings the recovery back.
func (r *EtcdClusterReconciler) reconcileSpace(ctx context.Context, s *reconcileScope) error {
	step := s.space
	switch step.Kind {
	case maintenance.SpaceRecover, maintenance.SpaceDisarm:
	case maintenance.SpaceNone:
		if s.defrag.Kind == maintenance.SpaceNone || s.decision.Phase != membership.PhaseStable || sweepUnderWay(s.cluster) {
			return nil
		}
		step = s.defrag
	default:
		return nil
	}
	if s.decision.Action.Type != membership.ActionNone {
		return nil
	}
	if err := r.applyMaintenance(ctx, s, step); err != nil {
		return err
	}
	s.maintained = true
	if step.Kind == maintenance.SpaceRecover {
		// Kept in status (computeStatus starts from it): the next plan disarms, or says the data fills the
		// quota, instead of recovering again at the same revision.
		s.cluster.Status.CompactedRevision = step.Revision
	}
	return nil
}

// applyMaintenance takes one maintenance step through the voting members, with an event per action and
// the step counted in the metrics.
func (r *EtcdClusterReconciler) applyMaintenance(ctx context.Context, s *reconcileScope, step maintenance.SpaceStep) error {
	c := s.cluster
	logf.FromContext(ctx).Info("maintenance", "step", step.Kind, "why", step.Reason)
	// Maintenance calls go to voting members: a learner refuses them.
	cli, err := r.dial(ctx, c, &s.obs, voterClientURLs(c, s.obs, s.obs.urls))
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	in := s.obs.spaceInput(c)
	cl := maintenance.Cluster{Voters: cli, Members: in.Members, Endpoint: map[uint64]string{}}
	for _, m := range s.obs.members {
		if len(m.ClientURLs) > 0 {
			cl.Endpoint[m.ID] = m.ClientURLs[0]
		}
	}
	report := func(outcome, message string) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, outcome, string(step.Kind), "%s", message)
	}
	if err := maintenance.Apply(ctx, cl, step, report); err != nil {
		r.metrics.countMaintenanceStep(c, string(step.Kind), stepFailed)
		return fmt.Errorf("%s: %w", step.Reason, err)
	}
	r.metrics.countMaintenanceStep(c, string(step.Kind), stepTaken)
	return nil
}

// alarmStrings renders the active alarms for status, as "<type> on <member>", sorted.
func alarmStrings(obs observation) []string {
	var out []string
	for _, a := range obs.alarms {
		name := fmt.Sprintf("%x", a.MemberID)
		for _, m := range obs.members {
			if m.ID == a.MemberID && m.Name != "" {
				name = m.Name
			}
		}
		out = append(out, fmt.Sprintf("%s on %s", a.Type, name))
	}
	slices.Sort(out)
	return out
}

// hasAlarm reports whether an alarm of type t is active.
func (obs observation) hasAlarm(t etcd.AlarmType) bool {
	return slices.ContainsFunc(obs.alarms, func(a etcd.Alarm) bool { return a.Type == t })
}

// healthErrors drops the NOSPACE alarm from a member's status errors: it is the cluster's database, not the
// member, that is full, and the operator recovers it without replacing anyone.
func healthErrors(errs []string) []string {
	return slices.DeleteFunc(slices.Clone(errs), func(e string) bool { return strings.Contains(e, "alarm:"+string(etcd.AlarmNoSpace)) })
}
