package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// recoveryBackup is a snapshot of the cluster that a quorum-loss recovery from a backup can restore.
type recoveryBackup struct {
	membership.Backup
	source   resources.RestoreSource
	finished time.Time
}

// recoveryBackups are the cluster's snapshots a restore can read: its Succeeded EtcdBackups (its own, not a
// deleted namesake's: backupOfCluster), and the last successful backup status reports (a scheduled one, on
// the cluster's backup destination). Listed only when the spec allows a recovery from a backup or one is
// under way.
func (r *EtcdClusterReconciler) recoveryBackups(ctx context.Context, c *etcdv1beta1.EtcdCluster, restoring *membership.RestoreRecovery) ([]recoveryBackup, error) {
	if c.Spec.Recovery.QuorumLoss != etcdv1beta1.QuorumLossFromBackup && restoring == nil {
		return nil, nil
	}
	list := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	var out []recoveryBackup
	for i := range list.Items {
		b := &list.Items[i]
		st := b.Status
		if b.Spec.ClusterName != c.Name || st.Phase != etcdv1beta1.BackupSucceeded || st.Destination == nil || st.Key == "" || st.CompletionTime == nil ||
			!backupOfCluster(c, st.ClusterUID, st.StartTime) {
			continue
		}
		out = append(out, recoveryBackup{Backup: membership.Backup{Location: st.Location, Revision: st.Revision},
			source: resources.RestoreSource{Destination: *st.Destination, Key: st.Key}, finished: st.CompletionTime.Time})
	}
	if b, ok := lastReportedBackup(c); ok {
		out = append(out, b)
	}
	return out, nil
}

// confirmMissingClaims reads live, by name, the claim of each voter status last recorded that the cache
// does not hold, while quorum-loss recovery may act: recovery counts a voter without a claim as one whose
// data is gone, and the cache holds only claims with the operator's label. A claim created without it (by a
// user, ahead of the StatefulSet) is still the member's volume, and missing it would turn an outage into
// a recovery that discards the majority's data.
func (r *EtcdClusterReconciler) confirmMissingClaims(ctx context.Context, c *etcdv1beta1.EtcdCluster, obs *observation) error {
	q := c.Spec.Recovery.QuorumLoss
	avail := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable)
	if q != etcdv1beta1.QuorumLossFromSurvivor && q != etcdv1beta1.QuorumLossFromBackup ||
		avail == nil || avail.Status != metav1.ConditionFalse || avail.Reason != ReasonQuorumLost {
		return nil // as recoverQuorum: it acts only on a recorded loss of quorum
	}
	for _, m := range c.Status.Members {
		ord := resources.MemberOrdinal(c, m.Name)
		if ord < 0 || m.ID == "" || m.Learner || m.Unknown || obs.pvcByOrdinal[ord] != nil {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		switch err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.DataVolumeName + "-" + m.Name}, pvc); {
		case err == nil:
			obs.pvcByOrdinal[ord] = pvc
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read claim of member %s: %w", m.Name, err)
		}
	}
	return nil
}

// lastReportedBackup is status's last successful backup, when its location is on the cluster's backup
// destination (a scheduled backup's always is; an EtcdBackup elsewhere is listed by itself).
func lastReportedBackup(c *etcdv1beta1.EtcdCluster) (recoveryBackup, bool) {
	loc, at := c.Status.LastBackupLocation, c.Status.LastBackupTime
	if loc == "" || at == nil {
		return recoveryBackup{}, false
	}
	dest := resources.BackupDestination(c, nil)
	var src resources.RestoreSource
	switch {
	case dest.S3 != nil && strings.HasPrefix(loc, "s3://"+dest.S3.Bucket+"/"):
		src = resources.RestoreSource{Destination: dest, Key: strings.TrimPrefix(loc, "s3://"+dest.S3.Bucket+"/")}
	case dest.PVC != nil && strings.HasPrefix(loc, "pvc://"+dest.PVC.ClaimName+"/"):
		src = resources.RestoreSource{Destination: dest, Key: strings.TrimPrefix(loc, "pvc://"+dest.PVC.ClaimName+"/")}
	default:
		return recoveryBackup{}, false
	}
	rev, ok := backup.RevisionOf(c.Name, src.Key)
	if !ok {
		return recoveryBackup{}, false
	}
	return recoveryBackup{Backup: membership.Backup{Location: loc, Revision: rev}, source: src, finished: at.Time}, true
}

