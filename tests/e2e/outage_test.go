//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Safety under outages, restores and paused changes: every member down for longer than --heal-after and
// back one by one; a cluster deleted and recreated from a backup while the old claims are still there; a
// learner left unpromoted while clients go through the client Service.
var _ = Describe("Safety under outages, restores over old volumes and unpromoted learners", Label("safety"), func() {
	It("replaces no member after every member was down for longer than --heal-after, as they come back one by one", Serial, func() {
		const healAfter = 30 * time.Second
		rollOperatorBackAtCleanup()
		restartOperatorWithFlag("heal-after", healAfter.String())

		_, c, w, s, before := startSafetyScenario("outage")
		putGet(c, "/e2e/before-outage", "kept")
		ids := before.ids
		claims := before.claims
		pods := before.pods
		// While no member answers, only the pods and claims can be compared; etcd's member list once a
		// member is back.
		unchangedObjects := func(g Gomega) {
			expectSameClaims(g, c, claims)
			expectSamePods(g, c, pods)
		}
		unchanged := func(g Gomega) {
			expectSameMembers(g, c, ids, "")
			unchangedObjects(g)
		}

		members := fw.MemberPods(c)
		cut := map[int]bool{}
		reconnect := func(i int) {
			if cut[i] {
				restoreNetwork(&members[i])
				delete(cut, i)
			}
		}
		DeferCleanup(func() {
			for i := range members {
				reconnect(i)
			}
		})
		start := time.Now()
		By("cutting every member off the network")
		for i := range members {
			cutNetwork(&members[i])
			cut[i] = true
		}
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			avail := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)
			g.Expect(avail).NotTo(BeNil())
			g.Expect(avail.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeTrue())
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("quorum loss reported", time.Since(start))
		By("keeping every member down for longer than --heal-after: nothing is removed, wiped or restarted")
		Consistently(unchangedObjects).WithTimeout(healAfter + 10*time.Second).WithPolling(2 * time.Second).Should(Succeed())

		By("bringing the members back one by one")
		reconnect(0)
		Consistently(unchangedObjects).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		reconnect(1)
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(fw.GetCluster(c).Status.Conditions, etcdv1beta1.ConditionAvailable)
		}).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(BeTrue())
		framework.ReportDuration("quorum back with two of three members", time.Since(start))
		// The last member stays down a while after quorum returns, but not for --heal-after: its heal clock
		// starts when quorum returned, not when the outage began.
		Consistently(unchanged).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		reconnect(2)
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		expectAgreement(c, 3)
		framework.ReportDuration("all members back after the outage", time.Since(start))
		Consistently(unchanged).WithTimeout(healAfter).WithPolling(2 * time.Second).Should(Succeed())
		expectKey(c, "/e2e/before-outage", "kept")

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("recovers from the survivor when two of three members lose their data, keeping every write it held", func() {
		ns, c := startRecoveringCluster("recover", "recover", etcdv1beta1.QuorumLossFromSurvivor)
		ids := memberIDsByName(c, 3)
		survivor, lost := c.Name+"-0", []string{c.Name + "-1", c.Name + "-2"}
		// The evidence recovery rests on: status records which claim holds each member's data.
		expectClaimsRecorded(c, 3)

		By("writing, then reading the last write through each member: every member holds every acknowledged write")
		before := fw.StartWriter(c, "/e2e/recover-before")
		before.WaitProgress(50, time.Minute)
		before.Stop()
		for _, pod := range memberNames(c, 3) {
			// A linearizable read on a member returns once the member has applied every committed write.
			_, err := etcdctl(c, pod, "--endpoints="+localURL(c), "get", "/e2e/recover-before/", "--prefix", "--keys-only", "--limit=1")
			Expect(err).NotTo(HaveOccurred(), pod)
		}

		By("deleting two members' claims and pods at once")
		start := time.Now()
		deletePodsAndClaims(ns, lost)
		Eventually(func(g Gomega) {
			avail := meta.FindStatusCondition(fw.GetCluster(c).Status.Conditions, etcdv1beta1.ConditionAvailable)
			g.Expect(avail).NotTo(BeNil())
			g.Expect(avail.Reason).To(Equal("QuorumLost"))
			g.Expect(avail.Message).To(ContainSubstring("answering: " + survivor))
		}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		framework.ReportDuration("quorum loss reported", time.Since(start))
		// Writes from now on are acknowledged only once the cluster is back.
		after := fw.StartWriter(c, "/e2e/recover-after")

		By("the operator restarting the survivor alone, then the others rejoining empty")
		framework.ReportDuration("Available again (FromSurvivor, after: 30s)", fw.WaitAvailable(c, 5*time.Minute))
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		framework.ReportDuration("3 voting members again", time.Since(start))
		now := memberIDsByName(c, 3)
		Expect(now[survivor]).To(Equal(ids[survivor]), "the survivor keeps its member ID")
		for _, name := range lost {
			Expect(now[name]).NotTo(Equal(ids[name]), "%s rejoined as a new member", name)
		}
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-config"}, cm)).To(Succeed())
		Expect(cm.Data).NotTo(HaveKey("ETCD_FORCE_NEW_CLUSTER"), "--force-new-cluster is out of the configuration")
		Expect(cm.Data).NotTo(HaveKey("FORCE_NEW_CLUSTER_MEMBER"), "the forced start's instruction is out of the configuration")
		expectAgreement(c, 3)
		before.Verify(c)
		// The writer is acknowledged only since the cluster came back: enough writes on the recovered cluster
		// for Verify's floor (more than 20), however late the recovery came.
		after.WaitProgress(50, time.Minute)
		after.StopAndVerify(c)
		events, err := fw.Kubectl("get", "events", "-n", ns, "--field-selector", "reason=QuorumRecovery", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(events)).NotTo(BeEmpty(), "the recovery step is an event")
	})

	It("recovers from the newest backup when two of three members lose their data, keeping the survivor's data aside", func() {
		ns, c := startRecoveringCluster("recover-backup", "rb", etcdv1beta1.QuorumLossFromBackup)
		expectClaimsRecorded(c, 3)
		ids := memberIDsByName(c, 3)
		oldCluster := clusterID(c)
		inBackup, _ := writeKeys(c, "/e2e/in-backup", 300)

		By("taking an on-demand backup, then writing past it")
		b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "newest"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: c.Name}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		waitBackupSucceeded(b)
		putGet(c, "/e2e/after-backup", "lost-with-the-majority")

		By("deleting two members' claims and pods at once")
		start := time.Now()
		lost := []string{c.Name + "-1", c.Name + "-2"}
		deletePodsAndClaims(ns, lost)
		Eventually(func(g Gomega) {
			avail := meta.FindStatusCondition(fw.GetCluster(c).Status.Conditions, etcdv1beta1.ConditionAvailable)
			g.Expect(avail).NotTo(BeNil())
			g.Expect(avail.Reason).To(Equal("QuorumLost"))
		}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		framework.ReportDuration("quorum loss reported", time.Since(start))

		By("the operator restoring every member from the backup")
		// The survivor's restore step reports where it moved the lost cluster's data (its pod is rolled
		// off the restore step soon after the recovery, so it is read while the recovery runs).
		movedAside := ""
		Eventually(func(g Gomega) {
			if p := podNamed(ns, c.Name+"-0"); p != nil && movedAside == "" {
				for _, cs := range p.Status.InitContainerStatuses {
					if t := cs.State.Terminated; cs.Name == "restore" && t != nil && strings.Contains(t.Message, `"movedAside"`) {
						movedAside = t.Message
					}
				}
			}
			rec := fw.GetCluster(c).Status.LastRecovery
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.Strategy).To(Equal(etcdv1beta1.QuorumLossFromBackup))
			g.Expect(rec.Source).To(Equal(b.Status.Location))
			g.Expect(rec.Revision).To(Equal(b.Status.Revision))
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("restored from the backup (FromBackup, after: 30s)", time.Since(start))
		Expect(movedAside).To(ContainSubstring(`"movedAside":"/var/lib/etcd/lost-before-restore-`), "the survivor's data of the lost cluster is kept on its volume")
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		framework.ReportDuration("Available with 3 voting members (FromBackup)", time.Since(start))
		now := memberIDsByName(c, 3)
		for name, id := range ids {
			Expect(now[name]).NotTo(Equal(id), "%s is a member of the restored cluster, not of the lost one", name)
		}
		Expect(clusterID(c)).NotTo(Equal(oldCluster), "the restored cluster has a cluster ID of its own")
		expectKeys(c, "/e2e/in-backup", inBackup)
		out, err := etcdctl(c, c.Name+"-0", "--endpoints="+localURL(c), "get", "/e2e/after-backup", "--print-value-only")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(BeEmpty(), "a write after the backup's revision came back")
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-config"}, cm)).To(Succeed())
		Expect(cm.Data).NotTo(HaveKey("RESTORE_RECOVERY"), "the recovery's record is out of the configuration")
		Expect(cm.Data["ETCD_INITIAL_CLUSTER_STATE"]).To(Equal("existing"))
		events, err := fw.Kubectl("get", "events", "-n", ns, "--field-selector", "reason=QuorumRecovered", "-o", "jsonpath={.items[*].message}")
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(ContainSubstring("restored from "+b.Status.Location), "the end of the recovery is an event")

		By("the survivor's data of the lost cluster is kept on its volume, and the members roll off the restore step")
		w := fw.StartWriter(c, "/e2e/recover-backup")
		expectRolledOffRestore(c, 3)
		framework.ReportDuration("recovered members rolled off the restore", time.Since(start))
		Expect(fw.GetCluster(c).Status.Members).To(HaveLen(3))
		Expect(memberIDsByName(c, 3)).To(Equal(now), "rolling off the restore step replaced no member")
		expectKeys(c, "/e2e/in-backup", inBackup)
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
	})

	It("refuses to start a cluster recreated from a backup over the old cluster's claims, then restores onto new ones", func() {
		ns := fw.NewNamespace("phoenix")
		c := fw.NewCluster(ns, "phoenix", etcdVersion, 3)
		c.Spec.BackupSchedule = ""
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		putGet(c, "/e2e/in-backup", "restored")

		By("taking an on-demand backup, then writing past it")
		b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-delete"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: c.Name}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		waitBackupSucceeded(b)
		Expect(b.Status.Destination).NotTo(BeNil())
		Expect(b.Status.Destination.PVC).NotTo(BeNil(), "the cluster's default destination is its backup claim")
		putGet(c, "/e2e/after-backup", "only-in-the-old-data")
		source := &etcdv1beta1.BackupSource{PVC: b.Status.Destination.PVC, Key: b.Status.Key}

		By("deleting the cluster; its member claims are retained")
		claims := claimUIDs(c, 3)
		Expect(k8s.Delete(ctx, c)).To(Succeed())
		fw.ExpectGone(c, 2*time.Minute)
		Eventually(func() []corev1.Pod { return fw.MemberPods(c) }).WithTimeout(2 * time.Minute).Should(BeEmpty())

		By("recreating it under the same name from the backup")
		start := time.Now()
		again := fw.NewCluster(ns, "phoenix", etcdVersion, 3)
		again.Spec.BackupSchedule = ""
		again.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: source}
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(again)
			deg := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)
			g.Expect(deg).NotTo(BeNil())
			g.Expect(deg.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(deg.Reason).To(Equal("RestoreFailed"))
			g.Expect(deg.Message).To(ContainSubstring("another cluster's member"))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("restore over the old claims refused", time.Since(start))
		Consistently(func(g Gomega) {
			cur := fw.GetCluster(again)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeFalse())
			g.Expect(cur.Status.RestoredFrom).To(BeEmpty())
			for _, p := range fw.MemberPods(again) {
				g.Expect(framework.PodReady(&p)).To(BeFalse(), "pod %s serves the old data", p.Name)
			}
			expectSameClaims(g, again, claims) // refused, and nothing of the old data deleted
		}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("deleting the cluster and the old claims, then recreating it: the restore happens on every member")
		Expect(k8s.Delete(ctx, again)).To(Succeed())
		fw.ExpectGone(again, 2*time.Minute)
		Eventually(func() []corev1.Pod { return fw.MemberPods(again) }).WithTimeout(2 * time.Minute).Should(BeEmpty())
		for name := range claims {
			_, err := fw.Kubectl("delete", "pvc", "-n", ns, name, "--wait=true")
			Expect(err).NotTo(HaveOccurred())
		}
		start = time.Now()
		third := fw.NewCluster(ns, "phoenix", etcdVersion, 3)
		third.Spec.BackupSchedule = ""
		third.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: source}
		Expect(k8s.Create(ctx, third)).To(Succeed())
		framework.ReportDuration("restored cluster Available", fw.WaitAvailable(third, 4*time.Minute))
		Eventually(func() string { return fw.GetCluster(third).Status.RestoredFrom }).
			WithTimeout(time.Minute).Should(Equal("pvc://" + source.PVC.ClaimName + "/" + source.Key))
		expectKey(third, "/e2e/in-backup", "restored")
		out, err := etcdctl(third, third.Name+"-0", "--endpoints="+localURL(third), "get", "/e2e/after-backup", "--print-value-only")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(BeEmpty(), "a write after the backup came back")

		By("rolling the members onto a template without the restore, one at a time")
		w := fw.StartWriter(third, "/e2e/phoenix")
		expectRolledOffRestore(third, 3)
		framework.ReportDuration("restored members rolled off the restore", time.Since(start))
		expectKey(third, "/e2e/in-backup", "restored")
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(third)
	})

	It("keeps a started learner out of the client Service and the disruption budget while it is not promoted", Serial, func() {
		Expect(failpointImage).NotTo(BeEmpty(), "E2E_FAILPOINT_IMAGE: the failpoint build of the operator image (make test-e2e builds it)")
		rollOperatorBackAtCleanup()

		ns, c, w, s, _ := startSafetyScenario("learner")
		putGet(c, "/e2e/through-the-service", "voters-only")

		// The operator adds the learner (its pod already waits in its member gate: the pods of new members
		// start ahead of their joins) and crashes right after that; its successor waits for the crashed
		// one's leader lease to expire: time enough to pause the cluster before anything promotes the learner.
		armOperator("learner", map[string]int{failpoint.AfterMembershipStep: 1})
		s.expectChange(fw.GetCluster(c).Generation+1, "replicas 5", func(t safetyTruth) bool {
			return t.voters() == 5 && t.healthyVoters() == 5 && t.readyPods() == 5
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		learner := c.Name + "-3"
		Eventually(func(g Gomega) {
			members, err := memberList(c, c.Name+"-0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(slices.ContainsFunc(members, func(m etcdMember) bool {
				return m.IsLearner && len(m.PeerURLs) > 0 && strings.Contains(m.PeerURLs[0], "//"+learner+".")
			})).To(BeTrue(), "the learner is added")
		}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = true })
		By("waiting for the learner to start and catch up while the cluster is paused")
		Eventually(func(g Gomega) {
			members, err := memberList(c, c.Name+"-0")
			g.Expect(err).NotTo(HaveOccurred())
			i := slices.IndexFunc(members, func(m etcdMember) bool { return m.Name == learner })
			g.Expect(i).To(BeNumerically(">=", 0), "the learner has started")
			g.Expect(members[i].IsLearner).To(BeTrue(), "promoted although the cluster is paused")
			g.Expect(members[i].ClientURLs).NotTo(BeEmpty())
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		pod := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: learner}, pod)).To(Succeed())
		Expect(pod.Status.PodIP).NotTo(BeEmpty())

		By("checking that clients through the client Service reach voters only, and the budget counts voters only")
		connections, failures := 0, []string{}
		Consistently(func(g Gomega) {
			members, err := memberList(c, c.Name+"-0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(slices.ContainsFunc(members, func(m etcdMember) bool { return m.Name == learner && m.IsLearner })).To(BeTrue())
			cur := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: learner}, cur)).To(Succeed())
			g.Expect(framework.PodReady(cur)).To(BeFalse(), "the learner's pod is Ready")
			g.Expect(readyEndpointIPs(g, c)).NotTo(ContainElement(pod.Status.PodIP), "the client Service routes to the learner")
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, pdb)).To(Succeed())
			g.Expect(pdb.Status.CurrentHealthy).To(BeEquivalentTo(3), "the budget counts the learner")
			// A fresh connection each time: the Service balances connections, not requests.
			for range 4 {
				cli := fw.ClusterClient(c)
				_, err := cli.Get(ctx, "/e2e/through-the-service")
				_ = cli.Close()
				connections++
				if err != nil {
					failures = append(failures, err.Error())
				}
			}
		}).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("%d connections through the client Service while a learner ran\n", connections)
		Expect(connections).To(BeNumerically(">=", 40))
		Expect(failures).To(BeEmpty(), "requests through the client Service failed")

		By("resuming: the learner is promoted and the scale-up to five voters goes on")
		start := time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = false })
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 5), 3*time.Minute)
		expectAgreement(c, 5)
		framework.ReportDuration("learner promoted after the pause", time.Since(start))
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})
})

