package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

func (r *EtcdClusterReconciler) healAfter() time.Duration {
	return durationOr(r.HealAfter, 3*time.Minute)
}

func (r *EtcdClusterReconciler) healthInterval() time.Duration {
	return durationOr(r.HealthInterval, 30*time.Second)
}

func (r *EtcdClusterReconciler) stepInterval() time.Duration {
	return durationOr(r.StepInterval, 2*time.Second)
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// memberConfig renders the planner's configuration: each member under its name and the peer URL etcd has
// registered for it (the ordinal's stable name and URL when etcd has none yet).
func memberConfig(c *etcdv1beta1.EtcdCluster, cfg *membership.Config, urls MemberURLs) resources.MemberConfig {
	parts := make([]string, 0, len(cfg.Members))
	for i, m := range cfg.Members {
		name, url := m.Name, m.PeerURL
		if name == "" && m.Ordinal >= 0 {
			name = resources.MemberName(c, m.Ordinal)
		}
		if url == "" && m.Ordinal >= 0 {
			url = urls.PeerURL(c, m.Ordinal)
		}
		if name == "" {
			// An unstarted member the operator did not add: etcd compares only peer URLs when a member
			// joins, but each entry needs a name of its own.
			name = fmt.Sprintf("unnamed-%d", i)
		}
		if url == "" {
			continue
		}
		parts = append(parts, name+"="+url)
	}
	var late []string
	for _, ord := range cfg.Late {
		late = append(late, resources.MemberName(c, ord))
	}
	return resources.MemberConfig{InitialCluster: strings.Join(parts, ","), InitialClusterState: cfg.State, ForceNewCluster: cfg.ForceNewCluster,
		Restore: cfg.Restore, LateBootstrap: late}
}

// recordVolumes writes, on each healthy member's claim, the ID of the member whose data it holds. A
// claim later found without it, or with another ID, tells the planner the data was lost.
func (r *EtcdClusterReconciler) recordVolumes(ctx context.Context, s *reconcileScope) error {
	obs := s.obs
	for _, m := range obs.members {
		ord, ok := obs.ordinals[m.ID]
		pvc := obs.pvcByOrdinal[ord]
		if !ok || ord < 0 || pvc == nil || !obs.healthy[m.ID] || !pvc.DeletionTimestamp.IsZero() || obs.claimReplaced(m.Name, m.ID, ord) {
			continue // a claim that replaced the member's recorded one never holds its data
		}
		if recorded := pvc.Annotations[AnnotationMemberID]; recorded != "" && !obs.restoredOnClaim(ord, recorded, m.ID) {
			continue // another member's ID on the claim is the planner's evidence that the data was lost
		}
		ac := corev1ac.PersistentVolumeClaim(pvc.Name, pvc.Namespace).
			WithAnnotations(map[string]string{AnnotationMemberID: strconv.FormatUint(m.ID, 16)})
		if err := r.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("record member %x on claim %s: %w", m.ID, pvc.Name, err)
		}
		// Status records the claim in this reconcile (memberStatuses), not at the next look: until it does,
		// the member's data has no record that survives the claim (quorum-loss recovery counts on it).
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[AnnotationMemberID] = strconv.FormatUint(m.ID, 16)
	}
	return nil
}

// restoredOnClaim: during a recovery from a backup, the claim of ordinal ord records a member of the lost
// cluster while member id, restored onto it by the member's current pod, is healthy: the claim now holds
// the restored member's data, and its record is rewritten.
func (obs observation) restoredOnClaim(ord int, recorded string, id uint64) bool {
	p := obs.podByOrdinal[ord]
	return obs.restoring != nil && p != nil && restoreRecoveryOf(&p.Spec) == obs.restoring.ID && recorded != strconv.FormatUint(id, 16)
}