// newestBackup is the backup a recovery starts from: the newest, so the fewest writes are lost.
func newestBackup(backups []recoveryBackup) *membership.Backup {
	if len(backups) == 0 {
		return nil
	}
	b := slices.MaxFunc(backups, func(a, b recoveryBackup) int {
		if c := a.finished.Compare(b.finished); c != 0 {
			return c
		}
		return int(a.Revision - b.Revision)
	})
	return &b.Backup
}

// recoverySource is where the restore step of recovery rec reads its snapshot (nil when no backup of the
// cluster is at the recorded location any more).
func recoverySource(backups []recoveryBackup, rec membership.RestoreRecovery) *resources.RestoreSource {
	for _, b := range backups {
		if b.Location == rec.Location {
			src := b.source
			src.Recovery = rec.ID
			return &src
		}
	}
	return nil
}

// restoreRecoveryOf is the quorum-loss recovery a member pod spec's restore step is for ("" for none).
func restoreRecoveryOf(spec *corev1.PodSpec) string {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name != resources.RestoreContainerName {
			continue
		}
		for _, a := range spec.InitContainers[i].Args {
			if id, ok := strings.CutPrefix(a, resources.RestoreRecoveryFlag); ok {
				return id
			}
		}
	}
	return ""
}

// recoveryRecord is the recovery from a backup the members' configuration records after this reconcile.
func (s *reconcileScope) recoveryRecord() *membership.RestoreRecovery {
	if cfg := s.decision.Config; cfg != nil {
		return cfg.Restore
	}
	return s.obs.restoring
}

// templateRestore is the restore step the members' template carries: a recovery's, while one is recorded,
// else the bootstrap's until every member restored it.
func (s *reconcileScope) templateRestore() *resources.RestoreSource {
	if rec := s.recoveryRecord(); rec != nil {
		if rec.Replay {
			return replaySource(s.cluster, *rec, s.obs.replay, s.obs.templateRestores())
		}
		return recoverySource(s.obs.recoveryBackups, *rec)
	}
	return restoreInTemplate(s.cluster, s.obs.restore)
}

// finishedRecovery is the recovery this reconcile's decision ends (nil when none): the configuration's
// record of it goes, with etcd answering.
func finishedRecovery(obs observation, d membership.Decision, now time.Time) *etcdv1beta1.RecoveryStatus {
	if !obs.reachable || d.Config == nil {
		return nil
	}
	switch {
	case obs.restoring != nil && d.Config.Restore == nil:
		return &etcdv1beta1.RecoveryStatus{Strategy: etcdv1beta1.QuorumLossFromBackup, Time: metav1.NewTime(now),
			Source: obs.restoring.Location, Revision: obs.restoring.Revision, Fallback: obs.restoring.Fallback}
	case obs.forcing != nil && d.Config.ForceNewCluster == nil:
		return &etcdv1beta1.RecoveryStatus{Strategy: etcdv1beta1.QuorumLossFromSurvivor, Time: metav1.NewTime(now), Source: obs.forcing.Member}
	}
	return nil
}

// newFallback is the fallback to the newest full backup that the configuration about to be written records
// and the one observed does not ("" for none): said once, in an event, when it is decided.
func newFallback(observed, writing *membership.RestoreRecovery) string {
	if writing == nil || writing.Fallback == "" || observed != nil && observed.ID == writing.ID && observed.Fallback == writing.Fallback {
		return ""
	}
	return writing.Fallback
}
