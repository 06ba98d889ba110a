package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
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
	"github.com/seedops/etcd-operator/internal/resources"
)

// fakeAgent serves a continuous backup agent's report, as the agent's pod would.
type fakeAgent struct {
	mu     sync.Mutex
	report map[string]any
	srv    *httptest.Server
	// asked counts the reports served.
	asked atomic.Int64
}

func newFakeAgent(report map[string]any) *fakeAgent {
	a := &fakeAgent{report: report}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.asked.Add(1)
		a.mu.Lock()
		defer a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(a.report)
	}))
	return a
}

func (a *fakeAgent) set(k string, v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.report[k] = v
}

// startAgentPod stands in for the agent StatefulSet's pod: created, then ready (which brings a reconcile).
func startAgentPod(ctx context.Context, c *etcdv1beta1.EtcdCluster, sts *appsv1.StatefulSet, url string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sts.Name + "-0", Namespace: c.Namespace, Labels: sts.Spec.Template.Labels},
		Spec: sts.Spec.Template.Spec}
	agentURLs.Store(c.Namespace+"/"+pod.Name, url)
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = "10.0.0.9"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

var _ = Describe("Continuous backup", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("runs the agent once the cluster exists, reports what it covers, and removes it when turned off", func() {
		c := newCluster(watchedNS)
		c.Spec.BackupSchedule = "" // the default claim is created for the continuous backup alone
		c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())

		sts := &appsv1.StatefulSet{}
		Eventually(func() error {
			return k8sClient.Get(ctx, key(c.Namespace, resources.ContinuousBackupName(c)), sts)
		}, timeout, interval).Should(Succeed())
		Expect(get(ctx, c)).To(Succeed())
		Expect(sts.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)))
		Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		args := sts.Spec.Template.Spec.Containers[0].Args
		Expect(args).To(ContainElements("continuous-backup", "--cluster-uid="+string(c.UID), "--segment-interval=10s",
			"--full-snapshot-interval=24h0m0s", "--retain-for=168h0m0s", "--pvc-claim="+resources.BackupPVCName(c)))
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.BackupPVCName(c)), &corev1.PersistentVolumeClaim{})).To(Succeed())
		// Prometheus scrapes the agent's /metrics through a PodMonitor of its own.
		agentMonitor := monitoringObject(c, resources.PodMonitorGVK, resources.ContinuousBackupPodMonitorName(c))
		Eventually(func() error { return get(ctx, agentMonitor) }, timeout, interval).Should(Succeed())
		Expect(agentMonitor.GetOwnerReferences()).To(ContainElement(HaveField("UID", c.UID)))
		Expect(agentMonitor.Object["spec"]).To(HaveKeyWithValue("selector", HaveKeyWithValue("matchLabels", HaveKeyWithValue(resources.LabelComponent, resources.ComponentContinuousBackup))))
		Expect(agentMonitor.Object["spec"]).To(HaveKeyWithValue("podMetricsEndpoints", ContainElement(HaveKeyWithValue("port", "status"))))

		By("saying why there is no report while the agent's pod is missing")
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)).To(And(
				statusIs(metav1.ConditionFalse, ReasonAgentUnavailable), HaveField("Message", ContainSubstring("not running yet"))))
		}, timeout, interval).Should(Succeed())

		By("carrying the agent's report into status")
		oldest, newest := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
		agent := newFakeAgent(map[string]any{"clusterUID": string(c.UID), "location": "pvc://" + resources.BackupPVCName(c) + "/etcd-a/" + c.Name + "/continuous/",
			"capturing": true, "oldestRevision": 10, "oldestTime": oldest, "newestRevision": 500, "newestTime": newest, "gaps": []any{}})
		defer agent.srv.Close()
		pod := startAgentPod(ctx, c, sts, agent.srv.URL)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup).NotTo(BeNil())
			g.Expect(*c.Status.ContinuousBackup).To(And(
				HaveField("Location", "pvc://"+resources.BackupPVCName(c)+"/etcd-a/"+c.Name+"/continuous/"),
				HaveField("OldestRevision", BeEquivalentTo(10)), HaveField("NewestRevision", BeEquivalentTo(500)),
				HaveField("OldestTime.Time", BeTemporally("==", oldest)), HaveField("NewestTime.Time", BeTemporally("==", newest))))
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)).To(
				statusIs(metav1.ConditionTrue, ReasonCapturing))
		}, timeout, interval).Should(Succeed())

		By("reporting a gap in the covered range")
		agent.set("gaps", []map[string]any{{"fromRevision": 200, "toRevision": 260, "reason": "compacted before it was captured"}})
		touch(ctx, pod)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup.Gaps).To(ConsistOf(HaveField("FromRevision", BeEquivalentTo(200))))
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)).To(And(
				statusIs(metav1.ConditionTrue, ReasonCoverageGap), HaveField("Message", ContainSubstring("200-260"))))
		}, timeout, interval).Should(Succeed())

		By("refusing a report about another cluster")
		agent.set("clusterUID", "someone-else")
		touch(ctx, pod)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)).To(And(
				statusIs(metav1.ConditionFalse, ReasonAgentUnavailable), HaveField("Message", ContainSubstring("someone-else"))))
			g.Expect(c.Status.ContinuousBackup.OldestRevision).To(BeEquivalentTo(10), "the last report stays")
		}, timeout, interval).Should(Succeed())

		By("removing the agent, its status and its condition when turned off")
		Expect(get(ctx, c)).To(Succeed())
		patch := client.MergeFrom(c.DeepCopy())
		c.Spec.Backup.Continuous.Enabled = false
		Expect(k8sClient.Patch(ctx, c, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(c.Namespace, resources.ContinuousBackupName(c)), &appsv1.StatefulSet{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(get(ctx, monitoringObject(c, resources.PodMonitorGVK, resources.ContinuousBackupPodMonitorName(c))))).To(BeTrue())
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup).To(BeNil())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)).To(BeNil())
		}, timeout, interval).Should(Succeed())
	})

	It("asks the agent once per health interval, and again when its pod changes, writing nothing at rest", func() {
		c := newCluster(watchedNS)
		c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true}
		createAndSettle(ctx, c)
		sts := &appsv1.StatefulSet{}
		Eventually(func() error {
			return k8sClient.Get(ctx, key(c.Namespace, resources.ContinuousBackupName(c)), sts)
		}, timeout, interval).Should(Succeed())
		agent := newFakeAgent(map[string]any{"clusterUID": string(c.UID), "location": "pvc://" + resources.BackupPVCName(c) + "/etcd-a/" + c.Name + "/continuous/",
			"capturing": true, "oldestRevision": 10, "newestRevision": 500, "gaps": []any{}})
		defer agent.srv.Close()
		pod := startAgentPod(ctx, c, sts, agent.srv.URL)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup).NotTo(BeNil())
			g.Expect(c.Status.ContinuousBackup.NewestRevision).To(BeEquivalentTo(500))
		}, timeout, interval).Should(Succeed())

		// The reconciles the agent's objects brought are over once status stops changing.
		Eventually(func() bool {
			rv := c.ResourceVersion
			time.Sleep(time.Second)
			return get(ctx, c) == nil && c.ResourceVersion == rv
		}, timeout, interval).Should(BeTrue())
		asked := agent.asked.Load()
		agent.set("newestRevision", 600) // not seen before the answer is renewed
		for round := range 3 {
			writes.reset()
			before := reconciles.Load()
			// A merge patch of the annotation alone: an update would send the spec's durations back as
			// "24h0m0s" where the API server stored its default "24h", a spec change.
			patch := client.MergeFrom(c.DeepCopy())
			c.Annotations = map[string]string{"test/round": fmt.Sprint(round)}
			Expect(k8sClient.Patch(ctx, c, patch)).To(Succeed())
			Eventually(reconciles.Load, timeout, interval).Should(BeNumerically(">", before))
			Expect(writes.about(c.Name)).To(BeEmpty(), "steady-state reconcile %d wrote", round)
		}
		Expect(agent.asked.Load()).To(Equal(asked), "the health interval (30s here) has not passed: no reconcile asks the agent")
		Expect(get(ctx, c)).To(Succeed())
		Expect(c.Status.ContinuousBackup.NewestRevision).To(BeEquivalentTo(500))

		By("asking again when the agent's pod changed")
		touch(ctx, pod)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ContinuousBackup.NewestRevision).To(BeEquivalentTo(600))
		}, timeout, interval).Should(Succeed())
		Expect(agent.asked.Load()).To(Equal(asked + 1))
	})

	It("refuses intervals outside their bounds at the API server", func() {
		c := newCluster(watchedNS)
		c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true, SegmentInterval: &metav1.Duration{Duration: 10 * time.Minute}}
		Expect(k8sClient.Create(ctx, c)).To(MatchError(ContainSubstring("segmentInterval must be between 1s and 5m")))
		c = newCluster(watchedNS)
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}, Key: "etcd-a/old/continuous/",
			PointInTime: &etcdv1beta1.PointInTime{Revision: 5, Time: &metav1.Time{Time: time.Now()}}}}
		Expect(k8sClient.Create(ctx, c)).To(MatchError(ContainSubstring("pointInTime takes a revision or a time, not both")))
	})
})

