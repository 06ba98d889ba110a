package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
	"github.com/seedops/etcd-operator/internal/membership"
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

// observeContinuousBackup reads the agent's report: the agent has no Kubernetes API access, so the operator
// carries what it says into status. A pod that is not ready or does not answer is the problem reported
// instead. The agent is asked over HTTP at most once per health interval (at is when; requeueAfter looks
// again when that answer is due for renewal), and again at once when its pod changed (restarted, ready
// again): a cluster at rest reconciles often, and each call could cost the whole timeout.
func (r *EtcdClusterReconciler) observeContinuousBackup(ctx context.Context, c *etcdv1beta1.EtcdCluster) (rep *continuous.Report, problem string, at time.Time) {
	cluster := client.ObjectKeyFromObject(c)
	if !continuousEnabled(c) {
		r.agentAnswers.forget(cluster)
		return nil, "", time.Time{}
	}
	pod := &corev1.Pod{}
	name := resources.ContinuousBackupName(c) + "-0"
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("the continuous backup agent (pod %s) is not running yet", name), time.Time{}
		}
		return nil, fmt.Sprintf("reading pod %s: %v", name, err), time.Time{}
	}
	if !podReady(pod) || pod.Status.PodIP == "" {
		return nil, fmt.Sprintf("the continuous backup agent (pod %s) is not ready: it has no chain stored yet, or cannot reach the cluster or the destination", name), time.Time{}
	}
	version := string(pod.UID) + "/" + pod.ResourceVersion
	if a, ok := r.agentAnswers.get(cluster); ok && a.fresh(version, r.now(), r.healthInterval()) {
		return a.report, a.problem, a.at
	}
	rep, problem = r.askAgent(ctx, c, pod)
	a := agentAnswer{pod: version, at: r.now(), report: rep, problem: problem}
	r.agentAnswers.set(cluster, a)
	return rep, problem, a.at
}

// askAgent is one GET of the agent's report.
func (r *EtcdClusterReconciler) askAgent(ctx context.Context, c *etcdv1beta1.EtcdCluster, pod *corev1.Pod) (*continuous.Report, string) {
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
	report, err := continuous.ReadReport(resp.Body)
	if err != nil {
		return nil, fmt.Sprintf("the continuous backup agent's report at %s: %v", url, err)
	}
	if report.ClusterUID != string(c.UID) {
		return nil, fmt.Sprintf("the continuous backup agent captures cluster UID %s, not this cluster's %s", report.ClusterUID, c.UID)
	}
	return report, ""
}

// agentAnswer is what a cluster's agent last answered (a report, or why there is none), from which pod
// (its UID and resource version) and when.
type agentAnswer struct {
	pod     string
	at      time.Time
	report  *continuous.Report
	problem string
}

// fresh: the answer came from the agent's pod as it is now, less than maxAge ago.
func (a agentAnswer) fresh(pod string, now time.Time, maxAge time.Duration) bool {
	return a.pod == pod && !now.Before(a.at) && now.Sub(a.at) < maxAge
}

// agentMemory remembers each cluster's last agentAnswer: the operator's memory only (a restarted operator
// asks again). The zero value is ready to use; reports in it are shared, and never modified.
type agentMemory struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]agentAnswer
}

func (m *agentMemory) get(cluster types.NamespacedName) (agentAnswer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.byCluster[cluster]
	return a, ok
}

func (m *agentMemory) set(cluster types.NamespacedName, a agentAnswer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byCluster == nil {
		m.byCluster = map[types.NamespacedName]agentAnswer{}
	}
	m.byCluster[cluster] = a
}

func (m *agentMemory) forget(cluster types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byCluster, cluster)
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
	if !rep.OldestTime.IsZero() {
		t := metav1.NewTime(rep.OldestTime.UTC().Truncate(time.Second))
		out.OldestTime = &t
	}
	if !rep.NewestTime.IsZero() {
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
// the cluster waits for (until due, when no event may end it); failed says why the restore was refused
// (nothing starts).
func (r *EtcdClusterReconciler) pointInTimeSource(ctx context.Context, c *etcdv1beta1.EtcdCluster) (src *resources.RestoreSource, wait, failed string, due time.Time, err error) {
	from := c.Spec.Bootstrap.FromBackup
	if from.BackupName != "" {
		return nil, "", "fromBackup.pointInTime restores a continuous backup: give its location as key with pvc or s3, not backupName (an EtcdBackup is one snapshot)", time.Time{}, nil
	}
	d := etcdv1beta1.BackupDestination{PVC: from.PVC, S3: from.S3}
	job := &batchv1.Job{}
	err = r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PointInTimeJobName(c)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("replaying the continuous backup at %s to %s (Job %s)", from.Key, pointInTimeTarget(from.PointInTime), resources.PointInTimeJobName(c)), "", time.Time{}, nil
	case err != nil:
		return nil, "", "", time.Time{}, err
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return &resources.RestoreSource{Destination: d, Key: resources.PointInTimeKey(c, d)}, "", "", time.Time{}, nil
		case batchv1.JobFailed:
			pods := &corev1.PodList{}
			if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
				return nil, "", "", time.Time{}, err
			}
			msg, due := failedJobReport(job, cond, pods.Items, r.now())
			if !due.IsZero() {
				return nil, fmt.Sprintf("the replay of the continuous backup at %s failed (Job %s): waiting for its pod's report of why", from.Key, job.Name), "", due, nil
			}
			return nil, "", "point-in-time restore refused, nothing started: " + msg, time.Time{}, nil
		}
	}
	return nil, fmt.Sprintf("replaying the continuous backup at %s to %s (Job %s)", from.Key, pointInTimeTarget(from.PointInTime), resources.PointInTimeJobName(c)), "", time.Time{}, nil
}

