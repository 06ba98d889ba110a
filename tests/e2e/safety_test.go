//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Safety under ordinary events: a version whose image does not exist, a StatefulSet deleted with its pods
// orphaned in the middle of a scale-up, the operator restarted with another cluster domain, a member's pod
// and claim deleted together. Each runs under a writer (every acknowledged write is read back at the end)
// and a status sampler that compares what the status claims with what etcd and the API server show.
var _ = Describe("Safety under ordinary events", Label("safety"), func() {
	It("stalls on a version whose image does not exist, changes nothing more, and recovers when it is reverted", func() {
		const missing = "3.5.99"
		ns, c, w, s, before := startSafetyScenario("badimage")
		ids := before.ids
		claims := before.claims
		pods := before.pods

		leaderBefore, err := leaderPod(c)
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		s.expectChange(fw.GetCluster(c).Generation+1, "version "+missing, func(t safetyTruth) bool {
			return t.allPodsOn(etcdRepository+":v"+missing, 3)
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = missing })

		By("waiting for one follower to be restarted onto the missing image")
		var stuck string
		Eventually(func(g Gomega) {
			var onMissing []string
			for _, p := range fw.MemberPods(c) {
				if p.Spec.Containers[0].Image == etcdRepository+":v"+missing {
					onMissing = append(onMissing, p.Name)
					g.Expect(etcdWaitingReason(&p)).To(BeElementOf("ErrImagePull", "ImagePullBackOff"), "pod %s", p.Name)
				}
			}
			g.Expect(onMissing).To(HaveLen(1))
			stuck = onMissing[0]
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(stuck).NotTo(Equal(leaderBefore), "the leader was restarted before the followers")
		// The restart onto the new version is the one change the operator makes; from here on none.
		pods = onlyRestarted(c, pods, stuck)
		stuckOrdinal := strings.TrimPrefix(stuck, c.Name+"-")

		By("waiting for the status to report the stall")
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			expectStuckMemberReported(g, cur, stuckOrdinal)
			prog := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
			g.Expect(prog).NotTo(BeNil())
			g.Expect(prog.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(prog.Reason).To(Equal("UpgradeStalled"))
			g.Expect(prog.Message).To(ContainSubstring("member "+stuckOrdinal+" ("), "names the stuck member")
			g.Expect(prog.Message).To(Or(ContainSubstring("ErrImagePull"), ContainSubstring("ImagePullBackOff")),
				"names the pod's reason")
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("stall reported", time.Since(start))

		By("checking that nothing more changes while the member cannot start")
		Consistently(func(g Gomega) {
			expectSameMembers(g, c, ids, stuck)
			expectSameClaims(g, c, claims)
			expectSamePods(g, c, pods)
			cur := fw.GetCluster(c)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeTrue())
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing).Reason).
				To(Equal("UpgradeStalled"))
		}).WithTimeout(40 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		w.WaitProgress(20, time.Minute)

		By("reverting spec.version")
		start = time.Now()
		s.expectChange(fw.GetCluster(c).Generation+1, "revert to "+etcdVersion, func(t safetyTruth) bool {
			return t.allPodsOn(etcdRepository+":v"+etcdVersion, 3) && t.healthyVoters() == 3
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = etcdVersion })
		waitPodReplaced(ns, stuck, pods[stuck], 5*time.Minute)
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeTrue(),
				"conditions: %+v", cur.Status.Conditions)
			for _, p := range fw.MemberPods(c) {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository + ":v" + etcdVersion))
			}
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("recovered after the revert", time.Since(start))
		Expect(memberIDsByName(c, 3)).To(Equal(ids), "member IDs")
		Eventually(func(g Gomega) { expectSameClaims(g, c, claims) }).Should(Succeed())
		delete(pods, stuck)
		Eventually(func(g Gomega) { expectSamePods(g, c, pods) }).Should(Succeed())

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("reports a new cluster whose image does not exist, and starts it within 3 minutes once the version is corrected", func() {
		const missing = "3.5.99"
		ns := fw.NewNamespace("badbootstrap")
		c := fw.NewCluster(ns, "badbootstrap", missing, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())

		By("waiting for the status to say why no member starts")
		start := time.Now()
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			deg := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)
			g.Expect(deg).NotTo(BeNil())
			g.Expect(deg.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(deg.Reason).To(Equal("MemberCannotStart"))
			g.Expect(deg.Message).To(ContainSubstring("container etcd (image "+etcdRepository+":v"+missing+")"), "names the image")
			g.Expect(deg.Message).To(Or(ContainSubstring("ErrImagePull"), ContainSubstring("ImagePullBackOff")), "names the kubelet's reason")
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionAvailable).Reason).To(Equal("Bootstrapping"))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("bootstrap on a missing image reported", time.Since(start))

		By("correcting spec.version")
		start = time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = etcdVersion })
		Eventually(func(g Gomega) {
			pods := fw.MemberPods(c)
			g.Expect(pods).To(HaveLen(3))
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository+":v"+etcdVersion), "pod %s", p.Name)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("pods replaced on the corrected version", time.Since(start))
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeTrue(),
				"conditions: %+v", cur.Status.Conditions)
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("stalls on an etcd flag with a typo, changes nothing more, and rolls the corrected settings to every member", func() {
		const typo, flag = "experimental-compaction-batch-limt", "experimental-compaction-batch-limit"
		_, c, w, s, before := startSafetyScenario("badflag")
		ids, claims, pods := before.ids, before.claims, before.pods
		leaderBefore, err := leaderPod(c)
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		s.expectChange(fw.GetCluster(c).Generation+1, "flag "+typo, func(t safetyTruth) bool {
			return t.allPodsWithArg("--"+typo+"=500", 3)
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Etcd.ExtraFlags = map[string]string{typo: "500"} })

		By("waiting for one follower to be restarted with the flag etcd refuses")
		var stuck string
		Eventually(func(g Gomega) {
			var withFlag []string
			for _, p := range fw.MemberPods(c) {
				if slices.Contains(p.Spec.Containers[0].Args, "--"+typo+"=500") {
					withFlag = append(withFlag, p.Name)
				}
			}
			g.Expect(withFlag).To(HaveLen(1))
			stuck = withFlag[0]
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(stuck).NotTo(Equal(leaderBefore), "the leader was restarted before the followers")
		pods = onlyRestarted(c, pods, stuck)
		stuckOrdinal := strings.TrimPrefix(stuck, c.Name+"-")

		By("waiting for the status to report the member that cannot start")
		Eventually(func(g Gomega) {
			expectStuckMemberReported(g, fw.GetCluster(c), stuckOrdinal)
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("flag typo reported", time.Since(start))

		By("checking that nothing more changes while the member crash-loops")
		Consistently(func(g Gomega) {
			expectSameMembers(g, c, ids, stuck)
			expectSameClaims(g, c, claims)
			expectSamePods(g, c, pods)
		}).WithTimeout(30 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		w.WaitProgress(20, time.Minute)

		By("correcting the flag's name")
		start = time.Now()
		s.expectChange(fw.GetCluster(c).Generation+1, "flag "+flag, func(t safetyTruth) bool {
			return t.allPodsWithArg("--"+flag+"=500", 3) && t.healthyVoters() == 3
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Etcd.ExtraFlags = map[string]string{flag: "500"} })
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeTrue(),
				"conditions: %+v", cur.Status.Conditions)
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeTrue())
			members := fw.MemberPods(c)
			g.Expect(members).To(HaveLen(3))
			for _, p := range members {
				g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"--" + flag + "=500"}), "pod %s", p.Name)
				g.Expect(framework.PodReady(&p)).To(BeTrue(), "pod %s", p.Name)
			}
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("corrected settings rolled to every member", time.Since(start))
		Expect(memberIDsByName(c, 3)).To(Equal(ids), "member IDs: every member restarted with its data")
		Eventually(func(g Gomega) { expectSameClaims(g, c, claims) }).Should(Succeed())

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("recreates a StatefulSet deleted with orphaned pods in the middle of a scale-up at the current membership", func() {
		ns, c, w, s, before := startSafetyScenario("orphan")
		ids := before.ids
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, sts)).To(Succeed())

		start := time.Now()
		s.expectChange(fw.GetCluster(c).Generation+1, "replicas 5", func(t safetyTruth) bool {
			return t.healthyVoters() == 5 && t.voters() == 5 && t.readyPods() == 5
		})
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })

		By("waiting for the fourth member in etcd's member list")
		Eventually(func() (int, error) {
			members, err := memberList(c, c.Name+"-0")
			return len(members), err
		}).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(BeNumerically(">=", 4))
		By("deleting the StatefulSet, orphaning its pods")
		// Through the API, not `kubectl delete --cascade=orphan --wait`: kubectl's wait once never returned
		// after the operator recreated the StatefulSet under the same name. The recreation is awaited below.
		Expect(k8s.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		Eventually(func(g Gomega) {
			cur := &appsv1.StatefulSet{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, cur)).To(Succeed())
			g.Expect(cur.UID).NotTo(Equal(sts.UID))
		}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		framework.ReportDuration("StatefulSet recreated", time.Since(start))

		fw.WaitAvailable(c, 8*time.Minute)
		expectVotingMembers(c, memberNames(c, 5), 3*time.Minute)
		expectAgreement(c, 5)
		framework.ReportDuration("scale 3 → 5 with the StatefulSet deleted midway", time.Since(start))
		after := memberIDsByName(c, 5)
		for name, id := range ids {
			Expect(after[name]).To(Equal(id), "member %s keeps its ID", name)
		}
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("changes no member when the operator restarts with another cluster domain", Serial, func() {
		ns, c, w, s, before := startSafetyScenario("domain")
		ids := before.ids
		claims := before.claims
		pods := before.pods

		rollBack := rollOperatorBackAtCleanup()

		start := time.Now()
		restartOperatorWithFlag("cluster-domain", "other.example")
		framework.ReportDuration("operator restarted with another cluster domain", time.Since(start))
		Consistently(func(g Gomega) {
			expectSameMembers(g, c, ids, "")
			expectSameClaims(g, c, claims)
			expectSamePods(g, c, pods)
		}).WithTimeout(40 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
		w.WaitProgress(20, time.Minute)
		logCertificateNames(c)
		logOperator(ns)

		start = time.Now()
		rollBack()
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		expectAgreement(c, 3)
		framework.ReportDuration("available after the original domain is back", time.Since(start))
		Expect(memberIDsByName(c, 3)).To(Equal(ids), "member IDs")
		Eventually(func(g Gomega) { expectSameClaims(g, c, claims) }).Should(Succeed())

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("replaces a member whose pod and claim are deleted at once exactly once", func() {
		ns, c, w, s, before := startSafetyScenario("podclaim")
		putGet(c, "/e2e/before-loss", "kept")
		ids := before.ids
		claims := before.claims

		victim := c.Name + "-1"
		podBefore := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, podBefore)).To(Succeed())
		start := time.Now()
		_, err := fw.Kubectl("delete", "pvc", "-n", ns, "data-"+victim, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		_, err = fw.Kubectl("delete", "pod", "-n", ns, victim, "--wait=false")
		Expect(err).NotTo(HaveOccurred())

		waitPodReplaced(ns, victim, string(podBefore.UID), 5*time.Minute)
		Eventually(func(g Gomega) {
			after := memberIDsByNameG(g, c)
			g.Expect(after[victim]).NotTo(BeZero())
			g.Expect(after[victim]).NotTo(Equal(ids[victim]), "member %s still has its old ID", victim)
		}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		expectAgreement(c, 3)
		framework.ReportDuration("member replaced after losing its pod and claim", time.Since(start))

		after := memberIDsByName(c, 3)
		for name, id := range ids {
			if name != victim {
				Expect(after[name]).To(Equal(id), "member %s keeps its ID", name)
			}
		}
		newIDs := s.idsOf(victim)
		delete(newIDs, ids[victim])
		Expect(newIDs).To(HaveLen(1), "new etcd members seen for %s: the member is replaced exactly once", victim)
		Expect(newIDs).To(HaveKey(after[victim]))
		newClaim := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim}, newClaim)).To(Succeed())
		Expect(newClaim.UID).NotTo(Equal(claims["data-"+victim]))
		delete(claims, "data-"+victim)
		Eventually(func(g Gomega) { expectSameClaims(g, c, claims) }).Should(Succeed())
		Eventually(func() (string, error) {
			return etcdctl(c, victim, "--endpoints="+localURL(c), "get", "/e2e/before-loss",
				"--print-value-only", "--consistency=s")
		}).WithTimeout(time.Minute).Should(ContainSubstring("kept"))

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})

	It("replaces the members one at a time when every claim is deleted while the pods run", func() {
		ns, c, w, s, before := startSafetyScenario("allclaims")
		putGet(c, "/e2e/before-loss", "kept")
		start := time.Now()
		// PVC protection keeps each claim, and the member's data, until its pod goes: every member runs on
		// data that vanishes at its next restart.
		_, err := fw.Kubectl("delete", "pvc", "-n", ns, "-l", labelInstance+"="+c.Name, "--wait=false")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cur := &etcdv1beta1.EtcdCluster{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
			d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Reason).To(Equal("MemberDataDeleting"), "Degraded says whose data is going: %s", d.Message)
		}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())

		// Every member comes back under a new ID, on a new claim.
		Eventually(func(g Gomega) {
			after := memberIDsByNameG(g, c)
			g.Expect(after).To(HaveLen(3))
			for name, id := range before.ids {
				g.Expect(after[name]).NotTo(BeZero())
				g.Expect(after[name]).NotTo(Equal(id), "member %s still has its old ID", name)
			}
		}).WithTimeout(10 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		expectAgreement(c, 3)
		framework.ReportDuration("every member replaced after every claim was deleted", time.Since(start))
		for name, uid := range before.claims {
			pvc := &corev1.PersistentVolumeClaim{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
			Expect(pvc.UID).NotTo(Equal(uid), "claim %s is new", name)
			Expect(pvc.DeletionTimestamp).To(BeNil(), "claim %s is not being deleted", name)
		}
		Expect(s.leastVoters()).To(Equal(2), "a member is replaced, never shed: the voters never fall below 2 of 3")
		Eventually(func() (string, error) {
			return etcdctl(c, c.Name+"-0", "--endpoints="+localURL(c), "get", "/e2e/before-loss", "--print-value-only", "--consistency=s")
		}).WithTimeout(time.Minute).Should(ContainSubstring("kept"))
		Eventually(func(g Gomega) {
			cur := &etcdv1beta1.EtcdCluster{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
			d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Status).To(Equal(metav1.ConditionFalse), "Degraded: %s", d.Message)
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
		s.verify()
	})
})

// safetyStart is what a safety scenario records before its event: the member IDs by name, the data
// claims' UIDs and the member pods' UIDs of its healthy 3-member cluster.
type safetyStart struct {
	ids    map[string]uint64
	claims map[string]types.UID
	pods   map[string]string
}

// startSafetyScenario creates a 3-member cluster named name in a new namespace, waits until it is
// Available, and starts a writer and a status sampler on it (the sampler stops at cleanup).
func startSafetyScenario(name string) (string, *etcdv1beta1.EtcdCluster, *framework.Writer, *safetySampler, safetyStart) {
	ns := fw.NewNamespace(name)
	c := fw.NewCluster(ns, name, etcdVersion, 3)
	ExpectWithOffset(1, k8s.Create(ctx, c)).To(Succeed())
	fw.WaitAvailable(c, 5*time.Minute)
	w := fw.StartWriter(c, "/e2e/"+name)
	w.WaitProgress(20, time.Minute)
	before := safetyStart{ids: memberIDsByName(c, 3), claims: claimUIDs(c, 3), pods: podUIDs(c)}
	s := startSafetySampler(c)
	DeferCleanup(s.halt)
	return ns, c, w, s, before
}

// memberIDsByName returns the IDs of the cluster's started members by name, expecting exactly n of them.
func memberIDsByName(c *etcdv1beta1.EtcdCluster, n int) map[string]uint64 {
	var out map[string]uint64
	EventuallyWithOffset(1, func(g Gomega) {
		out = memberIDsByNameG(g, c)
		g.Expect(out).To(HaveLen(n))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return out
}

func memberIDsByNameG(g Gomega, c *etcdv1beta1.EtcdCluster) map[string]uint64 {
	out := map[string]uint64{}
	for id, name := range memberNamesByIDG(g, c) {
		g.Expect(name).NotTo(BeEmpty(), "member %x has not started", id)
		out[name] = id
	}
	return out
}

// memberNamesByIDG returns the names of the cluster's members by ID, as etcd lists them through the client
// Service ("" for a member that has not started).
func memberNamesByIDG(g Gomega, c *etcdv1beta1.EtcdCluster) map[uint64]string {
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[uint64]string{}
	for _, m := range resp.Members {
		out[m.ID] = m.Name
	}
	return out
}

// expectSameMembers checks that etcd lists exactly the members of ids, asked of the member of a ready pod other
// than skip: not through the client Service, which may still send the connection to skip's member (cut off,
// say) until its endpoint is withdrawn. The first ready pod that answers decides; the next is asked when one
// cannot answer (its etcd container restarted under the exec: a liveness probe that failed through a cut
// network ends it), and the check fails when none answers.
func expectSameMembers(g Gomega, c *etcdv1beta1.EtcdCluster, ids map[string]uint64, skip string) {
	var (
		asked   []string
		members []etcdMember
		err     error
	)
	for _, p := range fw.MemberPods(c) {
		if p.Name == skip || !framework.PodReady(&p) {
			continue
		}
		asked = append(asked, p.Name)
		if members, err = memberList(c, p.Name, "--endpoints="+localURL(c)); err == nil {
			break
		}
	}
	g.Expect(asked).NotTo(BeEmpty(), "no ready member pod to ask")
	g.Expect(err).NotTo(HaveOccurred(), "no ready member pod answered (asked %v)", asked)
	got := map[string]uint64{}
	for _, m := range members {
		got[m.Name] = m.ID
	}
	g.Expect(got).To(Equal(ids), "etcd members")
}

// claimUIDs returns the UIDs of the data claims of ordinals 0..n-1.
func claimUIDs(c *etcdv1beta1.EtcdCluster, n int) map[string]types.UID {
	out := map[string]types.UID{}
	for _, name := range memberNames(c, n) {
		pvc := &corev1.PersistentVolumeClaim{}
		ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-" + name}, pvc)).To(Succeed())
		out[pvc.Name] = pvc.UID
	}
	return out
}

func expectSameClaims(g Gomega, c *etcdv1beta1.EtcdCluster, claims map[string]types.UID) {
	for name, uid := range claims {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, pvc)).To(Succeed())
		g.Expect(pvc.UID).To(Equal(uid), "claim %s was replaced", name)
		g.Expect(pvc.DeletionTimestamp).To(BeNil(), "claim %s is being deleted", name)
	}
}

// podUIDs returns the UIDs of the member pods by name.
func podUIDs(c *etcdv1beta1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, p := range fw.MemberPods(c) {
		out[p.Name] = string(p.UID)
	}
	return out
}

func expectSamePods(g Gomega, c *etcdv1beta1.EtcdCluster, uids map[string]string) {
	for name, uid := range uids {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, p)).To(Succeed())
		g.Expect(string(p.UID)).To(Equal(uid), "pod %s was restarted", name)
		g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is being deleted", name)
	}
}

