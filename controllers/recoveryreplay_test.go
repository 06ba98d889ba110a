package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// TestContinuousRecoveryPoint: a recovery replays the cluster's own continuous backup to the newest revision
// the agent reports (or status last recorded, with the agent down), and says why not when there is no
// coverage, another location, or a gap reaching the newest revision.
func TestContinuousRecoveryPoint(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", UID: "u1"}}
	c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true}
	own := "pvc://prod-backups/ns/prod/continuous/"
	report := func(loc string, newest int64, gaps ...[2]int64) *continuous.Report {
		r := &continuous.Report{ClusterUID: "u1", Location: loc, NewestRevision: newest, OldestRevision: 10}
		for _, g := range gaps {
			r.Gaps = append(r.Gaps, continuous.ReportGap{FromRevision: g[0], ToRevision: g[1], Reason: "compacted"})
		}
		return r
	}
	recorded := func(newest int64) *etcdv1beta1.ContinuousBackupStatus {
		return &etcdv1beta1.ContinuousBackupStatus{Location: own, OldestRevision: 10, NewestRevision: newest}
	}
	for _, tc := range []struct {
		name     string
		off      bool
		rep      *continuous.Report
		problem  string
		status   *etcdv1beta1.ContinuousBackupStatus
		want     int64
		wantWhy  string
		wantNone bool
	}{
		{name: "off: nothing, and nothing to say", off: true, rep: report(own, 500), wantNone: true},
		{name: "the newest revision reported", rep: report(own, 500), want: 500},
		{name: "a gap inside the range does not matter", rep: report(own, 500, [2]int64{200, 260}), want: 500},
		{name: "a gap reaching the newest revision", rep: report(own, 500, [2]int64{480, 500}), wantWhy: "ends in a gap (revisions 480-500: compacted)"},
		{name: "no coverage yet", rep: report(own, 0), wantWhy: "reports no coverage yet"},
		{name: "another location", rep: report("pvc://other/ns/prod/continuous/", 500), wantWhy: "not the cluster's own continuous backup " + own},
		{name: "agent down: what status last recorded", problem: "the continuous backup agent (pod prod-pitr-0) is not ready", status: recorded(480), want: 480},
		{name: "agent down, nothing recorded", problem: "the continuous backup agent (pod prod-pitr-0) is not ready",
			wantWhy: "no coverage of the continuous backup is known: the continuous backup agent (pod prod-pitr-0) is not ready"},
	} {
		c := c.DeepCopy()
		if tc.off {
			c.Spec.Backup.Continuous.Enabled = false
		}
		c.Status.ContinuousBackup = tc.status
		got, why := continuousRecoveryPoint(c, tc.rep, tc.problem)
		switch {
		case tc.wantNone:
			if got != nil || why != "" {
				t.Errorf("%s: %+v, %q; want nothing", tc.name, got, why)
			}
		case tc.wantWhy != "":
			if got != nil || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("%s: %+v, %q; want none, saying %q", tc.name, got, why, tc.wantWhy)
			}
		default:
			if want := (membership.Backup{Location: own, Revision: tc.want, Replay: true}); got == nil || *got != want || why != "" {
				t.Errorf("%s: %+v, %q; want %+v", tc.name, got, why, want)
			}
		}
	}
}

