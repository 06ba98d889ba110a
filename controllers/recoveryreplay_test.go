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
		got := replayOutcome(tc.job, tc.pods, rec, key)
		if got.id != rec.ID || got.done != tc.done || (tc.failedWith == "") != (got.failed == "") || !strings.Contains(got.failed, tc.failedWith) {
			t.Errorf("%s: %+v; want done %v, failed with %q", tc.name, got, tc.done, tc.failedWith)
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