// etcdWaitingReason is the reason the pod's etcd container waits, "" when it does not.
func etcdWaitingReason(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "etcd" && st.State.Waiting != nil {
			return st.State.Waiting.Reason
		}
	}
	return ""
}

// safetyTruth is what etcd and the API server show at one moment, read right after a status sample.
type safetyTruth struct {
	pods    []corev1.Pod
	members []*memberHealth
}

type memberHealth struct {
	id      uint64
	name    string
	peerURL string
	learner bool
	healthy bool
}

func (t safetyTruth) voters() int {
	n := 0
	for _, m := range t.members {
		if !m.learner {
			n++
		}
	}
	return n
}

func (t safetyTruth) healthyVoters() int {
	n := 0
	for _, m := range t.members {
		if !m.learner && m.healthy {
			n++
		}
	}
	return n
}

func (t safetyTruth) readyPods() int {
	n := 0
	for i := range t.pods {
		if framework.PodReady(&t.pods[i]) {
			n++
		}
	}
	return n
}

// onlyRestarted checks that of the member pods (UIDs by name) only stuck was restarted, and returns the
// pods' UIDs now.
func onlyRestarted(c *etcdv1beta1.EtcdCluster, pods map[string]string, stuck string) map[string]string {
	restarted := podUIDs(c)
	ExpectWithOffset(1, restarted[stuck]).NotTo(Equal(pods[stuck]), "pod %s was not restarted", stuck)
	for name, uid := range pods {
		if name != stuck {
			ExpectWithOffset(1, restarted[name]).To(Equal(uid), "pod %s was restarted as well", name)
		}
	}
	return restarted
}

