//go:build e2e

package e2e

import (
	"context"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

var _ = Describe("Space", Label("space"), func() {
	It("recovers a cluster whose database reached its quota without a human, restarting no member", func() {
		ns := fw.NewNamespace("space")
		c := fw.NewCluster(ns, "space", etcdVersion, 3)
		// The quota follows the volume: 40% of 64Mi is a 25.6 MiB database.
		c.Spec.StorageSize = resource.MustParse("64Mi")
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		pods := podUIDs(c)
		restarts := etcdRestarts(c)

		cli := fw.ClusterClient(c)
		DeferCleanup(cli.Close)
		put := func(value string) error {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := cli.Put(pctx, "/e2e/space/overwritten", value)
			return err
		}
		By("overwriting one key with 512 KiB values until etcd raises NOSPACE")
		big := strings.Repeat("x", 512<<10)
		for i := 0; ; i++ {
			Expect(i).To(BeNumerically("<", 500), "etcd never raised NOSPACE")
			err := put(big)
			if errors.Is(err, rpctypes.ErrNoSpace) {
				break
			}
			Expect(err).NotTo(HaveOccurred())
		}
		start := time.Now()

		By("waiting for writes to succeed again, with no one but the operator acting")
		Eventually(func() error { return put("writable again") }).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("NOSPACE to writable", time.Since(start))
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(cur.Status.Alarms).To(BeEmpty())
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeFalse())
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeTrue())
			for _, m := range cur.Status.Members {
				g.Expect(m.DBSizeBytes).To(BeNumerically("<", 10<<20), "%s's database after defragmentation", m.Name)
			}
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) { expectSamePods(g, c, pods) }).Should(Succeed())
		Expect(etcdRestarts(c)).To(Equal(restarts), "an etcd container restarted")

		events := &eventsv1.EventList{}
		Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		count := map[string]int{}
		for _, e := range events.Items {
			if e.Regarding.Name == c.Name {
				count[e.Reason]++
			}
		}
		Expect(count).To(HaveKeyWithValue("Compacted", BeNumerically(">=", 1)))
		// Events of one reason form a series (one object, counted): each member's file size above shows
		// every member was defragmented.
		Expect(count).To(HaveKeyWithValue("Defragmented", BeNumerically(">=", 1)))
		Expect(count).To(HaveKeyWithValue("AlarmDisarmed", BeNumerically(">=", 1)))
	})
})

var _ = Describe("Defragmentation", Label("space"), func() {
	It("defragments members whose files are mostly free pages, one at a time, while a writer never fails", func() {
		ns := fw.NewNamespace("defrag")
		c := fw.NewCluster(ns, "defrag", etcdVersion, 3)
		c.Spec.Defragmentation.MinFreeSize = ptr.To(resource.MustParse("4Mi"))
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		pods := podUIDs(c)

		cli := fw.ClusterClient(c)
		DeferCleanup(cli.Close)
		By("overwriting one key with 16 MiB in all, then compacting, as etcd's periodic compaction would")
		big := strings.Repeat("x", 512<<10)
		var rev int64
		for range 32 {
			resp, err := cli.Put(ctx, "/e2e/defrag/overwritten", big)
			Expect(err).NotTo(HaveOccurred())
			rev = resp.Header.Revision
		}
		w := fw.StartWriter(c, "/e2e/defrag/writer")
		w.WaitProgress(20, time.Minute)
		// The history is data until it is compacted, so nothing is defragmented yet; status shows the big
		// files at the operator's next look.
		Eventually(func(g Gomega) {
			members := fw.GetCluster(c).Status.Members
			g.Expect(members).To(HaveLen(3))
			for _, m := range members {
				g.Expect(m.DBSizeBytes).To(BeNumerically(">=", 12<<20), "%s's database file", m.Name)
			}
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		_, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
		Expect(err).NotTo(HaveOccurred())

		start := time.Now()
		Eventually(func(g Gomega) {
			members := fw.GetCluster(c).Status.Members
			g.Expect(members).To(HaveLen(3))
			for _, m := range members {
				g.Expect(m.DBSizeBytes).To(BeNumerically("<", 4<<20), "%s's database file", m.Name)
			}
		}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("every member defragmented", time.Since(start))
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		_, failed := w.Counts()
		Expect(failed).To(BeZero(), "writes failed while members defragmented")
		Eventually(func(g Gomega) { expectSamePods(g, c, pods) }).Should(Succeed())
	})
})

// etcdRestarts returns each member pod's etcd container restart count.
func etcdRestarts(c *etcdv1beta1.EtcdCluster) map[string]int32 {
	out := map[string]int32{}
	for _, p := range fw.MemberPods(c) {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == "etcd" {
				out[p.Name] = st.RestartCount
			}
		}
	}
	return out
}
