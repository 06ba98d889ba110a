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
		CompactedRevision: c.Status.CompactedRevision,
		// A member that started before the operator set the quota in the configuration runs with etcd's
		// default until it restarts, and etcd does not say which quota a member has: the alarm is disarmed
		// only below both.
		QuotaBytes: min(resources.QuotaBackendBytes(c), resources.EtcdDefaultQuotaBytes),
	}
	for _, m := range obs.members {
		st, answered := obs.statuses[m.ID]
		in.Members = append(in.Members, maintenance.Member{ID: m.ID, Name: m.Name, Answered: answered,
			Leader: answered && st.Leader == m.ID, DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse})
		in.Revision = max(in.Revision, st.Revision)
	}
	return in
}

// reconcileSpace takes the next step of NOSPACE recovery (internal/maintenance): compaction, a member's
// defragmentation, or disarming the alarm. A membership step planned in this reconcile goes first; the
// short requeue while the alarm is active brings the recovery back.
func (r *EtcdClusterReconciler) reconcileSpace(ctx context.Context, s *reconcileScope) error {
	step := s.space
	switch step.Kind {
	case maintenance.SpaceCompact, maintenance.SpaceDefragment, maintenance.SpaceDisarm:
	default:
		return nil
	}
	if s.decision.Action.Type != membership.ActionNone {
		return nil
	}
	c := s.cluster
	logf.FromContext(ctx).Info("space recovery step", "step", step.Kind, "why", step.Reason)
	cli, err := r.dial(ctx, c, &s.obs, sortedClientURLs(s.obs))
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	endpoints := map[uint64]string{}
	for _, m := range s.obs.members {
		if len(m.ClientURLs) > 0 {
			endpoints[m.ID] = m.ClientURLs[0]
		}
	}
	if err := maintenance.ApplySpace(ctx, cli, endpoints, step); err != nil {
		return fmt.Errorf("%s: %w", step.Reason, err)
	}
	if step.Kind == maintenance.SpaceCompact {
		// Kept in status (computeStatus starts from it), so the next plan moves on to defragmentation.
		c.Status.CompactedRevision = step.Revision
	}
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, spaceEventReasons[step.Kind], string(step.Kind), "%s", step.Reason)
	return nil
}

var spaceEventReasons = map[maintenance.SpaceStepKind]string{
	maintenance.SpaceCompact:    ReasonCompacted,
	maintenance.SpaceDefragment: ReasonDefragmented,
	maintenance.SpaceDisarm:     ReasonAlarmDisarmed,
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