// takeStep carries out the planned mutation: exactly one etcd call or one Kubernetes write, so a crash
// anywhere leaves a state the next plan continues from.
func (r *EtcdClusterReconciler) takeStep(ctx context.Context, s *reconcileScope) error {
	c, d := s.cluster, s.decision
	a := d.Action
	if a.Type == membership.ActionNone {
		if finishedRecovery(s.obs, d, r.now()) != nil {
			// Said once, as the configuration loses the recovery's record: the survivor answers alone,
			// or every member restored the backup.
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonQuorumRecovered, "QuorumRecovery", "%s", d.Message)
		}
		return nil
	}
	logf.FromContext(ctx).Info("membership step", "action", a.Type, "ordinal", a.Ordinal, "member", fmt.Sprintf("%x", a.ID), "why", d.Message)
	err := r.doStep(ctx, c, a, s.obs)
	if etcd.IsTransientRefusal(err) {
		// etcd accepts the change in a few seconds; the short requeue (learnerPollInterval) retries it.
		logf.FromContext(ctx).V(1).Info("etcd deferred the membership change", "action", a.Type, "reason", err.Error())
		r.metrics.countMembershipStep(c, string(a.Type), stepDeferred)
		s.deferred = true
		return nil
	}
	if err != nil {
		r.metrics.countMembershipStep(c, string(a.Type), stepFailed)
		// Reported once, by the reconcile's ReconcileFailed event and conditions, with etcd's text.
		return fmt.Errorf("%s: %w", d.Message, err)
	}
	r.metrics.countMembershipStep(c, string(a.Type), stepTaken)
	switch {
	case d.Phase == membership.PhaseRecovering:
		// Writes the survivor had not received are lost: a warning a human should read.
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonQuorumRecovery, string(a.Type), "%s", d.Message)
	case a.Force:
		// The message names the node and why it counts as lost.
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonNodeLost, string(a.Type), "%s", d.Message)
	default:
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonMemberChange, string(a.Type), "%s", d.Message)
	}
	failpoint.Inject(failpoint.AfterMembershipStep)
	return nil
}

func (r *EtcdClusterReconciler) doStep(ctx context.Context, c *etcdv1beta1.EtcdCluster, a membership.Action, obs observation) error {
	switch a.Type {
	case membership.ActionDeletePod:
		pod := obs.podByOrdinal[a.Ordinal]
		if pod == nil {
			return nil
		}
		return client.IgnoreNotFound(r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}))
	case membership.ActionBindPod:
		pod := obs.podByOrdinal[a.Ordinal]
		if pod == nil || pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() {
			return nil
		}
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: a.Node},
		}
		// A pod bound meanwhile (the scheduler was faster) answers Conflict: nothing left to do.
		if err := r.SubResource("binding").Create(ctx, pod, binding); err != nil && !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
		return nil
	case membership.ActionMarkReplace:
		pvc := obs.pvcByOrdinal[a.Ordinal]
		if pvc == nil {
			return fmt.Errorf("no data claim for member %d", a.Ordinal)
		}
		ac := corev1ac.PersistentVolumeClaim(pvc.Name, pvc.Namespace).WithAnnotations(map[string]string{AnnotationReplace: "true"})
		return r.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership)
	case membership.ActionUnmarkReplace:
		pvc := obs.pvcByOrdinal[a.Ordinal]
		if pvc == nil {
			return nil
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		delete(pvc.Annotations, AnnotationReplace)
		return client.IgnoreNotFound(r.Patch(ctx, pvc, patch))
	case membership.ActionDeleteVolume:
		// The claim goes first (it stays until its pod is gone), then the pod, so the StatefulSet
		// recreates both empty.
		if gone, err := r.deleteClaim(ctx, obs.pvcByOrdinal[a.Ordinal]); err != nil || gone {
			return err
		}
		pod := obs.podByOrdinal[a.Ordinal]
		switch {
		case pod != nil && a.Force && obs.nodes[pod.Spec.NodeName].down != "":
			// On a lost node no kubelet confirms the pod's end: without grace period 0 it would stay
			// Terminating, holding its claim and its name. Its member is no longer in etcd (the planner
			// removes it first), so an etcd the node may still run there cannot rejoin.
			return client.IgnoreNotFound(r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.GracePeriodSeconds(0)))
		case pod != nil && pod.DeletionTimestamp.IsZero():
			return client.IgnoreNotFound(r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}))
		}
		return nil
	}

	endpoints, err := stepEndpoints(c, a, obs)
	if err != nil {
		return err
	}
	cli, err := r.dial(ctx, c, &obs, endpoints)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	return a.ApplyToEtcd(ctx, cli, obs.urls.PeerURL(c, a.Ordinal))
}

