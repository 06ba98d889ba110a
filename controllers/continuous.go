package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Reasons of the ContinuousBackup condition.
const (
	ReasonCapturing        = "Capturing"
	ReasonCoverageGap      = "CoverageGap"
	ReasonAgentUnavailable = "AgentUnavailable"
)

func continuousEnabled(c *etcdv1beta1.EtcdCluster) bool {
	return c.Spec.Backup.Continuous != nil && c.Spec.Backup.Continuous.Enabled
}

// agentReport is the continuous backup agent's GET /status (cmd/continuousbackup.go).
type agentReport struct {
	ClusterUID     string     `json:"clusterUID"`
	Location       string     `json:"location"`
	Capturing      bool       `json:"capturing"`
	OldestRevision int64      `json:"oldestRevision"`
	OldestTime     *time.Time `json:"oldestTime,omitempty"`
	NewestRevision int64      `json:"newestRevision"`
	NewestTime     *time.Time `json:"newestTime,omitempty"`
	Gaps           []struct {
		FromRevision int64  `json:"fromRevision"`
		ToRevision   int64  `json:"toRevision"`
		Reason       string `json:"reason"`
	} `json:"gaps"`
	LastError string `json:"lastError"`
}

// reconcileContinuousBackup runs the agent while spec.backup.continuous.enabled, once the cluster exists,
// and removes it when turned off (what it stored stays).
func (r *EtcdClusterReconciler) reconcileContinuousBackup(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	if !continuousEnabled(c) {
		return r.deleteOwned(ctx, c, &appsv1.StatefulSet{}, resources.ContinuousBackupName(c), "continuous backup agent", "spec.backup.continuous.enabled is false")
	}
	if s.obs.statefulSet == nil {
		return nil // nothing to capture yet
	}
	desired := resources.ContinuousBackupStatefulSet(c, s.obs.options)
	changed, err := applyIfChanged(ctx, r.objects(), &appsv1.StatefulSet{}, desired, appsv1ac.ExtractStatefulSet)
	s.applied.add(ctx, changed, "StatefulSet", resources.ContinuousBackupName(c))
	return err
}

// observeContinuousBackup asks the agent's pod for its report: the agent has no Kubernetes API access, so
// the operator carries what it says into status. A pod that is not ready or does not answer is the
// problem reported instead.
func (r *EtcdClusterReconciler) observeContinuousBackup(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*agentReport, string) {
	if !continuousEnabled(c) {
		return nil, ""
	}
	pod := &corev1.Pod{}
	name := resources.ContinuousBackupName(c) + "-0"
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("the continuous backup agent (pod %s) is not running yet", name)
		}
		return nil, fmt.Sprintf("reading pod %s: %v", name, err)
	}
	if !podReady(pod) || pod.Status.PodIP == "" {
		return nil, fmt.Sprintf("the continuous backup agent (pod %s) is not ready: it has no chain stored yet, or cannot reach the cluster or the destination", name)
	}
	url := r.agentStatusURL(pod)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Sprintf("the continuous backup agent does not answer at %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("the continuous backup agent answered %s at %s", resp.Status, url)
	}
	report := &agentReport{}
	if err := json.NewDecoder(resp.Body).Decode(report); err != nil {
		return nil, fmt.Sprintf("the continuous backup agent's report at %s: %v", url, err)
	}
	if report.ClusterUID != string(c.UID) {
		return nil, fmt.Sprintf("the continuous backup agent captures cluster UID %s, not this cluster's %s", report.ClusterUID, c.UID)
	}
	return report, ""
}

// agentStatusURL is where the agent's pod serves its report; tests point it elsewhere.
func (r *EtcdClusterReconciler) agentStatusURL(pod *corev1.Pod) string {
	if r.AgentStatusURL != nil {
		return r.AgentStatusURL(pod)
	}
	return fmt.Sprintf("http://%s:%d/status", pod.Status.PodIP, resources.ContinuousBackupPort)
}