// expectStuckMemberReported: status is current and says Degraded (MemberCannotStart) naming the member of
// the given ordinal, while the other two keep the cluster Available.
func expectStuckMemberReported(g Gomega, cur *etcdv1beta1.EtcdCluster, ordinal string) {
	g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
	deg := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionDegraded)
	g.Expect(deg).NotTo(BeNil())
	g.Expect(deg.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(deg.Reason).To(Equal("MemberCannotStart"))
	g.Expect(deg.Message).To(ContainSubstring("member "+ordinal+" ("), "names the stuck member")
	g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeTrue(),
		"two of three members run: quorum holds")
}

// allPodsWithArg: exactly n member pods, each ready with arg among its etcd container's arguments.
func (t safetyTruth) allPodsWithArg(arg string, n int) bool {
	if len(t.pods) != n {
		return false
	}
	for i := range t.pods {
		if !slices.Contains(t.pods[i].Spec.Containers[0].Args, arg) || !framework.PodReady(&t.pods[i]) {
			return false
		}
	}
	return true
}

// allPodsOn: exactly n member pods, each ready on image.
func (t safetyTruth) allPodsOn(image string, n int) bool {
	if len(t.pods) != n {
		return false
	}
	for i := range t.pods {
		if t.pods[i].Spec.Containers[0].Image != image || !framework.PodReady(&t.pods[i]) {
			return false
		}
	}
	return true
}

