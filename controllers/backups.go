package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/resources"
)

// backupJobResultFallback is the result of a backup pod that reported none.
const backupJobResultFallback = "the backup pod reported no result"

// backupResult is what a backup pod writes as its termination message (see cmd/backup.go).
type backupResult struct {
	backup.Result
	Error string `json:"error,omitempty"`
}

// backupRun is one finished backup Job of a cluster.
type backupRun struct {
	job       string
	kind      string
	finished  time.Time
	succeeded bool
	result    backupResult
}

// jobFinished returns whether a Job completed or failed, and when.
func jobFinished(j *batchv1.Job) (done, succeeded bool, at time.Time) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, c.LastTransitionTime.Time
		case batchv1.JobFailed:
			return true, false, c.LastTransitionTime.Time
		}
	}
	return false, false, time.Time{}
}

// jobResult reads the result a finished Job's pod reported: the succeeded pod's for a complete Job, the
// newest failed pod's otherwise. Only the Job's own pods count: a pod left from an earlier Job of the same
// name would report another run.
func jobResult(ctx context.Context, c client.Client, j *batchv1.Job, succeeded bool) (backupResult, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(j.Namespace), client.MatchingLabels{batchv1.JobNameLabel: j.Name}); err != nil {
		return backupResult{}, err
	}
	var best *corev1.ContainerStateTerminated
	running := false
	for i := range pods.Items {
		if !metav1.IsControlledBy(&pods.Items[i], j) {
			continue
		}
		terminated := false
		for _, cs := range pods.Items[i].Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != resources.BackupContainerName || t == nil {
				continue
			}
			terminated = true
			if (t.ExitCode == 0) == succeeded && (best == nil || t.FinishedAt.After(best.FinishedAt.Time)) {
				best = t
			}
		}
		running = running || !terminated && pods.Items[i].DeletionTimestamp.IsZero()
	}
	switch {
	case best == nil && succeeded:
		return backupResult{}, fmt.Errorf("%s: %s", j.Name, backupJobResultFallback)
	case best == nil && running:
		// The Job failed after its pod ended, but the pod's end is not in view yet (the cache lags): its
		// message says why the backup failed, which the Job's condition does not.
		return backupResult{}, fmt.Errorf("%s: %w", j.Name, errResultPending)
	case best == nil:
		return backupResult{Error: jobFailureMessage(j)}, nil
	}
	var res backupResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(best.Message)), &res); err != nil {
		if succeeded {
			return backupResult{}, fmt.Errorf("%s: unreadable result %q: %w", j.Name, best.Message, err)
		}
		res.Error = strings.TrimSpace(best.Message) // the log tail (FallbackToLogsOnError)
	}
	if !succeeded && res.Error == "" {
		res.Error = jobFailureMessage(j)
	}
	return res, nil
}

// errResultPending: a failed Job's pod has not been seen to end yet; its result is read at a later look.
var errResultPending = errors.New("the pod's result is not in view yet")

func jobFailureMessage(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return "job failed"
}

// backupOfCluster reports whether a backup recorded as taken of the cluster with UID uid, and started at
// started, is one of c's. Names are not enough: a cluster deleted and created again under its name is
// another cluster, and its predecessor's backups (whose EtcdBackups and on-demand Jobs outlive it) must
// neither appear in its status nor be restored into it. A backup without the record (taken by an operator
// that did not write it) counts only when it started after c was created, which none of a predecessor's can
// have; a backup started within the second c was created is not counted.
func backupOfCluster(c *etcdv1beta1.EtcdCluster, uid types.UID, started *metav1.Time) bool {
	if uid != "" {
		return uid == c.UID
	}
	return started != nil && started.After(c.CreationTimestamp.Time)
}

