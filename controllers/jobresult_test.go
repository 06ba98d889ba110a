package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/seedops/etcd-operator/internal/resources"
)

// TestJobResultReadsOnlyTheJobsOwnPods: a pod left from an earlier Job of the same name reports another run.
func TestJobResultReadsOnlyTheJobsOwnPods(t *testing.T) {
	scheme := testScheme(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup-1", UID: "new-job"}}
	old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup-1", UID: "old-job"}}
	pod := func(name string, owner *batchv1.Job, message string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{batchv1.JobNameLabel: job.Name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.BackupContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: message}}}}},
		}
	}
	leftover := pod("backup-1-old", old, `{"key":"ns/c/on-demand/old.db","revision":5}`)

	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(leftover).Build()
	if res, err := jobResult(context.Background(), cl, job, true); err == nil || !strings.Contains(err.Error(), backupJobResultFallback) {
		t.Fatalf("only an earlier Job's pod exists: result %+v, err %v; want no result", res, err)
	}

	cl = fake.NewClientBuilder().WithScheme(scheme).WithObjects(leftover, pod("backup-1-new", job, `{"key":"ns/c/on-demand/new.db","revision":9}`)).Build()
	res, err := jobResult(context.Background(), cl, job, true)
	if err != nil || res.Key != "ns/c/on-demand/new.db" {
		t.Fatalf("result %+v, err %v; want the Job's own pod's", res, err)
	}
}

// TestJobResultWaitsForTheFailedPodsMessage: a failed Job whose pod is not yet seen to end (the cache lags
// behind the Job) is not reported with the Job's condition, which says only that the Job failed: the pod's
// message, read at a later look, says why.
func TestJobResultWaitsForTheFailedPodsMessage(t *testing.T) {
	scheme := testScheme(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup-2", UID: "job"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup-2-run", Labels: map[string]string{batchv1.JobNameLabel: job.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}}}

	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod.DeepCopy()).Build()
	if res, err := jobResult(context.Background(), cl, job, false); !errors.Is(err, errResultPending) {
		t.Fatalf("pod not seen to end: result %+v, err %v; want the result pending", res, err)
	}

	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.BackupContainerName,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":"upload s3://etcd/x: Access Denied"}`}}}}
	cl = fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).Build()
	if res, err := jobResult(context.Background(), cl, job, false); err != nil || res.Error != "upload s3://etcd/x: Access Denied" {
		t.Fatalf("result %+v, err %v; want the pod's message", res, err)
	}

	cl = fake.NewClientBuilder().WithScheme(scheme).Build()
	if res, err := jobResult(context.Background(), cl, job, false); err != nil || !strings.Contains(res.Error, "BackoffLimitExceeded") {
		t.Fatalf("no pod left: result %+v, err %v; want the Job's condition", res, err)
	}
}
