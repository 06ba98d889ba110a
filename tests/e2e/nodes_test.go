//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Where the members land on a cluster of three nodes in three zones (make cluster-up NODES=3): spread, scaling
// and an upgrade across the nodes, a learner the nodes cannot place, a restore from a node-local backup claim.
// They take nothing away from the nodes, so they run beside the other e2e specs (make test-e2e runs them when
// the cluster has three nodes; make test-nodes too).
var _ = Describe("Placement on three nodes", Label("nodes", "placement"), func() {
	BeforeEach(expectThreeReadyNodes)

	It("places the members on distinct nodes and zones", func() {
		_, c, w, s, _ := startSafetyScenario("spread")
		nodes, zones := memberPlacement(c)
		Expect(nodes).To(HaveLen(3), "members by node: %v", nodes)
		Expect(zones).To(HaveLen(3), "members by zone: %v", zones)
		By("status says the cluster survives the loss of one node or one zone")
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(cur.Status.FailureTolerance).NotTo(BeNil())
			g.Expect(*cur.Status.FailureTolerance).To(Equal(etcdv1beta1.FailureTolerance{Nodes: 1, Zones: 1}))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionSpread)).To(BeTrue())
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		w.StopAndVerify(c)
		s.verify()
	})

	It("scales 3 to 5 to 3 and upgrades one member at a time across the nodes", func() {
		ns := fw.NewNamespace("nodes-scale")
		c := fw.NewCluster(ns, "nodes-scale", etcdUpgradeFrom, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		w := fw.StartWriter(c, "/e2e/nodes-scale")
		w.WaitProgress(20, time.Minute)

		start := time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		expectVotingMembers(c, memberNames(c, 5), 5*time.Minute)
		framework.ReportDuration("scale 3 to 5 on three nodes", time.Since(start))
		// Five members on three nodes and zones: the preference spreads them two, two and one.
		byNode, byZone := memberPlacement(c)
		Expect(byNode).To(HaveLen(3), "members by node: %v", byNode)
		Expect(byZone).To(HaveLen(3), "members by zone: %v", byZone)

		start = time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 3 })
		expectVotingMembers(c, memberNames(c, 3), 5*time.Minute)
		Eventually(func() []corev1.Pod { return fw.MemberPods(c) }).WithTimeout(2 * time.Minute).Should(HaveLen(3))
		framework.ReportDuration("scale 5 to 3 on three nodes", time.Since(start))

		start = time.Now()
		obs := startRolloutObserver(c)
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = etcdVersion })
		Eventually(func(g Gomega) {
			for _, p := range fw.MemberPods(c) {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository + ":v" + etcdVersion))
			}
			g.Expect(fw.GetCluster(c).Status.CurrentVersion).To(Equal(etcdVersion))
		}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		framework.ReportDuration("upgrade across three nodes", time.Since(start))
		_, maxDown, err := obs.stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(maxDown).To(BeNumerically("<=", 1), "more than one member was down at once")
		byNode, _ = memberPlacement(c)
		Expect(byNode).To(HaveLen(3), "upgraded members by node: %v", byNode)
		acked, failed := w.Counts()
		AddReportEntry("writer", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s",
			acked, failed, w.LongestGap().Round(time.Millisecond)))
		w.StopAndVerify(c)
	})

	It("reports a learner the nodes cannot place, and removes it when replicas go back", func() {
		ns := fw.NewNamespace("beyond")
		c := fw.NewCluster(ns, "beyond", etcdVersion, 3)
		// At most one member per node, required: what a user asks for who wants every member on its own machine.
		c.Spec.Pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: framework.MemberLabels(c.Name)},
			}},
		}}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		w := fw.StartWriter(c, "/e2e/beyond")
		w.WaitProgress(20, time.Minute)
		ids := memberIDsByName(c, 3)

		By("scaling to 5 with one member per node required on three nodes")
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		Eventually(func(g Gomega) {
			p := meta.FindStatusCondition(fw.GetCluster(c).Status.Conditions, etcdv1beta1.ConditionProgressing)
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.Message).To(ContainSubstring("Unschedulable"))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(fw.GetCluster(c).Status.Conditions).To(ContainElement(HaveField("Type", etcdv1beta1.ConditionAvailable)))

		By("going back to 3: the learner that never started is removed")
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 3 })
		Eventually(func(g Gomega) {
			g.Expect(memberIDsByNameG(g, c)).To(Equal(ids))
			g.Expect(fw.MemberPods(c)).To(HaveLen(3))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		fw.WaitAvailable(c, 2*time.Minute)
		w.StopAndVerify(c)
	})

	It("restores a new cluster from a backup claim with its members on three nodes", func() {
		ns := fw.NewNamespace("claim-restore")
		src := fw.NewCluster(ns, "source", etcdVersion, 3)
		src.Spec.BackupSchedule = ""
		Expect(k8s.Create(ctx, src)).To(Succeed())
		fw.WaitAvailable(src, 3*time.Minute)
		want, rev := writeKeys(src, "/e2e/claim-restore", 1000)

		By("taking an on-demand backup to the cluster's backup claim (node-local, ReadWriteOnce)")
		b := &etcdv1beta1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-move"},
			Spec:       etcdv1beta1.EtcdBackupSpec{ClusterName: src.Name},
		}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		waitBackupSucceeded(b)
		Expect(b.Status.Revision).To(BeNumerically(">=", rev))
		Expect(b.Status.Location).To(HavePrefix("pvc://source-backups/"))

		By("restoring a new 3-member cluster from it: the members spread, the claim stays on its node")
		restored := fw.NewCluster(ns, "restored", etcdVersion, 3)
		restored.Spec.BackupSchedule = ""
		restored.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{BackupName: b.Name}}
		Expect(k8s.Create(ctx, restored)).To(Succeed())
		framework.ReportDuration("cluster restored from a claim on three nodes Available", fw.WaitAvailable(restored, 5*time.Minute))
		expectKeys(restored, "/e2e/claim-restore", want)
		byNode, _ := memberPlacement(restored)
		Expect(byNode).To(HaveLen(3), "restored members by node: %v", byNode)
		Eventually(func() string { return fw.GetCluster(restored).Status.RestoredFrom }).
			WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal(b.Status.Location))
	})
})

