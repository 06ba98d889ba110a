package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// memberStatuses lists members from etcd when it answered, else from the pods.
func memberStatuses(c *etcdv1beta1.EtcdCluster, obs observation, now time.Time) []etcdv1beta1.MemberStatus {
	var out []etcdv1beta1.MemberStatus
	if obs.reachable {
		for _, m := range obs.members {
			ms := etcdv1beta1.MemberStatus{Name: m.Name, ID: strconv.FormatUint(m.ID, 16), Learner: m.IsLearner,
				Healthy: obs.healthy[m.ID] || obs.electing[m.ID], Unknown: obs.ordinals[m.ID] < 0}
			if ms.Name == "" {
				ms.Name = "unstarted-" + ms.ID
			}
			if len(m.ClientURLs) > 0 {
				ms.ClientURL = m.ClientURLs[0]
			}
			if st, ok := obs.statuses[m.ID]; ok {
				ms.Leader, ms.Version, ms.DBSizeBytes, ms.DBSizeInUseBytes = st.Leader == m.ID, st.Version, st.DBSize, st.DBSizeInUse
			}
			// The claim holding the member's data: kept once recorded (a member's data never moves to
			// another claim), else the claim recorded to hold it once the member is healthy.
			ms.VolumeClaimUID = obs.recordedClaim(m.Name, m.ID)
			if ord, ok := obs.ordinals[m.ID]; ms.VolumeClaimUID == "" && ok && ord >= 0 && ms.Healthy {
				if pvc := obs.pvcByOrdinal[ord]; pvc != nil && pvc.DeletionTimestamp.IsZero() &&
					pvc.Annotations[AnnotationMemberID] == ms.ID {
					ms.VolumeClaimUID = string(pvc.UID)
				}
			}
			out = append(out, ms)
		}
	} else {
		out = lastKnownMembers(c, obs)
	}
	for i := range out {
		if out[i].Healthy {
			continue
		}
		since := metav1.NewTime(obs.unhealthySince(out[i].Name, now))
		out[i].UnhealthySince = &since
	}
	slices.SortFunc(out, func(a, b etcdv1beta1.MemberStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// lastKnownMembers lists the members while etcd cannot be asked: each member pod, and each member last
// reported whose pod is gone, with what etcd last said of it (ID, role, version, the claim holding its
// data: a human, and quorum-loss recovery, need them most when etcd cannot tell) and its pod's readiness.
func lastKnownMembers(c *etcdv1beta1.EtcdCluster, obs observation) []etcdv1beta1.MemberStatus {
	var out []etcdv1beta1.MemberStatus
	seen := map[string]bool{}
	for i := range obs.pods {
		p := &obs.pods[i]
		ms := etcdv1beta1.MemberStatus{Name: p.Name}
		if prev, ok := obs.previous[p.Name]; ok {
			ms = etcdv1beta1.MemberStatus{Name: p.Name, ID: prev.ID, Learner: prev.Learner, Version: prev.Version,
				Unknown: prev.Unknown, VolumeClaimUID: prev.VolumeClaimUID}
		}
		ms.ClientURL, ms.Healthy = obs.clientURLs[resources.MemberOrdinal(c, p.Name)], podReady(p)
		out = append(out, ms)
		seen[p.Name] = true
	}
	for _, prev := range c.Status.Members {
		if !seen[prev.Name] && prev.ID != "" {
			out = append(out, etcdv1beta1.MemberStatus{Name: prev.Name, ID: prev.ID, Learner: prev.Learner, Version: prev.Version,
				Unknown: prev.Unknown, VolumeClaimUID: prev.VolumeClaimUID})
		}
	}
	return out
}

// computeStatus derives the whole status from the observation and the plan. It is pure: its condition
// and phase rules are covered by a table test (status_test.go).
// applied names the objects this reconcile changed: until their effect is observed, the cluster is still
// progressing, whatever the plan made of the state before.
func computeStatus(c *etcdv1beta1.EtcdCluster, obs observation, d membership.Decision, space maintenance.SpaceStep, applied []string, reconcileErr error, now time.Time) etcdv1beta1.EtcdClusterStatus {
	s := *c.Status.DeepCopy()
	s.ObservedGeneration = c.Generation
	s.Replicas = int32(len(obs.pods))
	s.ReadyReplicas = obs.readyReplicas
	s.Members = memberStatuses(c, obs, now)
	s.ClientEndpoint = obs.clientEndpoint
	s.Selector = labels.SelectorFromSet(resources.SelectorLabels(c)).String()
	s.TLS = obs.tlsStatus
	if obs.authEnabled != nil {
		s.AuthEnabled = obs.authEnabled
	}
	if obs.reachable && obs.alarms != nil {
		s.Alarms = alarmStrings(obs)
	}
	f := newStatusFacts(c, obs, d, applied, reconcileErr, s.Members)
	f.space = space
	if f.currentVersion != "" {
		s.CurrentVersion = f.currentVersion
	}
	for _, cond := range []struct {
		typ   string
		state conditionState
	}{
		{etcdv1beta1.ConditionAvailable, availableCondition(f)},
		{etcdv1beta1.ConditionProgressing, progressingCondition(f, s.CurrentVersion)},
		{etcdv1beta1.ConditionDegraded, degradedCondition(f)},
	} {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: cond.typ, Status: cond.state.status, Reason: cond.state.reason,
			Message: cond.state.message, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	if st, ok := spreadStatus(&s, c, obs, s.Members); ok {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: etcdv1beta1.ConditionSpread, Status: st.status, Reason: st.reason,
			Message: st.message, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	if rec := finishedRecovery(obs, d, now); rec != nil {
		s.LastRecovery = rec
	}
	if obs.restore != nil && s.RestoredFrom == "" && meta.IsStatusConditionTrue(s.Conditions, etcdv1beta1.ConditionAvailable) &&
		restoreCompleted(obs.pods) {
		s.RestoredFrom = restoreLocation(obs.restore)
	}
	backupStatus(&s, c, obs.backups, now)
	continuousStatus(&s, c, obs, now)

	s.Phase = phaseOf(c, s.Conditions)
	return s
}

// conditionState is one condition's status, reason and message.
type conditionState struct {
	status          metav1.ConditionStatus
	reason, message string
}

// statusFacts is what the conditions are derived from, computed once per reconcile.
type statusFacts struct {
	c       *etcdv1beta1.EtcdCluster
	obs     observation
	d       membership.Decision
	applied []string
	err     error
	// refusal and unmanaged are err's kind, when it is one of them.
	refusal   *tlsRefusal
	unmanaged *unmanagedSecret
	// pending: the certificates from cert-manager cannot be had yet; held: nor renewed, while the members run
	// on the ones they have (reported after every rule that protects quorum or data).
	pending, held *certificatesPending
	// voters and healthy voting members (pods ready, while etcd cannot be asked), and quorum of voters.
	voters, healthy, quorum int32
	// electing: healthy voters that know no leader yet (memberHealth).
	electing int
	// hadQuorum: the cluster has had a quorum (reported before, or healthy now).
	hadQuorum bool
	// currentVersion is the lowest version a member reports ("" while etcd cannot be asked).
	currentVersion     string
	unhealthy, unknown []string
	// dataDeleting names the members etcd lists whose data claims are being deleted.
	dataDeleting []string
	// cannotStart says, for each container of a member pod that the kubelet cannot run, the pod, the
	// container, its image and the kubelet's reason.
	cannotStart []string
	// space is the NOSPACE recovery's next step.
	space maintenance.SpaceStep
}

func newStatusFacts(c *etcdv1beta1.EtcdCluster, obs observation, d membership.Decision, applied []string, err error,
	members []etcdv1beta1.MemberStatus) statusFacts {
	f := statusFacts{c: c, obs: obs, d: d, applied: applied, err: err, voters: obs.voters(c), healthy: obs.readyReplicas}
	var refusal tlsRefusal
	if errors.As(err, &refusal) {
		f.refusal = &refusal
	}
	var unmanaged unmanagedSecret
	if errors.As(err, &unmanaged) {
		f.unmanaged = &unmanaged
	}
	var pending certificatesPending
	if errors.As(err, &pending) {
		f.pending = &pending
	}
	f.held = obs.tls.held
	if obs.reachable {
		f.healthy = 0
		for _, electing := range obs.electing {
			if electing {
				f.electing++
			}
		}
		for _, m := range members {
			if m.Healthy && !m.Learner {
				f.healthy++
			}
			if m.Version != "" && (f.currentVersion == "" || membership.VersionLess(m.Version, f.currentVersion)) {
				f.currentVersion = m.Version
			}
		}
	}
	// A learner does not count as unhealthy: it holds no vote, so the cluster tolerates as many failures
	// with it as without, and its start and catch-up are reported under Progressing.
	for _, m := range members {
		if !m.Healthy && !m.Learner {
			f.unhealthy = append(f.unhealthy, m.Name)
		}
		if m.Unknown {
			f.unknown = append(f.unknown, m.Name)
		}
	}
	for _, m := range obs.members {
		ord, ok := obs.ordinals[m.ID]
		if pvc := obs.pvcByOrdinal[ord]; ok && pvc != nil && !pvc.DeletionTimestamp.IsZero() &&
			pvc.Annotations[AnnotationMemberID] == strconv.FormatUint(m.ID, 16) {
			f.dataDeleting = append(f.dataDeleting, m.Name)
		}
	}
	for i := range obs.pods {
		p := &obs.pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, failure := range resources.ContainerStartFailures(p) {
			f.cannotStart = append(f.cannotStart, "pod "+p.Name+": "+failure)
		}
	}
	f.quorum = resources.Quorum(f.voters)
	// QuorumLost is for a quorum once reported: while a new cluster forms, etcd answers a second or two
	// before its members pass readiness, and that is bootstrapping, not an outage (no warning for it).
	f.hadQuorum = reportedQuorum(c) || f.healthy >= f.quorum
	return f
}

// withFallback adds to msg why a recovery from a backup restores the newest full backup and not the
// continuous backup, unless msg says so already: for as long as the recovery lasts, not only in the
// reconcile that decided it.
func withFallback(msg string, d membership.Decision) string {
	if d.Config == nil || d.Config.Restore == nil || d.Config.Restore.Fallback == "" || strings.Contains(msg, d.Config.Restore.Fallback) {
		return msg
	}
	return msg + "; the recovery restores the newest full backup, not the continuous backup: " + d.Config.Restore.Fallback
}

// reportedQuorum: status has reported the cluster's quorum, healthy or lost, before.
func reportedQuorum(c *etcdv1beta1.EtcdCluster) bool {
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable)
	return prev != nil && (prev.Reason == ReasonQuorumHealthy || prev.Reason == ReasonQuorumLost)
}

// availableCondition: a quorum of voting members is healthy.
func availableCondition(f statusFacts) conditionState {
	switch {
	case f.healthy >= f.quorum && f.electing > 0:
		return conditionState{metav1.ConditionTrue, ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members healthy (quorum %d); %d of them know no leader yet: electing one",
				f.healthy, f.voters, f.quorum, f.electing)}
	case f.healthy >= f.quorum:
		return conditionState{metav1.ConditionTrue, ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members healthy (quorum %d)", f.healthy, f.voters, f.quorum)}
	case f.hadQuorum:
		return conditionState{metav1.ConditionFalse, ReasonQuorumLost,
			fmt.Sprintf("only %d of %d voting members healthy; quorum needs %d", f.healthy, f.voters, f.quorum) +
				survivorsReport(f.obs.survivors)}
	}
	return conditionState{metav1.ConditionFalse, ReasonBootstrapping,
		fmt.Sprintf("waiting for members to start: %d of %d ready, quorum needs %d", f.healthy, f.voters, f.quorum)}
}

// progressingCondition: the cluster is still moving towards its spec, from the first reconcile of a change
// until the members follow it.
func progressingCondition(f statusFacts, currentVersion string) conditionState {
	c, obs, d := f.c, f.obs, f.d
	switch {
	// Before a failed restore: a member that gave up on an absent server fails for the server's reason.
	case obs.snapshotServerWait != "":
		return conditionState{metav1.ConditionTrue, ReasonWaitingForSnapshotServer, withFallback(obs.snapshotServerWait, d)}
	case obs.restoreFailed != "":
		return conditionState{metav1.ConditionFalse, ReasonRestoreFailed, obs.restoreFailed}
	case obs.restoreWait != "" && obs.statefulSet == nil:
		return conditionState{metav1.ConditionTrue, ReasonWaitingForBackup, obs.restoreWait}
	case c.Spec.Paused:
		return conditionState{metav1.ConditionFalse, ReasonPaused, "reconciliation is paused (spec.paused)"}
	case f.refusal != nil:
		return conditionState{metav1.ConditionFalse, f.refusal.reason, f.refusal.msg}
	case f.pending != nil:
		return conditionState{metav1.ConditionTrue, f.pending.reason, f.pending.msg}
	case f.err != nil:
		return conditionState{metav1.ConditionTrue, ReasonReconcileFailed, f.err.Error()}
	case obs.tls.caChange != "" && !slices.Contains([]membership.Phase{membership.PhaseStalled, membership.PhaseBlocked,
		membership.PhaseRecovering, membership.PhaseHealing, membership.PhaseScaling}, d.Phase):
		// The members' roll is the CA change's (trustbundle.go): say what the change waits for, with the planner's step.
		msg := obs.tls.caChange
		if d.Message != "" {
			msg += " (" + d.Message + ")"
		}
		return conditionState{metav1.ConditionTrue, ReasonCARotating, msg}
	// A cluster that never reported a version has none to upgrade from: its members cannot start at all.
	case d.Phase == membership.PhaseStalled && currentVersion != "" && c.Spec.Version != currentVersion:
		return conditionState{metav1.ConditionFalse, ReasonUpgradeStalled, d.Message}
	case d.Phase == membership.PhaseStalled:
		return conditionState{metav1.ConditionFalse, ReasonMemberCannotStart, d.Message}
	case obs.statefulSet == nil || d.Phase == membership.PhaseBootstrapping:
		return conditionState{metav1.ConditionTrue, ReasonCreating, d.Message}
	case d.Phase == membership.PhaseScaling:
		return conditionState{metav1.ConditionTrue, ReasonScaling, d.Message}
	case d.Phase == membership.PhaseUpgrading:
		return conditionState{metav1.ConditionTrue, ReasonUpgrading, d.Message}
	case d.Phase == membership.PhaseHealing:
		return conditionState{metav1.ConditionTrue, ReasonHealing, d.Message}
	case d.Phase == membership.PhaseBlocked:
		return conditionState{metav1.ConditionFalse, ReasonBlocked, d.Message}
	case d.Phase == membership.PhaseWaiting:
		return conditionState{metav1.ConditionTrue, ReasonWaiting, d.Message}
	case d.Phase == membership.PhaseRecovering:
		return conditionState{metav1.ConditionTrue, ReasonRecovering, withFallback(d.Message, d)}
	case len(f.applied) > 0:
		return conditionState{metav1.ConditionTrue, ReasonApplying, "applied " + strings.Join(f.applied, ", ") + "; waiting for the members to follow"}
	case int32(len(obs.pods)) != c.Spec.Replicas:
		return conditionState{metav1.ConditionTrue, ReasonScaling, fmt.Sprintf("%d of %d member pods exist", len(obs.pods), c.Spec.Replicas)}
	case statefulSetUnobserved(obs.statefulSet):
		return conditionState{metav1.ConditionTrue, ReasonApplying, fmt.Sprintf(
			"waiting for the StatefulSet controller to take generation %d of StatefulSet %s (it has observed %d); the members then follow",
			obs.statefulSet.Generation, obs.statefulSet.Name, obs.statefulSet.Status.ObservedGeneration)}
	}
	return conditionState{metav1.ConditionFalse, ReasonReconciled, "members and managed objects match the spec"}
}

// statefulSetUnobserved: the StatefulSet controller has reported on the StatefulSet before, but not yet on its
// current generation. Until it does, the revision a pod should run is unknown, and a template change that
// keeps the image (a flag, a probe) makes every pod look up to date: claiming Reconciled then would be false.
// A StatefulSet never reported on (envtest, which runs no StatefulSet controller) is judged by image.
func statefulSetUnobserved(sts *appsv1.StatefulSet) bool {
	return sts != nil && sts.Status.ObservedGeneration > 0 && sts.Status.ObservedGeneration < sts.Generation
}

// degradedCondition: the operator cannot converge, or a formed cluster has an unhealthy voting member.
func degradedCondition(f statusFacts) conditionState {
	obs := f.obs
	switch {
	case obs.restoreFailed != "":
		return conditionState{metav1.ConditionTrue, ReasonRestoreFailed, obs.restoreFailed}
	case f.refusal != nil:
		return conditionState{metav1.ConditionTrue, f.refusal.reason, f.refusal.msg}
	case f.unmanaged != nil:
		return conditionState{metav1.ConditionTrue, ReasonSecretNotManaged, f.unmanaged.msg}
	case f.pending != nil:
		return conditionState{metav1.ConditionTrue, f.pending.reason, f.pending.msg}
	case f.err != nil:
		return conditionState{metav1.ConditionTrue, ReasonReconcileFailed, f.err.Error()}
	case f.d.Phase == membership.PhaseStalled:
		return conditionState{metav1.ConditionTrue, ReasonMemberCannotStart, withStartFailures(f.d.Message, f.cannotStart)}
	// Without a quorum, or without an answer from etcd, no member's health says more than its pod: a new
	// cluster whose members cannot start is not merely bootstrapping.
	case len(f.cannotStart) > 0 && (!f.hadQuorum || !obs.reachable):
		return conditionState{metav1.ConditionTrue, ReasonMemberCannotStart, "member pods cannot start: " + strings.Join(f.cannotStart, "; ")}
	case obs.hasAlarm(etcd.AlarmCorrupt):
		return conditionState{metav1.ConditionTrue, ReasonDataCorrupt, "etcd raised the CORRUPT alarm (" +
			strings.Join(alarmStrings(obs), ", ") + "): a member's data differs from the others'. The operator does not " +
			"disarm it: find the member whose hash differs (etcdctl endpoint hashkv --cluster), replace it, then disarm the alarm (etcdctl alarm disarm)"}
	case f.space.Kind != maintenance.SpaceNone:
		// Reads work and quorum holds, but etcd refuses every write: Available stays (it is about quorum).
		return conditionState{metav1.ConditionTrue, ReasonNoSpace, f.space.Reason}
	// Before unhealthy members: while members are replaced, the ones whose data is still going matter most.
	case len(f.dataDeleting) > 0:
		return conditionState{metav1.ConditionTrue, ReasonMemberDataDeleting, "the volume claims of " + strings.Join(f.dataDeleting, ", ") +
			" are being deleted: their data goes when their pods restart; the operator replaces them one at a time"}
	case f.hadQuorum && (len(f.unhealthy) > 0 || f.healthy < f.voters):
		msg := fmt.Sprintf("%d of %d voting members healthy", f.healthy, f.voters)
		if len(f.unhealthy) > 0 {
			msg += "; unhealthy: " + strings.Join(f.unhealthy, ", ")
		}
		return conditionState{metav1.ConditionTrue, ReasonMembersUnhealthy, msg}
	case obs.etcdErr != nil && f.hadQuorum:
		return conditionState{metav1.ConditionTrue, ReasonEtcdUnreachable, obs.etcdErr.Error()}
	case f.held != nil:
		return conditionState{metav1.ConditionTrue, f.held.reason, f.held.msg}
	case len(f.unknown) > 0:
		return conditionState{metav1.ConditionTrue, ReasonUnknownMembers, "members not managed by the operator (left alone): " + strings.Join(f.unknown, ", ")}
	}
	return conditionState{metav1.ConditionFalse, ReasonAsExpected, "no problems observed"}
}

// withStartFailures appends to msg what the kubelet says of each container it cannot run.
func withStartFailures(msg string, failures []string) string {
	if len(failures) == 0 {
		return msg
	}
	return msg + "; " + strings.Join(failures, "; ")
}

// phaseOf summarises the conditions in one word.
func phaseOf(c *etcdv1beta1.EtcdCluster, conds []metav1.Condition) etcdv1beta1.ClusterPhase {
	avail := meta.FindStatusCondition(conds, etcdv1beta1.ConditionAvailable)
	switch {
	case c.Spec.Paused:
		return etcdv1beta1.PhasePaused
	case avail.Reason == ReasonBootstrapping:
		return etcdv1beta1.PhasePending
	case avail.Status != metav1.ConditionTrue:
		return etcdv1beta1.PhaseUnavailable
	case meta.IsStatusConditionTrue(conds, etcdv1beta1.ConditionDegraded):
		return etcdv1beta1.PhaseDegraded
	case meta.IsStatusConditionTrue(conds, etcdv1beta1.ConditionProgressing):
		return etcdv1beta1.PhaseProgressing
	default:
		return etcdv1beta1.PhaseRunning
	}
}

// survivorsReport says which member pods still answer without a majority, with the raft index and revision
// each has applied: the member with the highest index holds the most of the cluster's data, which is what
// a human choosing a member to recover from needs to know.
func survivorsReport(survivors []survivor) string {
	var answering, silent []string
	for _, s := range survivors {
		if s.answered {
			answering = append(answering, fmt.Sprintf("%s (raft index %d, revision %d)", s.name, s.status.RaftIndex, s.status.Revision))
		} else {
			silent = append(silent, s.name)
		}
	}
	var out string
	if len(answering) > 0 {
		out += "; answering: " + strings.Join(answering, ", ")
	}
	if len(silent) > 0 {
		out += "; not answering: " + strings.Join(silent, ", ")
	}
	return out
}