// deleteClaim deletes the claim the cache holds (nil: none) and reports whether the API server no longer has
// it. A claim that is gone was released by its pod (pvc-protection holds it while a pod uses it, and the
// StatefulSet creates no pod while it is being deleted), so the pod of its ordinal the cache holds now is a
// new one, on a new claim, that must not be deleted: the pod cache can be ahead of the claim cache, which then
// still shows the old claim, marked for replacement. Deleting a claim already being deleted changes nothing
// and tells whether it is still there.
func (r *EtcdClusterReconciler) deleteClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (gone bool, err error) {
	if pvc == nil {
		return false, nil
	}
	switch err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Conflict: the UID precondition failed, so the claim of that name is a new one.
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil
}

// recordTransitions emits an event whenever a condition changes, so a blocked or failing cluster is
// visible in `kubectl describe` without an event on every reconcile.
func (r *EtcdClusterReconciler) recordTransitions(before, after *etcdv1beta1.EtcdCluster) {
	old := map[string]string{}
	for _, cond := range before.Status.Conditions {
		old[cond.Type] = string(cond.Status) + "/" + cond.Reason
	}
	for _, cond := range after.Status.Conditions {
		// BackupSucceeded has an event per run (recordBackupEvents), not only per transition.
		if old[cond.Type] == string(cond.Status)+"/"+cond.Reason || cond.Type == etcdv1beta1.ConditionBackupSucceeded {
			continue
		}
		if r.reported != nil && !r.reported.firstReport(after.UID, cond.Type, string(cond.Status)+"/"+cond.Reason) {
			continue // already reported; this reconcile read a stale cluster (transitions.go)
		}
		typ := corev1.EventTypeNormal
		if (cond.Type == etcdv1beta1.ConditionDegraded && cond.Status == "True") ||
			(cond.Type == etcdv1beta1.ConditionAvailable && cond.Status == "False" && cond.Reason != ReasonBootstrapping) ||
			(cond.Type == etcdv1beta1.ConditionSpread && cond.Status == "False") ||
			cond.Reason == ReasonBlocked {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(after, nil, typ, cond.Reason, cond.Type, "%s=%s: %s", cond.Type, cond.Status, cond.Message)
	}
}

// stepEndpoints are the members an etcd step is sent to. Voting members: a learner refuses them ("rpc not
// supported for learner"), and the client would send some there. Never the member being removed, unless no
// other is known: it stops as it applies its own removal, and its answer, "server stopped", would report a
// removal that succeeded as failed. Leadership moves are asked of the leader itself.
func stepEndpoints(c *etcdv1beta1.EtcdCluster, a membership.Action, obs observation) ([]string, error) {
	endpoints := voterClientURLs(c, obs, obs.urls)
	switch a.Type {
	case membership.ActionRemove:
		removed := obs.urls.ClientURL(c, a.Ordinal)
		if others := slices.DeleteFunc(slices.Clone(endpoints), func(e string) bool { return e == removed }); len(others) > 0 {
			endpoints = others
		}
	case membership.ActionMoveLeader:
		endpoints = nil
		for id, st := range obs.statuses {
			if st.Leader == id {
				endpoints = []string{obs.urls.ClientURL(c, obs.ordinals[id])}
			}
		}
		if len(endpoints) == 0 {
			return nil, fmt.Errorf("no leader to move leadership from")
		}
	}
	return endpoints, nil
}

// voterClientURLs lists the client URLs of the voting members that have a pod; all pods' URLs when etcd's
// member list is unknown (the step then fails or succeeds on whichever member answers).
func voterClientURLs(c *etcdv1beta1.EtcdCluster, obs observation, urls MemberURLs) []string {
	var endpoints []string
	for _, m := range obs.members {
		if ord, ok := obs.ordinals[m.ID]; ok && !m.IsLearner && obs.podByOrdinal[ord] != nil {
			endpoints = append(endpoints, urls.ClientURL(c, ord))
		}
	}
	if len(endpoints) == 0 {
		for ord := range obs.podByOrdinal {
			endpoints = append(endpoints, urls.ClientURL(c, ord))
		}
	}
	slices.Sort(endpoints)
	return endpoints
}