// Node events on a cluster of three nodes in three zones (make cluster-up NODES=3; make test-nodes): a drain of
// every node in turn, a partition, a node powered off with the member's local volume on it, two nodes lost. Each
// runs under a writer (every acknowledged write is read back at the end) and the status sampler. The specs take
// whole nodes away, so they run one at a time (Serial), after every spec that runs beside others, and put every
// node back at cleanup.
var _ = Describe("Node events on three nodes", Label("nodes"), Serial, func() {
	BeforeEach(expectThreeReadyNodes)

	It("drains every node in turn: one member down at a time, no member replaced, Available after each", func() {
		_, c, w, s, before := startSafetyScenario("drain")
		nodes, _ := memberPlacement(c)
		for node := range nodes {
			DeferCleanup(func() { _, _ = fw.Kubectl("uncordon", node) })
		}
		var elections []string
		for _, node := range slices.Sorted(maps.Keys(nodes)) {
			leader, err := leaderPod(c)
			Expect(err).NotTo(HaveOccurred())
			term := raftTerm(c)
			start := time.Now()
			By(fmt.Sprintf("draining %s (member %s; leader %s)", node, nodes[node][0], leader))
			drainNode(node)
			// The member's volume is on the drained node: its pod waits there until the node is back, as it
			// would for a kernel upgrade's reboot. No member is removed meanwhile.
			Consistently(func(g Gomega) { expectSameMembers(g, c, before.ids, nodes[node][0]) }).
				WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
			out, err := fw.Kubectl("uncordon", node)
			Expect(err).NotTo(HaveOccurred(), out)
			fw.WaitAvailable(c, 3*time.Minute)
			expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
			framework.ReportDuration("drain and uncordon of "+node, time.Since(start))
			Eventually(func(g Gomega) {
				expectSameMembers(g, c, before.ids, "")
				expectSameClaims(g, c, before.claims)
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
			d := raftTerm(c) - term
			elections = append(elections, fmt.Sprintf("%s: %d", node, d))
			if nodes[node][0] == leader {
				Expect(d).To(BeNumerically("<=", 1), "the drain of the leader's node cost more than one election")
			} else {
				Expect(d).To(BeZero(), "the drain of a follower's node cost an election")
			}
		}
		acked, failed := w.Counts()
		AddReportEntry("elections per drain", fmt.Sprint(elections))
		AddReportEntry("writer during the drains", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s",
			acked, failed, w.LongestGap().Round(time.Millisecond)))
		w.StopAndVerify(c)
		s.verify()
	})

	It("changes nothing when a member's node is partitioned for less than --heal-after", func() {
		_, c, w, s, before := startSafetyScenario("partition")
		node, member := memberNodeAwayFromOperator(c)
		DeferCleanup(func() {
			framework.Heal(node)
			fw.WaitNodeReady(node, true, 2*time.Minute)
		})
		By(fmt.Sprintf("partitioning %s (member %s) until it is NotReady", node, member))
		start := time.Now()
		framework.Partition(node)
		fw.WaitNodeReady(node, false, 2*time.Minute)
		framework.ReportDuration("node NotReady after the partition", time.Since(start))
		Consistently(func(g Gomega) {
			expectSameMembers(g, c, before.ids, member)
			expectSameClaims(g, c, before.claims)
			expectSamePods(g, c, before.pods)
		}).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())
		framework.Heal(node)
		fw.WaitNodeReady(node, true, 2*time.Minute)
		fw.WaitAvailable(c, 3*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		framework.ReportDuration("3 ready members after the partition healed", time.Since(start))
		Eventually(func(g Gomega) {
			expectSameMembers(g, c, before.ids, "")
			expectSameClaims(g, c, before.claims)
			expectSamePods(g, c, before.pods)
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		expectAgreement(c, 3)
		acked, failed := w.Counts()
		AddReportEntry("writer during the partition", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s",
			acked, failed, w.LongestGap().Round(time.Millisecond)))
		w.StopAndVerify(c)
		s.verify()
	})

	DescribeTable("replaces a member whose node is lost for --heal-after, on another node, and keeps the old one out when the node is back",
		func(name string, fault, undo func(string)) {
			const healAfter = time.Minute
			rollOperatorBackAtCleanup()
			restartOperatorWithFlag("heal-after", healAfter.String())
			_, c, w, s, before := startSafetyScenario(name)
			node, member := memberNodeAwayFromOperator(c)
			back := false
			DeferCleanup(func() {
				if !back {
					undo(node)
					fw.WaitNodeReady(node, true, 2*time.Minute)
				}
			})

			By(fmt.Sprintf("%s: %s, with member %s and its volume", name, node, member))
			start := time.Now()
			fault(node)
			fw.WaitNodeReady(node, false, 2*time.Minute)
			framework.ReportDuration("node NotReady", time.Since(start))
			var after map[string]uint64
			Eventually(func(g Gomega) {
				after = memberIDsByNameG(g, c)
				g.Expect(after).To(HaveLen(3))
				g.Expect(after).To(HaveKey(member))
				g.Expect(after[member]).NotTo(Equal(before.ids[member]), "member %s not replaced yet", member)
				p := podNamed(c.Namespace, member)
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
				g.Expect(p.Spec.NodeName).NotTo(Equal(node), "the replacement runs on another node")
			}).WithTimeout(healAfter + 5*time.Minute).WithPolling(2 * time.Second).Should(Succeed())
			fw.WaitAvailable(c, 3*time.Minute)
			expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
			framework.ReportDuration("member replaced on another node and Available", time.Since(start))
			for name, id := range before.ids {
				if name != member {
					Expect(after[name]).To(Equal(id), "member %s kept its ID", name)
				}
			}
			events := clusterEvents(c, corev1.EventTypeWarning, "NodeLost")
			Expect(events).NotTo(BeEmpty(), "a NodeLost event names the node")

			By(fmt.Sprintf("bringing %s back with the old member's data: nothing of it rejoins", node))
			undo(node)
			back = true
			fw.WaitNodeReady(node, true, 2*time.Minute)
			Consistently(func(g Gomega) { expectSameMembers(g, c, after, "") }).
				WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
			fw.WaitAvailable(c, 2*time.Minute)
			expectAgreement(c, 3)
			acked, failed := w.Counts()
			AddReportEntry("writer", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s",
				acked, failed, w.LongestGap().Round(time.Millisecond)))
			w.StopAndVerify(c)
			s.verify()
		},
		Entry("a node powered off", "poweroff", framework.PowerOff, framework.PowerOn),
		Entry("a node partitioned", "cutoff", framework.Partition, framework.Heal),
	)

	It("loses two of three nodes: waits while their data may come back, then recovers from the survivor onto the nodes that return", func() {
		ns := fw.NewNamespace("two-nodes-lost")
		c := fw.NewCluster(ns, "majority", etcdVersion, 3)
		c.Spec.BackupSchedule = ""
		c.Spec.Recovery = etcdv1beta1.RecoverySpec{QuorumLoss: etcdv1beta1.QuorumLossFromSurvivor, After: &metav1.Duration{Duration: 30 * time.Second}}
		// Required: the members that rejoin wait for nodes of their own instead of joining the survivor's.
		c.Spec.Pod.Spread = etcdv1beta1.SpreadRequired
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectClaimsRecorded(c, 3)
		ids := memberIDsByName(c, 3)
		claims, pods := claimUIDs(c, 3), podUIDs(c)
		survivorNode, survivor, lostNodes, lost := majorityAwayFromOperator(c)

		By("writing, then reading the last write through each member: every member holds every acknowledged write")
		before := fw.StartWriter(c, "/e2e/majority-before")
		before.WaitProgress(50, time.Minute)
		before.Stop()
		for _, pod := range memberNames(c, 3) {
			_, err := etcdctl(c, pod, "--endpoints="+localURL(c), "get", "/e2e/majority-before/", "--prefix", "--keys-only", "--limit=1")
			Expect(err).NotTo(HaveOccurred(), pod)
		}

		By(fmt.Sprintf("powering off %v (members %v, their volumes with them); %s keeps %s and the operator", lostNodes, lost, survivorNode, survivor))
		start := time.Now()
		powerOn := powerOffNodes(lostNodes)
		framework.ReportDuration("both nodes NotReady", time.Since(start))
		progressing := func(g Gomega) string {
			cur := fw.GetCluster(c)
			avail := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)
			g.Expect(avail).NotTo(BeNil())
			g.Expect(avail.Reason).To(Equal("QuorumLost"))
			p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
			g.Expect(p).NotTo(BeNil())
			return p.Message
		}
		Eventually(progressing).WithTimeout(time.Minute).WithPolling(time.Second).Should(And(
			ContainSubstring("3 of 3 voters still hold their data (quorum 2), so the majority may come back"),
			ContainSubstring(lostNodes[0]), ContainSubstring(lostNodes[1])))
		framework.ReportDuration("quorum loss reported, naming both nodes", time.Since(start))

		By("past recovery.after, with FromSurvivor chosen: nothing is forced while the lost members' data may come back")
		Consistently(func(g Gomega) {
			g.Expect(progressing(g)).To(ContainSubstring("so the majority may come back"))
			expectSameClaims(g, c, claims)
			expectSamePods(g, c, pods)
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-config"}, cm)).To(Succeed())
			g.Expect(cm.Data).NotTo(HaveKey("FORCE_NEW_CLUSTER_MEMBER"), "no forced start while a majority may come back")
		}).WithTimeout(45 * time.Second).WithPolling(2 * time.Second).Should(Succeed())

		By("a human declaring the two nodes' volumes lost: their claims and pods deleted (the pods forcibly: their kubelets are off)")
		declareLost(ns, lost)
		after := fw.StartWriter(c, "/e2e/majority-after")
		By("the survivor restarting alone: etcd answers again with the survivor's member ID")
		Eventually(func(g Gomega) {
			// The members that rejoin are learners that have not started (no name yet) while they wait.
			got := memberNamesByIDG(g, c)
			g.Expect(got).To(HaveKeyWithValue(ids[survivor], survivor))
			for _, name := range lost {
				g.Expect(got).NotTo(HaveKey(ids[name]), "%s is still in etcd with its old ID", name)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("survivor answering alone", time.Since(start))
		// The members that rejoin do not stay beside the survivor (spread Required): an empty one that took the
		// survivor's node while its pod restarted is moved off it, and they wait for nodes of their own.
		notBeside := func(g Gomega) {
			for _, name := range lost {
				if p := podNamed(ns, name); p != nil {
					g.Expect(p.Spec.NodeName).NotTo(Equal(survivorNode), "%s placed beside the survivor", name)
				}
			}
		}
		Eventually(notBeside).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Consistently(notBeside).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())

		By(fmt.Sprintf("powering %v on again: the members rejoin empty there, one per node", lostNodes))
		powerOn()
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 5*time.Minute)
		framework.ReportDuration("3 voting members on 3 nodes again", time.Since(start))
		byNode, _ := memberPlacement(c)
		Expect(byNode).To(HaveLen(3), "members by node: %v", byNode)
		now := memberIDsByName(c, 3)
		Expect(now[survivor]).To(Equal(ids[survivor]), "the survivor keeps its member ID")
		for _, name := range lost {
			Expect(now[name]).NotTo(Equal(ids[name]), "%s rejoined as a new member", name)
		}
		expectAgreement(c, 3)
		before.Verify(c)
		after.WaitProgress(50, time.Minute)
		acked, failed := after.Counts()
		AddReportEntry("writer from the loss on", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s",
			acked, failed, after.LongestGap().Round(time.Millisecond)))
		after.StopAndVerify(c)
		Expect(clusterEvents(c, corev1.EventTypeWarning, "QuorumRecovery")).NotTo(BeEmpty(), "the recovery step is an event")
	})

	It("loses two of three nodes with FromBackup chosen: restores every member from the newest backup, onto three nodes", func() {
		ns := fw.NewNamespace("two-nodes-lost-backup")
		c := fw.NewCluster(ns, "rebuilt", etcdVersion, 3)
		c.Spec.BackupSchedule = ""
		c.Spec.Recovery = etcdv1beta1.RecoverySpec{QuorumLoss: etcdv1beta1.QuorumLossFromBackup, After: &metav1.Duration{Duration: 30 * time.Second}}
		c.Spec.Pod.Spread = etcdv1beta1.SpreadRequired
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectClaimsRecorded(c, 3)
		ids := memberIDsByName(c, 3)
		oldCluster := clusterID(c)
		inBackup, _ := writeKeys(c, "/e2e/in-backup", 300)

		By("taking an on-demand backup to the cluster's backup claim (node-local), then writing past it")
		b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "newest"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: c.Name}}
		Expect(k8s.Create(ctx, b)).To(Succeed())
		waitBackupSucceeded(b)
		putGet(c, "/e2e/after-backup", "lost-with-the-majority")
		survivorNode, survivor, lostNodes, lost := majorityAwayFromOperator(c)
		backupNode := claimNode(ns, c.Name+"-backups")
		AddReportEntry("placement", fmt.Sprintf("survivor %s on %s; lost %v on %v; backup claim on %s", survivor, survivorNode, lost, lostNodes, backupNode))

		By(fmt.Sprintf("powering off %v (members %v, their volumes with them)", lostNodes, lost))
		start := time.Now()
		powerOn := powerOffNodes(lostNodes)
		framework.ReportDuration("both nodes NotReady", time.Since(start))

		By("a human declaring the two nodes' volumes lost: their claims and pods deleted (the pods forcibly: their kubelets are off)")
		declareLost(ns, lost)

		By("the operator deciding to restore from the backup once recovery.after has passed: it starts the snapshot server of the backup claim")
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.SnapshotServerName(c)}, &appsv1.StatefulSet{})).To(Succeed())
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("restore from the backup started", time.Since(start))
		if slices.Contains(lostNodes, backupNode) {
			Eventually(func(g Gomega) {
				p := meta.FindStatusCondition(fw.GetCluster(c).Status.Conditions, etcdv1beta1.ConditionProgressing)
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Reason).To(Equal("WaitingForSnapshotServer"))
				g.Expect(p.Message).To(ContainSubstring(c.Name + "-backups"))
			}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "status does not say the restore waits for the backup claim's node")
		}

		By(fmt.Sprintf("powering %v on again: the restored members take a node each", lostNodes))
		powerOn()
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 5*time.Minute)
		framework.ReportDuration("restored from the backup: 3 voting members on 3 nodes", time.Since(start))
		rec := fw.GetCluster(c).Status.LastRecovery
		Expect(rec).NotTo(BeNil())
		Expect(rec.Strategy).To(Equal(etcdv1beta1.QuorumLossFromBackup))
		Expect(rec.Source).To(Equal(b.Status.Location))
		Expect(rec.Revision).To(Equal(b.Status.Revision))
		byNode, _ := memberPlacement(c)
		Expect(byNode).To(HaveLen(3), "members by node: %v", byNode)
		now := memberIDsByName(c, 3)
		for name, id := range ids {
			Expect(now[name]).NotTo(Equal(id), "%s is a member of the restored cluster, not of the lost one", name)
		}
		Expect(clusterID(c)).NotTo(Equal(oldCluster), "the restored cluster has a cluster ID of its own")
		expectKeys(c, "/e2e/in-backup", inBackup)
		out, err := etcdctl(c, c.Name+"-0", "--endpoints="+localURL(c), "get", "/e2e/after-backup", "--print-value-only")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(BeEmpty(), "a write after the backup's revision came back")
		expectAgreement(c, 3)
		w := fw.StartWriter(c, "/e2e/rebuilt-after")
		w.WaitProgress(50, time.Minute)
		w.StopAndVerify(c)
	})

})