var _ = Describe("Point-in-time restore", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	pointInTimeCluster := func(pit etcdv1beta1.PointInTime) *etcdv1beta1.EtcdCluster {
		c := newCluster(watchedNS)
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}, Key: "etcd-a/old/continuous/", PointInTime: &pit}}
		return c
	}
	replayJob := func(c *etcdv1beta1.EtcdCluster) *batchv1.Job {
		job := &batchv1.Job{}
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.PointInTimeJobName(c)), job) }, timeout, interval).Should(Succeed())
		return job
	}
	noStatefulSet := func(c *etcdv1beta1.EtcdCluster) {
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), &appsv1.StatefulSet{}))
		}, time.Second, interval).Should(BeTrue(), "no member may start before the snapshot exists")
	}

	It("replays the continuous backup to the revision in a Job, then restores every member from its snapshot", func() {
		c := pointInTimeCluster(etcdv1beta1.PointInTime{Revision: 4242})
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		job := replayJob(c)
		Expect(get(ctx, c)).To(Succeed())
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("pitr", "--prefix=etcd-a/old/continuous/",
			"--revision=4242", "--pvc-claim=old-backups"))
		Expect(job.Spec.Template.Spec.Containers[0].Image).To(Equal(resources.Image(c, resources.DefaultOptions())),
			"the replay runs the cluster's own etcd")
		noStatefulSet(c)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)).To(And(
				statusIs(metav1.ConditionTrue, ReasonWaitingForBackup), HaveField("Message", ContainSubstring("revision 4242"))))
		}, timeout, interval).Should(Succeed())

		finishJobAs(ctx, job, resources.PointInTimeContainerName, true, `{"revision": 4242}`)
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts) }, timeout, interval).Should(Succeed())
		d := etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}}
		Expect(sts.Spec.Template.Spec.InitContainers).To(ContainElement(And(HaveField("Name", resources.RestoreContainerName),
			HaveField("Args", ContainElements("restore", "--key="+resources.PointInTimeKey(c, d), "--pvc-claim=old-backups")))))
		// The members download the Job's snapshot from the claim's snapshot server, which serves that key.
		server := &appsv1.StatefulSet{}
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.SnapshotServerName(c)), server) }, timeout, interval).Should(Succeed())
		Expect(server.Spec.Template.Spec.Containers[0].Args).To(ContainElements("serve-snapshot", "--key="+resources.PointInTimeKey(c, d), "--pvc-claim=old-backups"))
	})

	It("starts nothing and says why when the target is outside the covered range", func() {
		c := pointInTimeCluster(etcdv1beta1.PointInTime{Revision: 999999})
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		refusal := "revision 999999 is not restorable; restorable: revisions 10-500 (2026-11-28T09:00:00Z to 2026-11-28T10:00:00Z)"
		finishJobAs(ctx, replayJob(c), resources.PointInTimeContainerName, false, fmt.Sprintf(`{"error": %q}`, refusal))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)).To(And(
				statusIs(metav1.ConditionFalse, ReasonRestoreFailed), HaveField("Message", ContainSubstring(refusal))))
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(
				statusIs(metav1.ConditionTrue, ReasonRestoreFailed))
		}, timeout, interval).Should(Succeed())
		noStatefulSet(c)
	})

	It("refuses a point in time with backupName, starting nothing", func() {
		c := newCluster(watchedNS)
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{BackupName: "nightly",
			PointInTime: &etcdv1beta1.PointInTime{}}}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(apimeta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)).To(And(
				statusIs(metav1.ConditionFalse, ReasonRestoreFailed), HaveField("Message", ContainSubstring("not backupName"))))
		}, timeout, interval).Should(Succeed())
		noStatefulSet(c)
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(c.Namespace, resources.PointInTimeJobName(c)), &batchv1.Job{}))).To(BeTrue())
	})
})

// touch changes the pod's annotations, so the operator reconciles its cluster and asks the agent again.
func touch(ctx context.Context, pod *corev1.Pod) {
	Expect(get(ctx, pod)).To(Succeed())
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["example.com/touched"] = time.Now().Format(time.RFC3339Nano)
	Expect(k8sClient.Patch(ctx, pod, patch)).To(Succeed())
}