// TestReplayOutcome: the replay is done once its Job completed with the recovery's revision at its key,
// and failed (why) when its Job failed or stored something else.
func TestReplayOutcome(t *testing.T) {
	rec := membership.RestoreRecovery{ID: "restore-1", Location: "pvc://b/ns/prod/continuous/", Revision: 500, Replay: true}
	const key = "ns/prod/point-in-time/prod-u1-restore-1.db"
	job := func(t batchv1.JobConditionType, msg string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "prod-pitr-1"}, Status: batchv1.JobStatus{
			Conditions: []batchv1.JobCondition{{Type: t, Status: corev1.ConditionTrue, Message: msg}}}}
	}
	pod := func(exit int32, msg string) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.PointInTimeContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}}}}}
	}
	for _, tc := range []struct {
		name       string
		job        *batchv1.Job
		pods       []corev1.Pod
		done       bool
		failedWith string
	}{
		{"running", &batchv1.Job{}, nil, false, ""},
		{"stored the revision at the key", job(batchv1.JobComplete, ""), []corev1.Pod{pod(0, fmt.Sprintf(`{"key":%q,"revision":500}`, key))}, true, ""},
		{"complete, its pod gone", job(batchv1.JobComplete, ""), nil, true, ""},
		{"stored another revision", job(batchv1.JobComplete, ""), []corev1.Pod{pod(0, fmt.Sprintf(`{"key":%q,"revision":499}`, key))}, false,
			"stored revision 499 at " + key + ", not revision 500"},
		{"refused", job(batchv1.JobFailed, "BackoffLimitExceeded"), []corev1.Pod{pod(1, `{"error":"segment 3 does not verify"}`)}, false,
			"Job prod-pitr-1 failed: segment 3 does not verify"},
		{"failed, its pods gone", job(batchv1.JobFailed, "Job has reached the specified backoff limit"), nil, false,
			"failed: Job has reached the specified backoff limit"},
	} {
		got := replayOutcome(tc.job, tc.pods, rec, key, time.Now())
		if got.id != rec.ID || got.done != tc.done || (tc.failedWith == "") != (got.failed == "") || !strings.Contains(got.failed, tc.failedWith) {
			t.Errorf("%s: %+v; want done %v, failed with %q", tc.name, got, tc.done, tc.failedWith)
		}
	}
}

// TestFailedJobReport: a failed replay's reason is its pod's report. While the Job's failure is recent and a
// pod it counts has not reported in view (not in the cache yet, or not finished there), there is no reason
// yet; once every pod reported, is being deleted, or the wait is over, the reason is the newest report, else
// the Job's own. The Job's and the pod's updates may arrive in either order.
func TestFailedJobReport(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	failed := func(ago time.Duration) (*batchv1.Job, batchv1.JobCondition) {
		cond := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
			Message: "Job has reached the specified backoff limit", LastTransitionTime: metav1.NewTime(now.Add(-ago))}
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "prod-pitr-1"}, Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{cond}}}, cond
	}
	reported := func(msg string, finished time.Time) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: resources.PointInTimeContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg, FinishedAt: metav1.NewTime(finished)}}}}}}
	}
	pending := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	deleting := *pending.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	const refusal = "segment 3 does not verify"
	for _, tc := range []struct {
		name    string
		ago     time.Duration
		failed  int32
		pods    []corev1.Pod
		want    string
		waiting bool
	}{
		{name: "the pod's report is in view", ago: time.Second, pods: []corev1.Pod{reported(`{"error":"`+refusal+`"}`, now)}, want: refusal},
		{name: "the pod is not in view yet", ago: time.Second, waiting: true},
		{name: "the pod is in view, its report not yet", ago: time.Second, pods: []corev1.Pod{pending}, waiting: true},
		{name: "one of two failed pods reported", ago: time.Second, failed: 2, pods: []corev1.Pod{reported("first", now)}, waiting: true},
		{name: "the newest of two reports", ago: time.Second, failed: 2,
			pods: []corev1.Pod{reported("second", now.Add(-time.Second)), reported("third", now)}, want: "third"},
		{name: "the pod was deleted before it reported", ago: time.Second, pods: []corev1.Pod{deleting}, want: "Job has reached the specified backoff limit"},
		{name: "no report within the wait: the pod is gone", ago: failedReportWait, want: "Job has reached the specified backoff limit"},
		{name: "a report in view after the wait still counts", ago: time.Hour, pods: []corev1.Pod{reported(refusal, now)}, want: refusal},
	} {
		job, cond := failed(tc.ago)
		if tc.failed > 0 {
			job.Status.Failed = tc.failed
		}
		why, due := failedJobReport(job, cond, tc.pods, now)
		switch {
		case tc.waiting:
			if why != "" || !due.Equal(cond.LastTransitionTime.Add(failedReportWait)) {
				t.Errorf("%s: %q, due %v; want a wait until %v", tc.name, why, due, cond.LastTransitionTime.Add(failedReportWait))
			}
		case why != tc.want || !due.IsZero():
			t.Errorf("%s: %q, due %v; want %q", tc.name, why, due, tc.want)
		}
		if tc.waiting {
			// The recovery's replay waits too: neither done nor failed, and looks again when the wait ends.
			st := replayOutcome(job, tc.pods, membership.RestoreRecovery{ID: "r1", Replay: true}, "k", now)
			if st.done || st.failed != "" || st.reportDue.IsZero() {
				t.Errorf("%s: replay %+v; want it waiting for the report", tc.name, st)
			}
		}
	}
}