// expectThreeReadyNodes: the cluster has three nodes or more, every one Ready and schedulable.
func expectThreeReadyNodes() {
	nodes := fw.Nodes()
	Expect(len(nodes)).To(BeNumerically(">=", 3), "these scenarios need three nodes: make cluster-up NODES=3")
	for i := range nodes {
		Expect(framework.NodeReady(&nodes[i])).To(BeTrue(), "node %s is not Ready", nodes[i].Name)
		Expect(nodes[i].Spec.Unschedulable).To(BeFalse(), "node %s is cordoned", nodes[i].Name)
	}
}

// powerOffNodes powers the nodes off and waits until they are NotReady; the function it returns powers them on
// again and waits until they are Ready, and runs at the spec's end if the spec did not call it.
func powerOffNodes(nodes []string) func() {
	GinkgoHelper()
	off := map[string]bool{}
	on := func() {
		for node := range off {
			framework.PowerOn(node)
		}
		for node := range off {
			fw.WaitNodeReady(node, true, 2*time.Minute)
		}
		clear(off)
	}
	DeferCleanup(on)
	for _, node := range nodes {
		framework.PowerOff(node)
		off[node] = true
	}
	for _, node := range nodes {
		fw.WaitNodeReady(node, false, 2*time.Minute)
	}
	return on
}

