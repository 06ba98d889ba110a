package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// memberStatuses lists members from etcd when it answered, else from the pods.
func memberStatuses(c *etcdv1alpha1.EtcdCluster, obs observation, now time.Time) []etcdv1alpha1.MemberStatus {
	var out []etcdv1alpha1.MemberStatus
	if obs.reachable {
		for _, m := range obs.members {
			ms := etcdv1alpha1.MemberStatus{Name: m.Name, ID: strconv.FormatUint(m.ID, 16), Learner: m.IsLearner,
				Healthy: obs.healthy[m.ID], Unknown: obs.ordinals[m.ID] < 0}
			if ms.Name == "" {
				ms.Name = "unstarted-" + ms.ID
			}
			if len(m.ClientURLs) > 0 {
				ms.ClientURL = m.ClientURLs[0]
			}
			if st, ok := obs.statuses[m.ID]; ok {
				ms.Leader, ms.Version, ms.DBSizeBytes = st.Leader == m.ID, st.Version, st.DBSize
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
		for i := range obs.pods {
			p := &obs.pods[i]
			out = append(out, etcdv1alpha1.MemberStatus{Name: p.Name, ClientURL: obs.clientURLs[ordinalOf(c, p.Name)], Healthy: podReady(p)})
		}
	}
	for i := range out {
		if out[i].Healthy {
			continue
		}
		since := metav1.NewTime(obs.unhealthySince(out[i].Name, now))
		out[i].UnhealthySince = &since
	}
	slices.SortFunc(out, func(a, b etcdv1alpha1.MemberStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// computeStatus derives the whole status from the observation and the plan. It is pure: its condition
// and phase rules are covered by a table test (status_test.go).
// applied names the objects this reconcile changed: until their effect is observed, the cluster is still
// progressing, whatever the plan made of the state before.
func computeStatus(c *etcdv1alpha1.EtcdCluster, obs observation, d membership.Decision, applied []string, reconcileErr error, now time.Time) etcdv1alpha1.EtcdClusterStatus {
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
	var refusal tlsRefusal
	refused := errors.As(reconcileErr, &refusal)
	var unmanaged unmanagedSecret
	notManaged := errors.As(reconcileErr, &unmanaged)

	voters, healthy := obs.voters(c), obs.readyReplicas
	if obs.reachable {
		healthy = 0
		lowest := ""
		for _, m := range s.Members {
			if m.Healthy && !m.Learner {
				healthy++
			}
			if m.Version != "" && (lowest == "" || versionLess(m.Version, lowest)) {
				lowest = m.Version
			}
		}
		if lowest != "" {
			s.CurrentVersion = lowest
		}
	}
	quorum := resources.Quorum(voters)
	formed := obs.formed(c) || healthy >= quorum
	set := func(t string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg,
			ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)})
	}

	// Available: a quorum of voting members is healthy.
	switch {
	case healthy >= quorum:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members healthy (quorum %d)", healthy, voters, quorum))
	case formed:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonQuorumLost,
			fmt.Sprintf("only %d of %d voting members healthy; quorum needs %d", healthy, voters, quorum))
	default:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonBootstrapping,
			fmt.Sprintf("waiting for members to start: %d of %d ready, quorum needs %d", healthy, voters, quorum))
	}

	// Progressing: the cluster is still moving towards its spec.
	switch {
	case obs.restoreFailed != "":
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonRestoreFailed, obs.restoreFailed)
	case obs.restoreWait != "" && obs.statefulSet == nil:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonWaitingForBackup, obs.restoreWait)
	case c.Spec.Paused:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonPaused, "reconciliation is paused (spec.paused)")
	case refused:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonTLSRefused, refusal.msg)
	case reconcileErr != nil:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonReconcileFailed, reconcileErr.Error())
	case d.Phase == membership.PhaseStalled && c.Spec.Version != s.CurrentVersion:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonUpgradeStalled, d.Message)
	case d.Phase == membership.PhaseStalled:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonMemberCannotStart, d.Message)
	case obs.statefulSet == nil || d.Phase == membership.PhaseBootstrapping:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonCreating, d.Message)
	case d.Phase == membership.PhaseScaling:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonScaling, d.Message)
	case d.Phase == membership.PhaseUpgrading:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonUpgrading, d.Message)
	case d.Phase == membership.PhaseHealing:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonHealing, d.Message)
	case d.Phase == membership.PhaseBlocked:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonBlocked, d.Message)
	case d.Phase == membership.PhaseWaiting:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonWaiting, d.Message)
	case len(applied) > 0:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonApplying, "applied "+strings.Join(applied, ", ")+"; waiting for the members to follow")
	case int32(len(obs.pods)) != c.Spec.Replicas:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonScaling,
			fmt.Sprintf("%d of %d member pods exist", len(obs.pods), c.Spec.Replicas))
	default:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonReconciled, "members and managed objects match the spec")
	}

	// Degraded: the operator cannot converge, or a formed cluster has an unhealthy voting member. A learner
	// does not count: it holds no vote, so the cluster tolerates as many failures with it as without,
	// and its start and catch-up are reported under Progressing (every scale step has one).
	var unhealthy, unknown []string
	for _, m := range s.Members {
		if !m.Healthy && !m.Learner {
			unhealthy = append(unhealthy, m.Name)
		}
		if m.Unknown {
			unknown = append(unknown, m.Name)
		}
	}
	switch {
	case obs.restoreFailed != "":
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonRestoreFailed, obs.restoreFailed)
	case refused:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonTLSRefused, refusal.msg)
	case notManaged:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonSecretNotManaged, unmanaged.msg)
	case reconcileErr != nil:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonReconcileFailed, reconcileErr.Error())
	case d.Phase == membership.PhaseStalled:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonMemberCannotStart, d.Message)
	case formed && (len(unhealthy) > 0 || healthy < voters):
		msg := fmt.Sprintf("%d of %d voting members healthy", healthy, voters)
		if len(unhealthy) > 0 {
			msg += "; unhealthy: " + strings.Join(unhealthy, ", ")
		}
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonMembersUnhealthy, msg)
	case obs.etcdErr != nil && formed:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonEtcdUnreachable, obs.etcdErr.Error())
	case len(unknown) > 0:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonUnknownMembers,
			"members not managed by the operator (left alone): "+strings.Join(unknown, ", "))
	default:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "no problems observed")
	}

	if obs.restore != nil && s.RestoredFrom == "" && meta.IsStatusConditionTrue(s.Conditions, etcdv1alpha1.ConditionAvailable) &&
		restoredEveryMember(obs.pods) {
		s.RestoredFrom = restoreLocation(obs.restore)
	}
	backupStatus(&s, c, obs.backups, now)

	s.Phase = phaseOf(c, s.Conditions)
	return s
}

// phaseOf summarises the conditions in one word.
func phaseOf(c *etcdv1alpha1.EtcdCluster, conds []metav1.Condition) etcdv1alpha1.ClusterPhase {
	avail := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionAvailable)
	switch {
	case c.Spec.Paused:
		return etcdv1alpha1.PhasePaused
	case avail.Reason == ReasonBootstrapping:
		return etcdv1alpha1.PhasePending
	case avail.Status != metav1.ConditionTrue:
		return etcdv1alpha1.PhaseUnavailable
	case meta.IsStatusConditionTrue(conds, etcdv1alpha1.ConditionDegraded):
		return etcdv1alpha1.PhaseDegraded
	case meta.IsStatusConditionTrue(conds, etcdv1alpha1.ConditionProgressing):
		return etcdv1alpha1.PhaseProgressing
	default:
		return etcdv1alpha1.PhaseRunning
	}
}