// TestReplaySource: members restore the replay's snapshot only once the Job stored it for this recovery, or
// once the template already restores it.
func TestReplaySource(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", UID: "u1"}}
	rec := membership.RestoreRecovery{ID: "restore-2", Replay: true, Revision: 500}
	for _, tc := range []struct {
		name     string
		replay   replayState
		template string
		want     bool
	}{
		{"the Job runs", replayState{id: "restore-2"}, "", false},
		{"the Job failed", replayState{id: "restore-2", failed: "x"}, "", false},
		{"an earlier recovery's replay is no evidence", replayState{id: "restore-1", done: true}, "", false},
		{"stored", replayState{id: "restore-2", done: true}, "", true},
		{"the template restores it already", replayState{}, "restore-2", true},
	} {
		src := replaySource(c, rec, tc.replay, tc.template)
		if (src != nil) != tc.want {
			t.Errorf("%s: %+v; want a source: %v", tc.name, src, tc.want)
			continue
		}
		if src != nil && (src.Key != "ns/prod/point-in-time/prod-u1-restore-2.db" || src.Recovery != "restore-2" || src.Destination.PVC.ClaimName != "prod-backups") {
			t.Errorf("%s: %+v; want the recovery's key on the cluster's destination", tc.name, src)
		}
	}
}

// TestNewFallback: a fallback is announced in the reconcile that records it, once.
func TestNewFallback(t *testing.T) {
	replay := &membership.RestoreRecovery{ID: "r1", Replay: true}
	fb := &membership.RestoreRecovery{ID: "r1", Fallback: "the replay failed"}
	for _, tc := range []struct {
		name              string
		observed, writing *membership.RestoreRecovery
		want              string
	}{
		{"the replay fails", replay, fb, "the replay failed"},
		{"a recovery starts on the full backup", nil, fb, "the replay failed"},
		{"recorded already", fb, fb, ""},
		{"no fallback", nil, replay, ""},
		{"no recovery", fb, nil, ""},
	} {
		if got := newFallback(tc.observed, tc.writing); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestKeepRecordedFallback: a fallback decided again from a cache that lags its write keeps the record the
// API server holds, whatever reason the later decision gives; a first decision stands.
func TestKeepRecordedFallback(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", UID: "u1"}}
	replay := &membership.RestoreRecovery{ID: "r1", Location: "pvc://b/ns/prod/continuous/", Revision: 500, Replay: true}
	recorded := &membership.RestoreRecovery{ID: "r1", Location: "pvc://b/ns/prod/scheduled/x-r77.db", Revision: 77, Fallback: "Job prod-pitr-1 failed: segment 3 does not verify"}
	later := &membership.RestoreRecovery{ID: "r1", Location: recorded.Location, Revision: 77, Fallback: "Job prod-pitr-1 failed: Job has reached the specified backoff limit"}
	configMap := func(rec *membership.RestoreRecovery) *corev1.ConfigMap {
		data := map[string]string{"RESTORE_RECOVERY": rec.ID, "RESTORE_RECOVERY_FROM": rec.Location, "RESTORE_RECOVERY_REVISION": fmt.Sprint(rec.Revision),
			"RESTORE_RECOVERY_FALLBACK": rec.Fallback}
		if rec.Replay {
			data["RESTORE_RECOVERY_REPLAY"] = "true"
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.ConfigMapName(c)}, Data: data}
	}
	for _, tc := range []struct {
		name string
		live *membership.RestoreRecovery
		want *membership.RestoreRecovery
	}{
		{"the first decision", replay, later},
		{"decided again from a lagging cache", recorded, recorded},
	} {
		if got := resources.RestoreRecoveryOf(configMap(tc.live).Data); *got != *tc.live {
			t.Fatalf("%s: the test's configuration reads back as %+v, not %+v", tc.name, got, tc.live)
		}
		r := &EtcdClusterReconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(configMap(tc.live)).Build()}
		cfg := &membership.Config{Restore: later}
		if err := r.keepRecordedFallback(context.Background(), c, cfg, replay); err != nil || *cfg.Restore != *tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, cfg.Restore, err, tc.want)
		}
	}
}