// safetySampler samples the cluster's status and compares it with the truth read right after, collecting
// every claim that is not true: Available while fewer than a quorum of voters answer (for longer than
// the operator needs to notice), Progressing=False/Reconciled while a spec change is not carried out. It
// also watches invariants of a formed cluster: the ConfigMap never asks for a new cluster again, and the
// StatefulSet never shrinks below the members etcd lists; and it records every member ID seen per name.
type safetySampler struct {
	c      *etcdv1beta1.EtcdCluster
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	violations  []string
	samples     int
	truths      int
	ids         map[string]map[uint64]bool
	changeGen   int64
	changeName  string
	changeDone  func(safetyTruth) bool
	quorumLost  time.Time
	lastMembers []*memberHealth
	// fewestVoters is the fewest voting members etcd listed in any sample (0 before the first list).
	fewestVoters int
}

// quorumGrace is how long a status may keep claiming Available after quorum is lost. The operator
// observes etcd when a member pod changes (a member cut off fails its readiness probe after 3 × 5 s) and
// at least every --health-interval (30 s), and an observation of unreachable members takes etcd's call
// timeout (5 s): a status older than that is a claim the operator could have corrected, and is a lie.
const quorumGrace = 30*time.Second + 5*time.Second + 5*time.Second

func startSafetySampler(c *etcdv1beta1.EtcdCluster) *safetySampler {
	sctx, cancel := context.WithCancel(ctx)
	s := &safetySampler{c: c, cancel: cancel, done: make(chan struct{}), ids: map[string]map[uint64]bool{}}
	cli := fw.ClusterClient(c)
	useTLS := fw.TLSOn(c)
	go func() {
		defer GinkgoRecover()
		defer close(s.done)
		defer func() { _ = cli.Close() }()
		clients := map[string]*podClient{}
		defer func() {
			for _, pc := range clients {
				_ = pc.cli.Close()
			}
		}()
		for sctx.Err() == nil {
			s.sample(sctx, cli, clients, useTLS)
			select {
			case <-sctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return s
}

type podClient struct {
	ip  string
	cli *clientv3.Client
}

func (s *safetySampler) sample(sctx context.Context, cli *clientv3.Client, clients map[string]*podClient, useTLS bool) {
	c := s.c
	cur := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(sctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return
	}
	statusAt := time.Now()

	// The truth, read after the status.
	var t safetyTruth
	pods := &corev1.PodList{}
	if err := k8s.List(sctx, pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"}); err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.pods = append(t.pods, p)
		}
	}
	lctx, cancel := context.WithTimeout(sctx, 3*time.Second)
	resp, err := cli.MemberList(lctx)
	cancel()
	s.mu.Lock()
	if err == nil {
		s.lastMembers = nil
		for _, m := range resp.Members {
			mh := &memberHealth{id: m.ID, name: m.Name, learner: m.IsLearner}
			if len(m.PeerURLs) > 0 {
				mh.peerURL = m.PeerURLs[0]
			}
			s.lastMembers = append(s.lastMembers, mh)
		}
	}
	// Without an answer from the Service, the members last listed are asked one by one.
	for _, m := range s.lastMembers {
		cp := *m
		cp.healthy = false
		t.members = append(t.members, &cp)
	}
	s.mu.Unlock()
	if sctx.Err() != nil {
		return
	}
	podIPs := map[string]string{}
	for _, p := range t.pods {
		podIPs[p.Name] = p.Status.PodIP
	}
	var wg sync.WaitGroup
	for _, m := range t.members {
		ip := podIPs[m.name]
		if m.name == "" || ip == "" {
			continue
		}
		pc := clients[m.name]
		if pc == nil || pc.ip != ip {
			if pc != nil {
				_ = pc.cli.Close()
				delete(clients, m.name)
			}
			host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", m.name, c.Name, c.Namespace)
			var pcli *clientv3.Client
			var err error
			if useTLS {
				pcli, err = framework.EtcdClientTLS(host, ip, fw.ClusterTLS(c, host), 2*time.Second)
			} else {
				pcli, err = clientv3.New(framework.ClientConfig([]string{"http://" + ip + ":2379"}, 2*time.Second))
			}
			if err != nil {
				continue
			}
			pc = &podClient{ip: ip, cli: pcli}
			clients[m.name] = pc
		}
		wg.Add(1)
		go func(m *memberHealth, pcli *clientv3.Client) {
			defer wg.Done()
			hctx, cancel := context.WithTimeout(sctx, 2*time.Second)
			defer cancel()
			st, err := pcli.Status(hctx, pcli.Endpoints()[0])
			m.healthy = err == nil && st.Header.MemberId == m.id
		}(m, pc.cli)
	}
	wg.Wait()
	if sctx.Err() != nil {
		return
	}
	sts := &appsv1.StatefulSet{}
	stsErr := k8s.Get(sctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, sts)
	cm := &corev1.ConfigMap{}
	cmErr := k8s.Get(sctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-config"}, cm)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if err == nil {
		s.truths++
	}
	violate := func(format string, args ...any) {
		msg := fmt.Sprintf("%s: ", statusAt.Format("15:04:05.000")) + fmt.Sprintf(format, args...)
		GinkgoWriter.Println("safety violation: " + msg)
		s.violations = append(s.violations, msg)
	}
	for _, m := range t.members {
		name := m.name
		if name == "" {
			name = memberOfPeerURL(c, m.peerURL)
		}
		if s.ids[name] == nil {
			s.ids[name] = map[uint64]bool{}
		}
		s.ids[name][m.id] = true
	}

	voters, healthy := t.voters(), t.healthyVoters()
	if err == nil && (s.fewestVoters == 0 || voters < s.fewestVoters) {
		s.fewestVoters = voters
	}
	quorum := voters/2 + 1
	if voters > 0 && healthy < quorum {
		if s.quorumLost.IsZero() {
			s.quorumLost = time.Now()
			GinkgoWriter.Printf("sampler: only %d of %d voters answer\n", healthy, voters)
		}
	} else {
		s.quorumLost = time.Time{}
	}
	avail := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)
	if avail != nil && avail.Status == metav1.ConditionTrue && !s.quorumLost.IsZero() && statusAt.Sub(s.quorumLost) > quorumGrace {
		violate("Available=True (%s) while only %d of %d voters have answered since %s",
			avail.Message, healthy, voters, s.quorumLost.Format("15:04:05.000"))
	}
	prog := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
	if s.changeDone != nil && cur.Status.ObservedGeneration >= s.changeGen && prog != nil &&
		prog.Status == metav1.ConditionFalse && prog.Reason == "Reconciled" && !s.changeDone(t) {
		violate("Progressing=False/Reconciled at generation %d while %s is not carried out (%d pods, %d/%d voters healthy)",
			cur.Status.ObservedGeneration, s.changeName, len(t.pods), healthy, voters)
	}
	if cmErr == nil && cm.Data["ETCD_INITIAL_CLUSTER_STATE"] == "new" {
		violate("ConfigMap %s asks for a new cluster after formation", cm.Name)
	} else if cmErr != nil && !apierrors.IsNotFound(cmErr) {
		GinkgoWriter.Printf("sampler: ConfigMap: %v\n", cmErr)
	}
	if stsErr == nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas < 3 {
		violate("StatefulSet %s has %d replicas, fewer than the 3 members", sts.Name, *sts.Spec.Replicas)
	}
}

// memberOfPeerURL is the member name in a stable peer URL, "" when it is not one.
func memberOfPeerURL(c *etcdv1beta1.EtcdCluster, peerURL string) string {
	host, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(peerURL, "https://"), "http://"), ".")
	if strings.HasPrefix(host, c.Name+"-") {
		return host
	}
	return ""
}