// readyEndpointIPs are the addresses the client Service sends clients to.
func readyEndpointIPs(g Gomega, c *etcdv1beta1.EtcdCluster) []string {
	list := &discoveryv1.EndpointSliceList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(c.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: c.Name + "-client"})).To(Succeed())
	var ips []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ips = append(ips, e.Addresses...)
			}
		}
	}
	g.Expect(ips).NotTo(BeEmpty(), "the client Service has no ready endpoint")
	return ips
}

// expectClaimsRecorded waits until status records, for each of the n members, the claim holding its data:
// the evidence quorum-loss recovery rests on.
func expectClaimsRecorded(c *etcdv1beta1.EtcdCluster, n int) {
	EventuallyWithOffset(1, func(g Gomega) {
		members := fw.GetCluster(c).Status.Members
		g.Expect(members).To(HaveLen(n))
		for _, m := range members {
			g.Expect(m.VolumeClaimUID).NotTo(BeEmpty(), m.Name)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// deletePodsAndClaims makes the pods lose their data for sure (framework.DeletePodsAndClaims).
func deletePodsAndClaims(ns string, pods []string) {
	ExpectWithOffset(1, framework.DeletePodsAndClaims(ctx, k8s, ns, pods, 250*time.Millisecond, 2*time.Minute, GinkgoWriter.Printf)).To(Succeed())
}

// expectRolledOffRestore waits until none of the n member pods runs a restore step any more (the members
// are rolled off it one at a time once the restore is done), then for n healthy voting members.
func expectRolledOffRestore(c *etcdv1beta1.EtcdCluster, n int) {
	EventuallyWithOffset(1, func(g Gomega) {
		pods := fw.MemberPods(c)
		g.Expect(pods).To(HaveLen(n))
		for _, p := range pods {
			for _, ic := range p.Spec.InitContainers {
				g.Expect(ic.Name).NotTo(Equal("restore"), "pod %s still restores", p.Name)
			}
		}
	}).WithTimeout(5 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	fw.WaitAvailable(c, 5*time.Minute)
	expectVotingMembers(c, memberNames(c, n), 2*time.Minute)
}

// startRecoveringCluster creates an Available 3-member cluster, without scheduled backups, that recovers
// from quorum loss by strategy after the shortest window (30 s), in a namespace of its own.
func startRecoveringCluster(nsPrefix, name string, strategy etcdv1beta1.QuorumLossRecovery) (string, *etcdv1beta1.EtcdCluster) {
	ns := fw.NewNamespace(nsPrefix)
	c := fw.NewCluster(ns, name, etcdVersion, 3)
	c.Spec.BackupSchedule = ""
	c.Spec.Recovery = etcdv1beta1.RecoverySpec{QuorumLoss: strategy, After: &metav1.Duration{Duration: 30 * time.Second}}
	ExpectWithOffset(1, k8s.Create(ctx, c)).To(Succeed())
	fw.WaitAvailable(c, 5*time.Minute)
	return ns, c
}