// continuousStatus carries the agent's report into status and the ContinuousBackup condition; both go when
// the capture is turned off. The message changes only with the covered range's start and the gaps, not
// with every write the agent stores.
func continuousStatus(s *etcdv1beta1.EtcdClusterStatus, c *etcdv1beta1.EtcdCluster, obs observation, now time.Time) {
	if !continuousEnabled(c) {
		s.ContinuousBackup = nil
		meta.RemoveStatusCondition(&s.Conditions, etcdv1beta1.ConditionContinuousBackup)
		return
	}
	cond := metav1.Condition{Type: etcdv1beta1.ConditionContinuousBackup, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)}
	rep := obs.continuous
	switch {
	case rep == nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonAgentUnavailable, obs.continuousProblem
	case !rep.Capturing:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonAgentUnavailable
		cond.Message = "the continuous backup agent is not capturing: " + rep.LastError
	case len(rep.Gaps) > 0:
		var gaps []string
		for _, g := range rep.Gaps {
			gaps = append(gaps, fmt.Sprintf("%d-%d (%s)", g.FromRevision, g.ToRevision, g.Reason))
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonCoverageGap
		cond.Message = fmt.Sprintf("capturing; restorable from revision %d, except in the gaps %s", rep.OldestRevision, strings.Join(gaps, ", "))
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonCapturing
		cond.Message = fmt.Sprintf("capturing; restorable from revision %d to the newest stored (status.continuousBackup)", rep.OldestRevision)
	}
	meta.SetStatusCondition(&s.Conditions, cond)
	if rep == nil {
		return // the last report stays: what was stored is still there
	}
	out := &etcdv1beta1.ContinuousBackupStatus{Location: rep.Location, OldestRevision: rep.OldestRevision, NewestRevision: rep.NewestRevision}
	if rep.OldestTime != nil {
		t := metav1.NewTime(rep.OldestTime.UTC().Truncate(time.Second))
		out.OldestTime = &t
	}
	if rep.NewestTime != nil {
		t := metav1.NewTime(rep.NewestTime.UTC().Truncate(time.Second))
		out.NewestTime = &t
	}
	for _, g := range rep.Gaps {
		out.Gaps = append(out.Gaps, etcdv1beta1.ContinuousBackupGap{FromRevision: g.FromRevision, ToRevision: g.ToRevision, Reason: g.Reason})
	}
	s.ContinuousBackup = out
}

// pointInTimeSource resolves a bootstrap from a continuous backup: the Job that replays it to the chosen
// point must have stored its snapshot (PointInTimeKey) before any member starts. A non-empty wait says what
// the cluster waits for; failed says why the restore was refused (nothing starts).
func (r *EtcdClusterReconciler) pointInTimeSource(ctx context.Context, c *etcdv1beta1.EtcdCluster) (src *resources.RestoreSource, wait, failed string, err error) {
	from := c.Spec.Bootstrap.FromBackup
	if from.BackupName != "" {
		return nil, "", "fromBackup.pointInTime restores a continuous backup: give its location as key with pvc or s3, not backupName (an EtcdBackup is one snapshot)", nil
	}
	d := etcdv1beta1.BackupDestination{PVC: from.PVC, S3: from.S3}
	job := &batchv1.Job{}
	err = r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PointInTimeJobName(c)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("replaying the continuous backup at %s to %s (Job %s)", from.Key, pointInTimeTarget(from.PointInTime), resources.PointInTimeJobName(c)), "", nil
	case err != nil:
		return nil, "", "", err
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return &resources.RestoreSource{Destination: d, Key: resources.PointInTimeKey(c, d)}, "", "", nil
		case batchv1.JobFailed:
			msg, err := r.pointInTimeFailure(ctx, c)
			if err != nil {
				return nil, "", "", err
			}
			return nil, "", "point-in-time restore refused, nothing started: " + msg, nil
		}
	}
	return nil, fmt.Sprintf("replaying the continuous backup at %s to %s (Job %s)", from.Key, pointInTimeTarget(from.PointInTime), resources.PointInTimeJobName(c)), "", nil
}

// pointInTimeFailure is the error the Job's last pod reported (its termination message).
func (r *EtcdClusterReconciler) pointInTimeFailure(ctx context.Context, c *etcdv1beta1.EtcdCluster) (string, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: resources.PointInTimeJobName(c)}); err != nil {
		return "", err
	}
	msg, newest := "the Job failed", time.Time{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != resources.PointInTimeContainerName || t == nil || t.ExitCode == 0 || t.FinishedAt.Time.Before(newest) {
				continue
			}
			newest = t.FinishedAt.Time
			var res struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &res) == nil && res.Error != "" {
				msg = res.Error
			} else if m := strings.TrimSpace(t.Message); m != "" {
				msg = m
			}
		}
	}
	return msg, nil
}

func pointInTimeTarget(p *etcdv1beta1.PointInTime) string {
	switch {
	case p.Revision > 0:
		return fmt.Sprintf("revision %d", p.Revision)
	case p.Time != nil:
		return p.Time.UTC().Format(time.RFC3339)
	}
	return "its newest revision"
}

// reconcilePointInTimeRestore runs the replay Job while a new cluster waits for its snapshot.
func (r *EtcdClusterReconciler) reconcilePointInTimeRestore(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	b := c.Spec.Bootstrap
	if b == nil || b.FromBackup == nil || b.FromBackup.PointInTime == nil || b.FromBackup.BackupName != "" ||
		s.obs.statefulSet != nil || c.Status.RestoredFrom != "" {
		return nil
	}
	desired := resources.PointInTimeJob(c, *b.FromBackup, s.obs.options)
	existing := &batchv1.Job{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: *desired.Name}, existing); err == nil {
		return nil // a Job's template is immutable: the one running is the one that counts
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	changed, err := applyIfChanged(ctx, r.objects(), &batchv1.Job{}, desired, batchv1ac.ExtractJob)
	s.applied.add(ctx, changed, "Job", *desired.Name)
	return err
}