// TestWithFallback: Progressing keeps saying why a recovery restores the full backup, whatever it waits for.
func TestWithFallback(t *testing.T) {
	fb := membership.Decision{Config: &membership.Config{Restore: &membership.RestoreRecovery{ID: "r1", Fallback: "the replay failed"}}}
	for _, tc := range []struct {
		name, msg string
		d         membership.Decision
		want      string
	}{
		{"no recovery", "waiting", membership.Decision{}, "waiting"},
		{"no fallback", "waiting", membership.Decision{Config: &membership.Config{Restore: &membership.RestoreRecovery{ID: "r1"}}}, "waiting"},
		{"a fallback", "waiting for the snapshot server", fb,
			"waiting for the snapshot server; the recovery restores the newest full backup, not the continuous backup: the replay failed"},
		{"said already", "restoring x, not the continuous backup: the replay failed", fb, "restoring x, not the continuous backup: the replay failed"},
	} {
		if got := withFallback(tc.msg, tc.d); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

var _ = Describe("Quorum-loss recovery with continuous backup", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	// lostWithContinuousBackup makes a cluster that recovers from a backup, with a full backup of revision
	// 77 and a continuous backup whose agent reports coverage up to newest, and has it lose its majority
	// for good.
	lostWithContinuousBackup := func(newest int64) (*etcdv1beta1.EtcdCluster, string) {
		c := newCluster(watchedNS)
		c.Spec.Recovery.QuorumLoss = etcdv1beta1.QuorumLossFromBackup
		c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true}
		createAndSettle(ctx, c)

		agentSts := &appsv1.StatefulSet{}
		Eventually(func() error {
			return k8sClient.Get(ctx, key(c.Namespace, resources.ContinuousBackupName(c)), agentSts)
		}, timeout, interval).Should(Succeed())
		// The agent cannot reach the members any more, but still reports what it stored.
		agent := newFakeAgent(map[string]any{"clusterUID": string(c.UID), "location": "pvc://" + resources.BackupPVCName(c) + "/etcd-a/" + c.Name + "/continuous/",
			"capturing": false, "lastError": "context deadline exceeded", "oldestRevision": min(newest, 10), "newestRevision": newest, "gaps": []any{}})
		DeferCleanup(agent.srv.Close)
		startAgentPod(ctx, c, agentSts, agent.srv.URL)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup).NotTo(BeNil())
			g.Expect(c.Status.ContinuousBackup.NewestRevision).To(Equal(newest))
		}, timeout, interval).Should(Succeed())

		makeMemberPods(ctx, c, 3, resources.Image(c, resources.DefaultOptions()))
		for i := range 3 {
			setPodReady(ctx, c, i, true)
		}
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionTrue, ReasonQuorumHealthy))
		for i := range 3 {
			setPodReady(ctx, c, i, false)
		}
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionFalse, ReasonQuorumLost))
		// The reconciles the pods' changes started may still patch status from what they read before the
		// write below, and would take its conditions back: they finish first (status unchanged for a second).
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			before := c.ResourceVersion
			time.Sleep(time.Second)
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.ResourceVersion).To(Equal(before))
		}, timeout, interval).Should(Succeed())

		// What status held when etcd last answered (this suite runs no etcd): three voters whose claims are
		// gone, a scheduled backup of revision 77, and a majority lost long enough ago for recovery to act.
		fullKey := "etcd-a/" + c.Name + "/scheduled/" + c.Name + "-20261122T020000Z-r77.db"
		Eventually(func() error {
			Expect(get(ctx, c)).To(Succeed())
			c.Status.Members = []etcdv1beta1.MemberStatus{
				{Name: resources.MemberName(c, 0), ID: "a1"}, {Name: resources.MemberName(c, 1), ID: "a2"}, {Name: resources.MemberName(c, 2), ID: "a3"}}
			at := metav1.NewTime(time.Now().Add(-2 * time.Hour))
			c.Status.LastBackupTime, c.Status.LastBackupLocation = &at, "pvc://"+resources.BackupPVCName(c)+"/"+fullKey
			apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable).LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
			return k8sClient.Status().Update(ctx, c)
		}, timeout, interval).Should(Succeed())
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.SetAnnotations(map[string]string{"test/poke": "1"}) })).To(Succeed())
		return c, fullKey
	}
	// recorded is the recovery the members' configuration records.
	recorded := func(c *etcdv1beta1.EtcdCluster) func(g Gomega) *membership.RestoreRecovery {
		return func(g Gomega) *membership.RestoreRecovery {
			cm := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ConfigMapName(c)), cm)).To(Succeed())
			rec := resources.RestoreRecoveryOf(cm.Data)
			g.Expect(rec).NotTo(BeNil())
			return rec
		}
	}
	replayJob := func(c *etcdv1beta1.EtcdCluster, id string) *batchv1.Job {
		job := &batchv1.Job{}
		Eventually(func() error {
			return k8sClient.Get(ctx, key(c.Namespace, resources.PointInTimeRecoveryJobName(c, id)), job)
		}, timeout, interval).Should(Succeed())
		return job
	}
	templateRestore := func(c *etcdv1beta1.EtcdCluster) func(g Gomega) []string {
		return func(g Gomega) []string {
			sts := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
			for _, ic := range sts.Spec.Template.Spec.InitContainers {
				if ic.Name == resources.RestoreContainerName {
					return ic.Args
				}
			}
			return nil
		}
	}
	noMemberRestarts := func(c *etcdv1beta1.EtcdCluster) {
		Consistently(func(g Gomega) {
			g.Expect(templateRestore(c)(g)).To(BeNil(), "the template restores nothing before the snapshot is stored")
			for i := range 3 {
				pod := &corev1.Pod{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
				g.Expect(pod.DeletionTimestamp).To(BeNil())
			}
		}, 2*time.Second, interval).Should(Succeed())
	}

	It("replays the continuous backup to its newest revision, then restores every member from the replay's snapshot", func() {
		c, _ := lostWithContinuousBackup(500)
		var rec *membership.RestoreRecovery
		Eventually(func(g Gomega) {
			rec = recorded(c)(g)
			g.Expect(*rec).To(And(HaveField("Replay", true), HaveField("Revision", BeEquivalentTo(500)),
				HaveField("Location", "pvc://"+resources.BackupPVCName(c)+"/etcd-a/"+c.Name+"/continuous/"), HaveField("Fallback", "")))
		}, timeout, interval).Should(Succeed())
		job := replayJob(c, rec.ID)
		d := resources.BackupDestination(c, nil)
		outKey := resources.PointInTimeRecoveryKey(c, d, rec.ID)
		Expect(job.Labels).To(HaveKeyWithValue(resources.LabelRecovery, rec.ID))
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("pitr", "--prefix=etcd-a/"+c.Name+"/continuous/",
			"--revision=500", "--cluster-uid="+string(c.UID), "--out-key="+outKey, "--pvc-claim="+resources.BackupPVCName(c)))
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(And(statusIs(metav1.ConditionTrue, ReasonRecovering),
			HaveField("Message", ContainSubstring("replaying the continuous backup at pvc://"+resources.BackupPVCName(c)+"/etcd-a/"+c.Name+"/continuous/ to revision 500")),
			HaveField("Message", ContainSubstring("no member restarts before it is stored and verified"))))
		noMemberRestarts(c)

		finishJobAs(ctx, job, resources.PointInTimeContainerName, true, fmt.Sprintf(`{"key": %q, "revision": 500}`, outKey))
		Eventually(templateRestore(c), timeout, interval).Should(ContainElements("restore", "--key="+outKey, resources.RestoreRecoveryFlag+rec.ID))
		// The members restart onto it, one per step (envtest runs no StatefulSet controller: the pod stays gone).
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, 0)), &corev1.Pod{}))
		}, timeout, interval).Should(BeTrue(), "member 0 restarts to restore")
		Expect(recorded(c)(Default)).To(HaveValue(Equal(*rec)))
		Expect(eventsWithReason(ctx, c, ReasonRecoveryFallback)).To(BeEmpty())
		server := &appsv1.StatefulSet{}
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.SnapshotServerName(c)), server) }, timeout, interval).Should(Succeed())
		Expect(server.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--key=" + outKey))
	})

	It("falls back to the newest full backup when the replay fails, and says why", func() {
		c, fullKey := lostWithContinuousBackup(500)
		var rec *membership.RestoreRecovery
		Eventually(func(g Gomega) { rec = recorded(c)(g); g.Expect(rec.Replay).To(BeTrue()) }, timeout, interval).Should(Succeed())
		refusal := "segment 3 of chain 00000000000000000400-ab12cd34 does not verify"
		finishJobAs(ctx, replayJob(c, rec.ID), resources.PointInTimeContainerName, false, fmt.Sprintf(`{"error": %q}`, refusal))

		Eventually(func(g Gomega) {
			fb := recorded(c)(g)
			g.Expect(*fb).To(And(HaveField("ID", rec.ID), HaveField("Replay", false), HaveField("Revision", BeEquivalentTo(77)),
				HaveField("Location", "pvc://"+resources.BackupPVCName(c)+"/"+fullKey), HaveField("Fallback", ContainSubstring(refusal))))
		}, timeout, interval).Should(Succeed())
		Eventually(templateRestore(c), timeout, interval).Should(ContainElements("--key="+fullKey, resources.RestoreRecoveryFlag+rec.ID))
		Eventually(func(g Gomega) {
			events, err := eventsWithReason(ctx, c, ReasonRecoveryFallback)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events).To(ContainElement(HaveField("Note", And(ContainSubstring("not the continuous backup"), ContainSubstring(refusal)))))
		}, timeout, interval).Should(Succeed())
		// The members wait for the snapshot server meanwhile (envtest runs none): Progressing still says why.
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(
			HaveField("Message", ContainSubstring("not the continuous backup: replaying the continuous backup")))
	})

	It("waits for the replay pod's report of why when the Job's failure is seen first, then falls back saying why", func() {
		c, fullKey := lostWithContinuousBackup(500)
		var rec *membership.RestoreRecovery
		Eventually(func(g Gomega) { rec = recorded(c)(g); g.Expect(rec.Replay).To(BeTrue()) }, timeout, interval).Should(Succeed())
		job := replayJob(c, rec.ID)
		// The Job's failure arrives before anything of its pod: the order the two watches may deliver them in.
		now := metav1.Now()
		job.Status.StartTime, job.Status.Failed = &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}
		Expect(k8sClient.Status().Update(ctx, job)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(recorded(c)(g).Replay).To(BeTrue(), "no fallback before the pod reported why the replay failed")
		}, 2*time.Second, interval).Should(Succeed())

		// Then the pod the Job counted, with its report (as finishJobAs writes it; the Job's status stays).
		refusal := "segment 5 of chain 00000000000000000400-ab12cd34 does not verify"
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-run", Namespace: job.Namespace,
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name, resources.LabelManagedBy: resources.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: job.Spec.Template.Spec}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		pod.Status.Phase = corev1.PodFailed
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.PointInTimeContainerName, Image: "operator",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: fmt.Sprintf(`{"error": %q}`, refusal), StartedAt: now, FinishedAt: now}}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			fb := recorded(c)(g)
			g.Expect(*fb).To(And(HaveField("ID", rec.ID), HaveField("Replay", false), HaveField("Revision", BeEquivalentTo(77)),
				HaveField("Location", "pvc://"+resources.BackupPVCName(c)+"/"+fullKey), HaveField("Fallback", ContainSubstring(refusal))))
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			events, err := eventsWithReason(ctx, c, ReasonRecoveryFallback)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events).To(ContainElement(HaveField("Note", ContainSubstring(refusal))))
		}, timeout, interval).Should(Succeed())
		events, err := eventsWithReason(ctx, c, ReasonRecoveryFallback)
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(HaveLen(1), "the fallback is decided, and announced, once")
		Expect(events[0].Note).NotTo(ContainSubstring("backoff limit"))
	})

	It("restores the newest full backup, saying why, when the agent reports no coverage", func() {
		c, fullKey := lostWithContinuousBackup(0)
		Eventually(func(g Gomega) {
			rec := recorded(c)(g)
			g.Expect(*rec).To(And(HaveField("Replay", false), HaveField("Revision", BeEquivalentTo(77)),
				HaveField("Location", "pvc://"+resources.BackupPVCName(c)+"/"+fullKey), HaveField("Fallback", ContainSubstring("reports no coverage yet"))))
		}, timeout, interval).Should(Succeed())
		Eventually(templateRestore(c), timeout, interval).Should(ContainElement("--key=" + fullKey))
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(
			HaveField("Message", ContainSubstring("the newest full backup, not the continuous backup: the continuous backup agent reports no coverage yet")))
		Eventually(func(g Gomega) {
			g.Expect(eventsWithReason(ctx, c, ReasonRecoveryFallback)).To(ContainElement(HaveField("Note", ContainSubstring("reports no coverage yet"))))
		}, timeout, interval).Should(Succeed())
		jobs := &batchv1.JobList{}
		Expect(k8sClient.List(ctx, jobs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelInstance: c.Name,
			resources.LabelComponent: resources.ComponentPointInTime})).To(Succeed())
		Expect(jobs.Items).To(BeEmpty(), "nothing to replay")
	})
})
