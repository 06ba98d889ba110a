//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/framework"
)

var _ = Describe("Continuous backup and point-in-time restore", Label("backup"), func() {
	It("undoes a mistaken delete of a prefix: a new cluster restored to the revision before it holds exactly the data of that revision", func() {
		ns := fw.NewNamespace("pitr")
		// One member is enough to capture from; the restored cluster has three, each restoring the replay.
		src := fw.NewCluster(ns, "source", etcdVersion, 1)
		src.Spec.BackupSchedule = ""
		src.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true, SegmentInterval: &metav1.Duration{Duration: time.Second}}
		Expect(k8s.Create(ctx, src)).To(Succeed())
		fw.WaitAvailable(src, 3*time.Minute)

		By("waiting for the agent to capture")
		start := time.Now()
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(src)
			cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionContinuousBackup)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
			g.Expect(cur.Status.ContinuousBackup).NotTo(BeNil())
			g.Expect(cur.Status.ContinuousBackup.Location).To(Equal("pvc://source-backups/" + ns + "/source/continuous/"))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("continuous backup agent capturing", time.Since(start))

		By("writing under a writer while sampling the recovery point from the agent")
		agent := agentStatusURL(src)
		samples := sampleRecoveryPoint(agent)
		cpuBefore, _ := agentProcess(agent)
		writing := time.Now()
		w := fw.StartWriter(src, "pitr-writer")
		want, _ := writeKeys(src, "/e2e/pitr", 2000)
		w.WaitProgress(200, 2*time.Minute)

		By("deleting the prefix by mistake")
		cli := fw.ClusterClient(src)
		defer func() { _ = cli.Close() }()
		del, err := cli.Delete(ctx, "/e2e/pitr/", clientv3.WithPrefix())
		Expect(err).NotTo(HaveOccurred())
		Expect(del.Deleted).To(BeEquivalentTo(len(want)))
		before := del.Header.Revision - 1
		_, err = cli.Put(ctx, "/e2e/pitr/after-the-delete", "must not come back")
		Expect(err).NotTo(HaveOccurred())
		w.WaitProgress(100, time.Minute)
		Eventually(func(g Gomega) {
			g.Expect(fw.GetCluster(src).Status.ContinuousBackup.NewestRevision).To(BeNumerically(">", del.Header.Revision))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		samples.stop()
		cpuAfter, rss := agentProcess(agent)
		AddReportEntry("agent under the writer", fmt.Sprintf("%.0f millicores over %s, resident memory %.0f MiB",
			1000*(cpuAfter-cpuBefore)/time.Since(writing).Seconds(), time.Since(writing).Round(time.Second), rss/(1<<20)))
		w.StopAndVerify(src)
		p50, p99 := samples.percentiles()
		framework.ReportDuration("recovery point p50 (age of the newest captured write, 1 s segments)", p50)
		framework.ReportDuration("recovery point p99", p99)

		By("restoring a new cluster to the revision before the delete")
		start = time.Now()
		restored := fw.NewCluster(ns, "restored", etcdVersion, 3)
		restored.Spec.BackupSchedule = ""
		restored.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "source-backups"}, Key: ns + "/source/continuous/",
			PointInTime: &etcdv1beta1.PointInTime{Revision: before}}}
		Expect(k8s.Create(ctx, restored)).To(Succeed())
		framework.ReportDuration("point-in-time restored cluster Available", fw.WaitAvailable(restored, 5*time.Minute))
		GinkgoWriter.Printf("restored to revision %d in %s\n", before, time.Since(start))

		expectKeys(restored, "/e2e/pitr", want)
		rcli := fw.ClusterClient(restored)
		defer func() { _ = rcli.Close() }()
		// Exactly that revision's data: the same keys, values, create and mod revisions and versions as the
		// source at that revision, and nothing written later.
		got, err := rcli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(before))
		Expect(err).NotTo(HaveOccurred())
		then, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(before))
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Kvs).To(HaveLen(len(then.Kvs)))
		for i := range then.Kvs {
			a, b := then.Kvs[i], got.Kvs[i]
			Expect(string(b.Key)).To(Equal(string(a.Key)))
			Expect(string(b.Value)).To(Equal(string(a.Value)), string(a.Key))
			Expect([]int64{b.CreateRevision, b.ModRevision, b.Version}).To(Equal([]int64{a.CreateRevision, a.ModRevision, a.Version}), string(a.Key))
		}
		now, err := rcli.Get(ctx, "/e2e/pitr/after-the-delete")
		Expect(err).NotTo(HaveOccurred())
		Expect(now.Kvs).To(BeEmpty(), "a write after the chosen revision came back")
		// etcd's own proof: the key-value store hashes the same at that revision on both clusters.
		srcHash, err := cli.HashKV(ctx, cli.Endpoints()[0], before)
		Expect(err).NotTo(HaveOccurred())
		restoredHash, err := rcli.HashKV(ctx, rcli.Endpoints()[0], before)
		Expect(err).NotTo(HaveOccurred())
		Expect(restoredHash.CompactRevision).To(Equal(srcHash.CompactRevision))
		Expect(restoredHash.Hash).To(Equal(srcHash.Hash), "HashKV at revision %d", before)
		Expect(fw.GetCluster(restored).Status.Conditions).To(ContainElement(And(
			HaveField("Type", etcdv1beta1.ConditionAvailable), HaveField("Status", metav1.ConditionTrue))))

		By("refusing a revision the backup does not cover, starting nothing")
		refused := fw.NewCluster(ns, "refused", etcdVersion, 1)
		refused.Spec.BackupSchedule = ""
		refused.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "source-backups"}, Key: ns + "/source/continuous/",
			PointInTime: &etcdv1beta1.PointInTime{Revision: 1 << 40}}}
		Expect(k8s.Create(ctx, refused)).To(Succeed())
		Eventually(func(g Gomega) {
			cond := meta.FindStatusCondition(fw.GetCluster(refused).Status.Conditions, etcdv1beta1.ConditionProgressing)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal("RestoreFailed"), cond.Message)
			g.Expect(cond.Message).To(ContainSubstring("restorable"))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		Expect(fw.MemberPods(refused)).To(BeEmpty())
	})
})

