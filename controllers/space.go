package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// spaceInput is what the NOSPACE recovery plan needs from the observation.
func (obs observation) spaceInput(c *etcdv1beta1.EtcdCluster) maintenance.SpaceObserved {
	in := maintenance.SpaceObserved{
		Alarms:            obs.alarms,
		RecoveredRevision: c.Status.CompactedRevision,
		QuotaBytes:        resources.QuotaBackendBytes(c),
		QuotaAdvice:       quotaAdvice(c),
	}
	for _, m := range obs.members {
		// A member reads its quota when it starts, and its pod's variable wins over the configuration: a
		// member not yet restarted after a quotaBackendSize change runs with its pod's. The alarm is
		// disarmed only below every member's quota, else that member raises it again at the next write.
		if q, ok := podQuotaBytes(obs.podByOrdinal[obs.ordinals[m.ID]]); ok {
			in.QuotaBytes = min(in.QuotaBytes, q)
		}
		st, answered := obs.statuses[m.ID]
		in.Members = append(in.Members, maintenance.Member{ID: m.ID, Name: m.Name, Answered: answered, Healthy: obs.healthy[m.ID],
			Leader: answered && st.Leader == m.ID, Learner: m.IsLearner, DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse})
		in.Revision = max(in.Revision, st.Revision)
	}
	return in
}

// podQuotaBytes is the quota set in the environment of pod's etcd container, if any.
func podQuotaBytes(pod *corev1.Pod) (int64, bool) {
	if pod == nil {
		return 0, false
	}
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != "etcd" {
			continue
		}
		for _, e := range ctr.Env {
			if e.Name == "ETCD_QUOTA_BACKEND_BYTES" {
				q, err := strconv.ParseInt(e.Value, 10, 64)
				return q, err == nil && q > 0
			}
		}
	}
	return 0, false
}

// quotaAdvice says which setting raises c's quota: a derived quota stops following storageSize at its bound.
func quotaAdvice(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.Etcd.QuotaBackendSize != nil {
		return "grow spec.etcd.quotaBackendSize (spec.storageSize must stay at least twice it; the members restart one at a time)"
	}
	if q := resources.QuotaBackendBytes(c); q < c.Spec.StorageSize.Value()*40/100 {
		return fmt.Sprintf("set spec.etcd.quotaBackendSize above %s (the quota derived from spec.storageSize stops there; "+
			"spec.storageSize must stay at least twice it)", resource.NewQuantity(q, resource.BinarySI))
	}
	return "grow spec.storageSize (the quota is 40% of it and reaches each member when it restarts)"
}

// defragPolicy is spec.defragmentation with its defaults (the API server sets them; older objects may lack them).
func defragPolicy(c *etcdv1beta1.EtcdCluster) maintenance.DefragPolicy {
	p := maintenance.DefragPolicy{FreePercent: 50, MinFreeBytes: 64 << 20}
	if d := c.Spec.Defragmentation; d.FreePercent != nil {
		p.FreePercent = int64(*d.FreePercent)
	}
	if d := c.Spec.Defragmentation; d.MinFreeSize != nil {
		p.MinFreeBytes = d.MinFreeSize.Value()
	}
	return p
}

// planMaintenance returns the next step of NOSPACE recovery, from progress, and, when there is none, the
// next routine defragmentation (internal/maintenance).
func planMaintenance(c *etcdv1beta1.EtcdCluster, obs observation, progress maintenance.RecoveryProgress) (space, defrag maintenance.SpaceStep) {
	in := obs.spaceInput(c)
	in.Progress = progress
	if space = maintenance.PlanSpace(in); space.Kind == maintenance.SpaceNone {
		defrag = maintenance.PlanDefragmentation(in.Members, defragPolicy(c))
	}
	return space, defrag
}

