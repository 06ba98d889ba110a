package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// jobNotOwnedRetry is how often a backup blocked by another's Job looks again; the Job's deletion usually
// brings it back sooner (events of a Job owned by an EtcdBackup of this name reach this one).
const jobNotOwnedRetry = 30 * time.Second

// EtcdBackupReconciler runs on-demand backups: one Job per EtcdBackup, with the same pod as the scheduled
// backups, and the Job's result copied into the EtcdBackup's status. Succeeded and Failed are final.
type EtcdBackupReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder recorder.EventRecorder
	Options  resources.Options
}

// +kubebuilder:rbac:groups=etcd.seedops.io,resources=etcdbackups,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.seedops.io,resources=etcdbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch

// Reconcile moves one EtcdBackup through Pending → Running → Succeeded/Failed:
//  1. read the backup; a final phase means nothing to do;
//  2. read its cluster (missing: stay Pending and say so; the cluster's creation brings us back);
//  3. make sure the destination exists (the default claim) and the Job runs;
//  4. copy the Job's progress or result into status, in one patch, with an Event per transition.
func (r *EtcdBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// 1. Read the backup.
	b := &etcdv1beta1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Status.Phase == etcdv1beta1.BackupSucceeded || b.Status.Phase == etcdv1beta1.BackupFailed || !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := b.DeepCopy()
	err := r.reconcile(ctx, b)
	if perr := r.patchStatus(ctx, before, b); perr != nil && err == nil {
		err = perr
	}
	var wait waitError
	if errors.As(err, &wait) {
		return ctrl.Result{RequeueAfter: wait.after}, nil
	}
	if namespaceTerminating(err) {
		// The namespace's deletion takes the backup with it.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

func (r *EtcdBackupReconciler) reconcile(ctx context.Context, b *etcdv1beta1.EtcdBackup) error {
	if b.Status.Phase == "" {
		b.Status.Phase = etcdv1beta1.BackupPending
	}
	// 2. Read the cluster.
	c, err := r.clusterOf(ctx, b)
	if err != nil || c == nil {
		return err
	}

	// 3. Destination and Job: the Job's spec is immutable and it runs once, so it is created, never updated.
	dest := resources.BackupDestination(c, b.Spec.Destination)
	if resources.UsesDefaultBackupPVC(c, dest) {
		if _, err := applyBackupPVC(ctx, r.Client, c, dest); err != nil {
			return err
		}
	}
	job := &batchv1.Job{}
	err = r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
	if apierrors.IsNotFound(err) {
		return r.startJob(ctx, b, c, dest)
	}
	if err != nil {
		return err
	}
	if err := r.checkJobOwner(b, job); err != nil {
		return err
	}
	if b.Status.JobName == "" { // status lost after the Job was created
		b.Status.JobName, b.Status.Destination = job.Name, &dest
		b.Status.StartTime = &job.CreationTimestamp
		b.Status.ClusterUID = types.UID(job.Labels[resources.LabelClusterUID])
	}

	// 4. Progress or result.
	return r.recordJobResult(ctx, b, c, job)
}

// clusterOf reads the backup's EtcdCluster; nil without an error when it does not exist, which the status
// and an event (once) say.
func (r *EtcdBackupReconciler) clusterOf(ctx context.Context, b *etcdv1beta1.EtcdBackup) (*etcdv1beta1.EtcdCluster, error) {
	c := &etcdv1beta1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		msg := fmt.Sprintf("EtcdCluster %s not found in namespace %s", b.Spec.ClusterName, b.Namespace)
		if b.Status.Error != msg {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, ReasonClusterNotFound, "Backup", "%s; waiting for it", msg)
		}
		b.Status.Error = msg
		return nil, nil
	}
	b.Status.Error = ""
	return c, nil
}

// startJob creates the backup Job of b and records its start.
func (r *EtcdBackupReconciler) startJob(ctx context.Context, b *etcdv1beta1.EtcdBackup, c *etcdv1beta1.EtcdCluster, dest etcdv1beta1.BackupDestination) error {
	// The backup dials the cluster under the DNS domain its members were created with.
	opts := r.Options
	if sts := (&appsv1.StatefulSet{}); r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, sts) == nil {
		opts = clusterOptions(r.Options, c, sts, nil)
	}
	if err := r.Apply(ctx, resources.BackupJob(c, b, opts), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("create backup job: %w", err)
	}
	now := metav1.Now()
	b.Status.JobName, b.Status.StartTime, b.Status.Destination = resources.BackupJobName(b), &now, &dest
	b.Status.ClusterUID = c.UID
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, ReasonBackupStarted, "Backup", "backing up EtcdCluster %s with Job %s", c.Name, b.Status.JobName)
	logf.FromContext(ctx).Info("backup started", "cluster", c.Name, "job", b.Status.JobName)
	return nil
}