// failedReportWait bounds how long the reason of a failed point-in-time Job waits for its pods' reports,
// counted from the Job's failure: a pod deleted meanwhile never reports, and a recovery must not hang on it.
const failedReportWait = 30 * time.Second

// failedJobReport is why the point-in-time Job job failed (its Failed condition failed): the refusal its
// newest failed pod reported (the termination message), else the Job's own reason. The Job's failure can
// reach the cache before the status of the pods it counted, which says why: while a pod in view has not
// finished, or fewer failed pods are in view than the Job counts, and failedReportWait has not passed,
// there is no reason yet and due is when the wait ends (a pod's update ends it sooner). The same pods in
// view give the same reason, whatever order the Job's and the pods' updates arrived in.
func failedJobReport(job *batchv1.Job, failed batchv1.JobCondition, pods []corev1.Pod, now time.Time) (why string, due time.Time) {
	if end := failed.LastTransitionTime.Add(failedReportWait); now.Before(end) && reportsOutstanding(job, pods) {
		return "", end
	}
	msg, _ := pointInTimeResult(pods, false)
	if msg == "" {
		msg = failed.Message
	}
	if msg == "" {
		msg = "the Job failed"
	}
	return msg, time.Time{}
}

// reportsOutstanding: a pod of the failed Job job may still report why it failed. A pod being deleted
// before it finished never will: it counts as reported.
func reportsOutstanding(job *batchv1.Job, pods []corev1.Pod) bool {
	var finished int32
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodFailed, p.Status.Phase == corev1.PodSucceeded, p.DeletionTimestamp != nil:
			finished++
		default:
			return true
		}
	}
	return finished < job.Status.Failed
}

// pointInTimeResult is the termination message of the newest point-in-time container that succeeded (or
// failed) in pods: a failure's error, or a success's JSON; found is false when there is none.
func pointInTimeResult(pods []corev1.Pod, succeeded bool) (msg string, found bool) {
	newest := time.Time{}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != resources.PointInTimeContainerName || t == nil || (t.ExitCode == 0) != succeeded || t.FinishedAt.Time.Before(newest) {
				continue
			}
			newest, found, msg = t.FinishedAt.Time, true, strings.TrimSpace(t.Message)
			var res struct {
				Error string `json:"error"`
			}
			if !succeeded && json.Unmarshal([]byte(msg), &res) == nil && res.Error != "" {
				msg = res.Error
			}
		}
	}
	return msg, found
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

// continuousRecoveryPoint is the newest revision of the cluster's own continuous backup that a quorum-loss
// recovery can replay to (a Backup to replay), or why there is none ("" when continuous backup is off).
// The agent's report counts, else the coverage status last recorded: the agent's pod may be down with the
// members, and what it stored is still there (the replay verifies every byte it uses). A report of another
// location than the cluster's destination, of no coverage, or of a gap reaching the newest revision offers
// nothing to replay.
func continuousRecoveryPoint(c *etcdv1beta1.EtcdCluster, rep *continuous.Report, problem string) (*membership.Backup, string) {
	if !continuousEnabled(c) {
		return nil, ""
	}
	want := resources.Location(resources.BackupDestination(c, nil), resources.ContinuousBackupKey(c))
	var loc string
	var newest int64
	var gaps []etcdv1beta1.ContinuousBackupGap
	switch st := c.Status.ContinuousBackup; {
	case rep != nil:
		loc, newest = rep.Location, rep.NewestRevision
		for _, g := range rep.Gaps {
			gaps = append(gaps, etcdv1beta1.ContinuousBackupGap{FromRevision: g.FromRevision, ToRevision: g.ToRevision, Reason: g.Reason})
		}
	case st != nil && st.NewestRevision > 0:
		loc, newest, gaps = st.Location, st.NewestRevision, st.Gaps
	default:
		if problem == "" {
			problem = "the continuous backup agent has not reported yet"
		}
		return nil, "no coverage of the continuous backup is known: " + problem
	}
	switch {
	case loc != want:
		return nil, fmt.Sprintf("the continuous backup agent reports %s, not the cluster's own continuous backup %s", loc, want)
	case newest <= 0:
		return nil, "the continuous backup agent reports no coverage yet"
	}
	for _, g := range gaps {
		if g.ToRevision >= newest {
			return nil, fmt.Sprintf("the continuous backup ends in a gap (revisions %d-%d: %s)", g.FromRevision, g.ToRevision, g.Reason)
		}
	}
	return &membership.Backup{Location: loc, Revision: newest, Replay: true}, ""
}