// declareLost does what a human does for members whose nodes are gone with their volumes: deletes their
// claims, and their pods forcibly (their kubelets are off).
func declareLost(ns string, members []string) {
	GinkgoHelper()
	for _, name := range members {
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, pvc)).To(Succeed())
		Expect(k8s.Delete(ctx, pvc)).To(Succeed())
		p := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		Expect(k8s.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
	}
}

// claimNode is the node a bound claim's local volume is on (the PV's node affinity).
func claimNode(ns, name string) string {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
	Expect(pvc.Spec.VolumeName).NotTo(BeEmpty(), "claim %s is not bound", name)
	pv := &corev1.PersistentVolume{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, term := range a.Required.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key == corev1.LabelHostname && len(e.Values) == 1 {
					return e.Values[0]
				}
			}
		}
	}
	return ""
}

// memberPlacement returns the cluster's member pods by node and by zone.
func memberPlacement(c *etcdv1beta1.EtcdCluster) (byNode, byZone map[string][]string) {
	GinkgoHelper()
	zones := map[string]string{}
	for _, n := range fw.Nodes() {
		zones[n.Name] = framework.NodeZone(&n)
	}
	byNode, byZone = map[string][]string{}, map[string][]string{}
	for _, p := range fw.MemberPods(c) {
		Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s is not scheduled", p.Name)
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
		byZone[zones[p.Spec.NodeName]] = append(byZone[zones[p.Spec.NodeName]], p.Name)
	}
	return byNode, byZone
}