// observeBackups lists the cluster's finished backup Jobs (scheduled and on-demand), oldest first.
func (r *EtcdClusterReconciler) observeBackups(ctx context.Context, c *etcdv1beta1.EtcdCluster) ([]backupRun, error) {
	jobs := &batchv1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(c.Namespace),
		client.MatchingLabels{resources.LabelInstance: c.Name, resources.LabelComponent: resources.ComponentBackup}); err != nil {
		return nil, err
	}
	var runs []backupRun
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !backupOfCluster(c, types.UID(j.Labels[resources.LabelClusterUID]), &j.CreationTimestamp) {
			continue
		}
		done, ok, at := jobFinished(j)
		if !done {
			continue
		}
		res, err := jobResult(ctx, r.Client, j, ok)
		if errors.Is(err, errResultPending) {
			continue // reported at a later reconcile, with the pod's message
		}
		if err != nil {
			return nil, err
		}
		runs = append(runs, backupRun{job: j.Name, kind: j.Labels[resources.LabelBackupKind], finished: at, succeeded: ok, result: res})
	}
	// Condition times have second resolution; CronJob names its Jobs by schedule time, so the name orders
	// runs finished within the same second.
	slices.SortFunc(runs, func(a, b backupRun) int {
		if c := a.finished.Compare(b.finished); c != 0 {
			return c
		}
		if len(a.job) != len(b.job) {
			return len(a.job) - len(b.job)
		}
		return strings.Compare(a.job, b.job)
	})
	return runs, nil
}

// backupStatus folds finished backup runs into the cluster's status: the newest successful backup of either
// kind, and whether the newest scheduled run succeeded. History only moves forward: Jobs the CronJob has
// cleaned up do not take reported backups away.
func backupStatus(s *etcdv1beta1.EtcdClusterStatus, c *etcdv1beta1.EtcdCluster, runs []backupRun, now time.Time) {
	var lastScheduled *backupRun
	for i := range runs {
		run := &runs[i]
		if run.succeeded && (s.LastBackupTime == nil || run.finished.After(s.LastBackupTime.Time)) {
			t := metav1.NewTime(run.finished)
			s.LastBackupTime, s.LastBackupLocation = &t, run.result.Location
		}
		if run.kind == resources.BackupKindScheduled {
			lastScheduled = run
		}
	}
	if lastScheduled == nil || lastScheduled.job == s.LastScheduledBackupJob {
		return
	}
	s.LastScheduledBackupJob = lastScheduled.job
	cond := metav1.Condition{Type: etcdv1beta1.ConditionBackupSucceeded, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)}
	if lastScheduled.succeeded {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonBackupSucceeded
		cond.Message = fmt.Sprintf("scheduled backup %s stored %s (revision %d, %d bytes)", lastScheduled.job,
			lastScheduled.result.Location, lastScheduled.result.Revision, lastScheduled.result.SizeBytes)
		if lastScheduled.result.PruneError != "" {
			cond.Message += "; retention could not prune: " + lastScheduled.result.PruneError
		}
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonBackupFailed
		cond.Message = fmt.Sprintf("scheduled backup %s failed: %s", lastScheduled.job, lastScheduled.result.Error)
	}
	meta.SetStatusCondition(&s.Conditions, cond)
}

// recordBackupEvents tells about each scheduled run once, when status first reports it.
func (r *EtcdClusterReconciler) recordBackupEvents(before, after *etcdv1beta1.EtcdCluster) {
	if after.Status.LastScheduledBackupJob == before.Status.LastScheduledBackupJob {
		return
	}
	cond := meta.FindStatusCondition(after.Status.Conditions, etcdv1beta1.ConditionBackupSucceeded)
	if cond == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if cond.Status != metav1.ConditionTrue {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, nil, kind, cond.Reason, "Backup", "%s", cond.Message)
}

// reconcileBackupPVC creates the default backup claim when scheduled backups go there.
func (r *EtcdClusterReconciler) reconcileBackupPVC(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	d := resources.BackupDestination(c, nil)
	if (c.Spec.BackupSchedule == "" && !continuousEnabled(c)) || !resources.UsesDefaultBackupPVC(c, d) {
		return nil
	}
	changed, err := applyBackupPVC(ctx, r.Client, c, d)
	s.applied.add(ctx, changed, "PersistentVolumeClaim", resources.BackupPVCName(c))
	return err
}

// applyBackupPVC applies the default backup claim. Only its labels and requested size are compared: the
// API server fills in the rest of a claim's spec (volume name, class, mode).
func applyBackupPVC(ctx context.Context, c client.Client, ec *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination) (bool, error) {
	existing := &corev1.PersistentVolumeClaim{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: resources.BackupPVCName(ec)}, existing)
	if err == nil {
		return false, nil // a claim's spec is immutable but for its size; backups never shrink it
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	ac := resources.BackupPVC(ec, d)
	if err := c.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply backup claim %s: %w", resources.BackupPVCName(ec), err)
	}
	return true, nil
}