// replayState is what became of the replay Job of recovery id.
type replayState struct {
	id string
	// done: the Job stored the snapshot of the recorded revision (the Job verifies it before it stores it).
	done bool
	// failed says why the replay will not deliver that snapshot.
	failed string
	// reportDue: the Job failed, and its pods' reports of why are awaited until then (failedJobReport).
	reportDue time.Time
}

// observeRecoveryReplay reads the replay Job of the recorded recovery rec, when it replays the continuous
// backup.
func (r *EtcdClusterReconciler) observeRecoveryReplay(ctx context.Context, c *etcdv1beta1.EtcdCluster, rec *membership.RestoreRecovery) (replayState, error) {
	if rec == nil || !rec.Replay {
		return replayState{}, nil
	}
	name := resources.PointInTimeRecoveryJobName(c, rec.ID)
	job := &batchv1.Job{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, job); err != nil {
		return replayState{id: rec.ID}, client.IgnoreNotFound(err)
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		return replayState{}, err
	}
	d := resources.BackupDestination(c, nil)
	return replayOutcome(job, pods.Items, *rec, resources.PointInTimeRecoveryKey(c, d, rec.ID), r.now()), nil
}

// replayOutcome judges recovery rec's replay Job by its conditions and its pods' reports. A success whose
// report names another revision or key than the recovery's is a failure: the members would restore
// something else than what the recovery records. (A success without a report in view, its pod gone, stands:
// the Job stores only a snapshot it verified, and each member's restore step verifies it again.) A failure
// waits for its pods' reports (failedJobReport): the fallback it leads to is recorded once, with the reason
// the replay gave.
func replayOutcome(job *batchv1.Job, pods []corev1.Pod, rec membership.RestoreRecovery, key string, now time.Time) replayState {
	st := replayState{id: rec.ID}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			msg, found := pointInTimeResult(pods, true)
			var res struct {
				Key      string `json:"key"`
				Revision int64  `json:"revision"`
			}
			if found && json.Unmarshal([]byte(msg), &res) == nil && (res.Revision != rec.Revision || res.Key != key) {
				st.failed = fmt.Sprintf("Job %s stored revision %d at %s, not revision %d at %s", job.Name, res.Revision, res.Key, rec.Revision, key)
				return st
			}
			st.done = true
			return st
		case batchv1.JobFailed:
			msg, due := failedJobReport(job, cond, pods, now)
			if !due.IsZero() {
				st.reportDue = due
				return st
			}
			st.failed = fmt.Sprintf("Job %s failed: %s", job.Name, msg)
			return st
		}
	}
	return st
}

// reconcileRecoveryReplay runs the Job that replays the cluster's continuous backup for the recovery the
// configuration records (after this reconcile), until it has done so or failed. The configuration holds
// the record before the Job starts: a Job the record does not name is never read.
func (r *EtcdClusterReconciler) reconcileRecoveryReplay(ctx context.Context, s *reconcileScope) error {
	c, rec := s.cluster, s.recoveryRecord()
	if rec == nil || !rec.Replay {
		return nil
	}
	name := resources.PointInTimeRecoveryJobName(c, rec.ID)
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &batchv1.Job{}); err == nil {
		return nil // a Job's template is immutable: the one running is the one that counts
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	changed, err := applyIfChanged(ctx, r.objects(), &batchv1.Job{}, resources.PointInTimeRecoveryJob(c, rec.ID, rec.Revision, s.obs.options), batchv1ac.ExtractJob)
	s.applied.add(ctx, changed, "Job", name)
	return err
}

// replaySource is the snapshot the members of recovery rec restore while it replays the continuous backup:
// the Job's, once the Job stored it (or once the template restores it: the Job may be gone since); nil
// before, so that no member restarts without it.
func replaySource(c *etcdv1beta1.EtcdCluster, rec membership.RestoreRecovery, replay replayState, templateRestores string) *resources.RestoreSource {
	if (replay.id != rec.ID || !replay.done) && templateRestores != rec.ID {
		return nil
	}
	d := resources.BackupDestination(c, nil)
	return &resources.RestoreSource{Destination: d, Key: resources.PointInTimeRecoveryKey(c, d, rec.ID), Recovery: rec.ID}
}