// memberNodeAwayFromOperator returns a node with one member of the cluster and no operator pod, and that
// member: a fault there takes a member away, not the operator that must act on it.
func memberNodeAwayFromOperator(c *etcdv1beta1.EtcdCluster) (node, member string) {
	GinkgoHelper()
	operatorNodes := operatorNodes()
	byNode, _ := memberPlacement(c)
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		if !operatorNodes[n] && len(byNode[n]) == 1 {
			return n, byNode[n][0]
		}
	}
	Fail(fmt.Sprintf("no node with one member and no operator pod: members %v, operator on %v", byNode, operatorNodes))
	return "", ""
}

// majorityAwayFromOperator returns the node with the operator's pod and the member there (the survivor), and
// the two other nodes and their members: powering those off takes the majority away, not the operator.
func majorityAwayFromOperator(c *etcdv1beta1.EtcdCluster) (survivorNode, survivor string, lostNodes, lost []string) {
	GinkgoHelper()
	var operatorOn map[string]bool
	// After a rollout the old pod may still be terminating.
	Eventually(func() map[string]bool { operatorOn = operatorNodes(); return operatorOn }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(HaveLen(1), "one operator pod")
	byNode, _ := memberPlacement(c)
	Expect(byNode).To(HaveLen(3), "members by node: %v", byNode)
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		if operatorOn[n] {
			survivorNode, survivor = n, byNode[n][0]
			continue
		}
		lostNodes, lost = append(lostNodes, n), append(lost, byNode[n][0])
	}
	Expect(survivorNode).NotTo(BeEmpty(), "no member on the operator's node: members %v, operator on %v", byNode, operatorOn)
	return survivorNode, survivor, lostNodes, lost
}

// operatorNodes returns the nodes the operator's pods run on (pods being deleted left out).
func operatorNodes() map[string]bool {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = true
		}
	}
	return out
}

// raftTerm is the cluster's raft term (one more per election), as a member answering through the Service sees it.
func raftTerm(c *etcdv1beta1.EtcdCluster) uint64 {
	GinkgoHelper()
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	var term uint64
	Eventually(func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, "/e2e/term")
		if err == nil {
			term = resp.Header.RaftTerm
		}
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return term
}

// drainNode drains node as an administrator would. kubectl retries an eviction the budget refuses, but gives
// up on any other eviction error: such a drain is run again, as an administrator would run it, once; every
// failure is kept in the report with kubectl's whole message, and a second one fails the spec.
func drainNode(node string) {
	GinkgoHelper()
	for attempt := 1; ; attempt++ {
		out, err := fw.Kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m")
		if err == nil {
			return
		}
		failure := strings.Join(strings.Fields(out+" "+err.Error()), " ")
		AddReportEntry(fmt.Sprintf("drain of %s failed (attempt %d)", node, attempt), failure)
		if attempt == 2 {
			Fail("drain of " + node + ": " + failure)
		}
	}
}