// reconcileSpace takes the planned maintenance, one action per reconcile: a step of NOSPACE recovery (the
// compaction, one voter's defragmentation, the disarm) or one routine defragmentation. A membership step
// planned in this reconcile goes first, and a routine defragmentation waits for the membership to be stable
// and for a sweep under way (sweep.go) to finish; the short requeue while the alarm is active brings the
// recovery's next step.
func (r *EtcdClusterReconciler) reconcileSpace(ctx context.Context, s *reconcileScope) error {
	step := s.space
	if step.Recovered > 0 {
		// Kept in status (computeStatus starts from it): the next plan disarms, or says the data fills the
		// quota, instead of recovering again at the same revision.
		s.cluster.Status.CompactedRevision = step.Recovered
	}
	switch step.Kind {
	case maintenance.SpaceRecover, maintenance.SpaceRecoverDefragment, maintenance.SpaceDisarm:
	case maintenance.SpaceNone:
		if !s.obs.hasAlarm(etcd.AlarmNoSpace) {
			r.recoveries.set(s.cluster.UID, nil)
		}
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
	switch step.Kind {
	case maintenance.SpaceRecover:
		r.recoveries.set(s.cluster.UID, &maintenance.RecoveryProgress{Revision: step.Revision})
	case maintenance.SpaceRecoverDefragment:
		p := r.recoveries.get(s.cluster.UID)
		p.Defragmented = append(p.Defragmented, step.Member.ID)
		r.recoveries.set(s.cluster.UID, &p)
	}
	return nil
}

// recoveryMemory remembers, per cluster, the NOSPACE recovery under way between its steps: the operator's
// memory only, as a restarted operator takes every step again (each is idempotent). The zero value is
// ready to use.
type recoveryMemory struct {
	mu        sync.Mutex
	byCluster map[types.UID]maintenance.RecoveryProgress
}

func (m *recoveryMemory) get(uid types.UID) maintenance.RecoveryProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.byCluster[uid]
	p.Defragmented = slices.Clone(p.Defragmented)
	return p
}

// set records p for the cluster; nil forgets it.
func (m *recoveryMemory) set(uid types.UID, p *maintenance.RecoveryProgress) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byCluster == nil {
		m.byCluster = map[types.UID]maintenance.RecoveryProgress{}
	}
	if p == nil {
		delete(m.byCluster, uid)
		return
	}
	m.byCluster[uid] = *p
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

// healthErrors drops from member id's status errors the alarms that are not its own fault: NOSPACE (the
// cluster's database is full, and the operator recovers it without replacing anyone) and CORRUPT raised
// against another member (etcd lists every active alarm in every member's status).
func healthErrors(id uint64, errs []string) []string {
	return slices.DeleteFunc(slices.Clone(errs), func(e string) bool {
		alarmed, t, ok := statusAlarm(e)
		return ok && (t == etcd.AlarmNoSpace || t == etcd.AlarmCorrupt && alarmed != id)
	})
}

// corruptElsewhere reports whether member id's status errors list a CORRUPT alarm raised against another
// member. etcd's /health and /readyz then fail on every member, so readiness says nothing about id.
func corruptElsewhere(id uint64, errs []string) bool {
	return slices.ContainsFunc(errs, func(e string) bool {
		alarmed, t, ok := statusAlarm(e)
		return ok && t == etcd.AlarmCorrupt && alarmed != id
	})
}

// statusAlarm parses an alarm as etcd lists it in status errors: "memberID:<decimal> alarm:<type> ".
func statusAlarm(e string) (member uint64, t etcd.AlarmType, ok bool) {
	var id, alarm string
	for _, f := range strings.Fields(e) {
		if v, found := strings.CutPrefix(f, "memberID:"); found {
			id = v
		} else if v, found := strings.CutPrefix(f, "alarm:"); found {
			alarm = v
		}
	}
	if alarm == "" {
		return 0, "", false
	}
	member, err := strconv.ParseUint(id, 10, 64)
	return member, etcd.AlarmType(alarm), err == nil
}