// agentStatusURL is the continuous backup agent's report, at its pod's IP (pod IPs are routable on the node).
func agentStatusURL(c *etcdv1beta1.EtcdCluster) string {
	pod := &corev1.Pod{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ContinuousBackupName(c) + "-0"}, pod)).To(Succeed())
	return fmt.Sprintf("http://%s:%d/status", pod.Status.PodIP, resources.ContinuousBackupPort)
}

// agentProcess reads the agent's CPU seconds and resident memory from its /metrics (its process collector).
func agentProcess(statusURL string) (cpuSeconds, residentBytes float64) {
	resp, err := http.Get(strings.TrimSuffix(statusURL, "/status") + "/metrics")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	value := func(name string) float64 {
		f := families[name]
		ExpectWithOffset(2, f.GetMetric()).To(HaveLen(1), "the agent's /metrics has one %s", name)
		m := f.GetMetric()[0]
		return m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return value("process_cpu_seconds_total"), value("process_resident_memory_bytes")
}

// recoveryPoints samples the age of the newest write the agent has stored, twice a second.
type recoveryPoints struct {
	mu    sync.Mutex
	ages  []time.Duration
	done  chan struct{}
	ended sync.WaitGroup
}

func sampleRecoveryPoint(url string) *recoveryPoints {
	r := &recoveryPoints{done: make(chan struct{})}
	r.ended.Add(1)
	go func() {
		defer r.ended.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-t.C:
			}
			resp, err := http.Get(url)
			if err != nil {
				continue
			}
			var rep struct {
				NewestTime *time.Time `json:"newestTime"`
			}
			err = json.NewDecoder(resp.Body).Decode(&rep)
			_ = resp.Body.Close()
			if err == nil && rep.NewestTime != nil {
				r.mu.Lock()
				r.ages = append(r.ages, time.Since(*rep.NewestTime))
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *recoveryPoints) stop() { close(r.done); r.ended.Wait() }

func (r *recoveryPoints) percentiles() (p50, p99 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ExpectWithOffset(1, r.ages).NotTo(BeEmpty(), "the agent reported no stored write")
	s := slices.Clone(r.ages)
	slices.Sort(s)
	return s[len(s)/2], s[(len(s)*99)/100]
}