// checkJobOwner refuses a Job of the backup's name that b does not control: most likely the Job of a
// deleted EtcdBackup of the same name, which the garbage collector has not removed yet. Its result is that
// backup's, never this one's.
func (r *EtcdBackupReconciler) checkJobOwner(b *etcdv1beta1.EtcdBackup, job *batchv1.Job) error {
	if metav1.IsControlledBy(job, b) {
		return nil
	}
	owner := "it has no controller"
	if ref := metav1.GetControllerOf(job); ref != nil {
		owner = fmt.Sprintf("its controller is %s %s, UID %s", ref.Kind, ref.Name, ref.UID)
	}
	msg := fmt.Sprintf("Job %s exists but is not this EtcdBackup's (%s; this EtcdBackup's UID is %s), so its result "+
		"is not reported as this backup's: it may be left from a deleted EtcdBackup of the same name. "+
		"The backup starts once that Job is gone (delete it, or wait for the garbage collector)", job.Name, owner, b.UID)
	if b.Status.Error != msg {
		r.Recorder.Eventf(b, job, corev1.EventTypeWarning, ReasonJobNotOwned, "Backup", "%s", msg)
	}
	b.Status.Error = msg
	return waitError{errors.New(msg), jobNotOwnedRetry}
}

// recordJobResult reports the Job's progress, then its result (with the pod's own report of the snapshot)
// once it has finished.
func (r *EtcdBackupReconciler) recordJobResult(ctx context.Context, b *etcdv1beta1.EtcdBackup, c *etcdv1beta1.EtcdCluster, job *batchv1.Job) error {
	done, succeeded, at := jobFinished(job)
	if !done {
		if job.Status.Active > 0 {
			b.Status.Phase = etcdv1beta1.BackupRunning
		}
		return nil
	}
	res, err := jobResult(ctx, r.Client, job, succeeded)
	if err != nil {
		return err
	}
	finished := metav1.NewTime(at)
	b.Status.CompletionTime = &finished
	if !succeeded {
		b.Status.Phase, b.Status.Error = etcdv1beta1.BackupFailed, res.Error
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, ReasonBackupFailed, "Backup", "backup of %s failed: %s", c.Name, res.Error)
		return nil
	}
	b.Status.Phase = etcdv1beta1.BackupSucceeded
	b.Status.Location, b.Status.Key, b.Status.SizeBytes = res.Location, res.Key, res.SizeBytes
	b.Status.Revision, b.Status.EtcdVersion, b.Status.SHA256 = res.Revision, res.EtcdVersion, res.SHA256
	if !res.StartTime.IsZero() {
		start := metav1.NewTime(res.StartTime)
		b.Status.StartTime = &start
	}
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, ReasonBackupSucceeded, "Backup",
		"stored %s (revision %d, %d bytes, etcd %s) in %s", res.Location, res.Revision, res.SizeBytes, res.EtcdVersion,
		finished.Sub(b.Status.StartTime.Time).Round(time.Second))
	return nil
}

func (r *EtcdBackupReconciler) patchStatus(ctx context.Context, before, after *etcdv1beta1.EtcdBackup) error {
	// Optimistic lock: a backup's phase only moves forward, so never overwrite a newer status.
	return patchStatusIfChanged(ctx, r.Client, !equality.Semantic.DeepEqual(before.Status, after.Status), after,
		client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// SetupWithManager watches EtcdBackups, their Jobs, and clusters (a backup may be created first).
func (r *EtcdBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1beta1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&etcdv1beta1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToPendingBackups)).
		Named(BackupControllerName).
		Complete(r)
}

func (r *EtcdBackupReconciler) clusterToPendingBackups(ctx context.Context, o client.Object) []reconcile.Request {
	backups := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, backups, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, b := range backups.Items {
		if b.Spec.ClusterName == o.GetName() && b.Status.JobName == "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
		}
	}
	return out
}