// expectChange makes every later sample check that the status does not call the cluster reconciled at
// generation gen or later before done holds.
func (s *safetySampler) expectChange(gen int64, name string, done func(safetyTruth) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changeGen, s.changeName, s.changeDone = gen, name, done
}

// idsOf returns every member ID seen for name.
func (s *safetySampler) idsOf(name string) map[uint64]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint64]bool{}
	for id := range s.ids[name] {
		out[id] = true
	}
	return out
}

// leastVoters returns the fewest voting members etcd listed in any sample so far.
func (s *safetySampler) leastVoters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fewestVoters
}

func (s *safetySampler) halt() {
	s.cancel()
	<-s.done
}

// Fewest samples, and fewest with etcd's member list, for a sampler to prove anything.
const (
	minSafetySamples = 20
	minSafetyTruths  = 10
)

// verify stops the sampler and fails on any untrue claim it saw. A scenario that ended quickly, or a
// sampler slowed by a busy machine, samples the settled cluster a little longer first: the samples
// after the event are checked like the others.
func (s *safetySampler) verify() {
	counts := func() (int, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.samples, s.truths
	}
	Eventually(func() bool {
		samples, truths := counts()
		return samples >= minSafetySamples && truths >= minSafetyTruths
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue())
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	GinkgoWriter.Printf("status sampler: %d samples, %d with etcd's member list, %d violations\n", s.samples, s.truths, len(s.violations))
	ExpectWithOffset(1, s.samples).To(BeNumerically(">=", minSafetySamples), "too few status samples to prove anything")
	ExpectWithOffset(1, s.truths).To(BeNumerically(">=", minSafetyTruths), "too few samples of etcd's member list")
	ExpectWithOffset(1, s.violations).To(BeEmpty(), "the status claimed what was not true")
}

// logCertificateNames prints the names the cluster's server and peer certificates carry.
func logCertificateNames(c *etcdv1beta1.EtcdCluster) {
	for _, name := range []string{c.Name + "-server-tls", c.Name + "-peer-tls"} {
		secret := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret); err != nil {
			GinkgoWriter.Printf("certificate %s: %v\n", name, err)
			continue
		}
		block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		if block == nil {
			GinkgoWriter.Printf("certificate %s: no PEM block\n", name)
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			GinkgoWriter.Printf("certificate %s: %v\n", name, err)
			continue
		}
		GinkgoWriter.Printf("certificate %s (issued %s): %s\n", name, cert.NotBefore.Format(time.RFC3339),
			strings.Join(cert.DNSNames, ", "))
	}
}

// logOperator prints the operator's log lines about namespace ns.
func logOperator(ns string) {
	out, err := fw.Kubectl("logs", "-n", operatorNamespace, "deploy/"+operatorDeployment)
	if err != nil {
		GinkgoWriter.Printf("operator log: %v\n", err)
		return
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ns) {
			GinkgoWriter.Println("operator: " + line)
		}
	}
}
