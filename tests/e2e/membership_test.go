//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Scaling, upgrades, healing and operator failover. They need the operator's membership logic
// (adding and removing etcd members, ordered restarts), so they carry the label "membership":
// `make test-e2e E2E_LABEL_FILTER=membership` runs them.
var _ = Describe("Membership changes", Label("membership"), func() {
	It("scales 3 → 5 → 3 with a writer running, losing no acknowledged write", func() {
		ns := fw.NewNamespace("scale")
		c := fw.NewCluster(ns, "scale", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		w := fw.StartWriter(c, "/e2e/scale")
		w.WaitProgress(20, time.Minute)

		start := time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 5), 2*time.Minute)
		framework.ReportDuration("scale 3 → 5", time.Since(start))
		expectAgreement(c, 5)
		w.WaitProgress(20, time.Minute)

		start = time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 3 })
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		framework.ReportDuration("scale 5 → 3", time.Since(start))
		expectAgreement(c, 3)
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
	})

	It("upgrades one member at a time, leader last, losing no acknowledged write", func() {
		ns := fw.NewNamespace("upgrade")
		c := fw.NewCluster(ns, "upgrade", etcdUpgradeFrom, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		putGet(c, "/e2e/before-upgrade", "kept")

		for _, to := range []string{etcdVersion, etcdMinorUpgradeTo} {
			By("upgrading to " + to)
			w := fw.StartWriter(c, "/e2e/upgrade-"+to)
			w.WaitProgress(20, time.Minute)
			obs := startRolloutObserver(c)
			start := time.Now()
			fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = to })
			Eventually(func(g Gomega) {
				for _, p := range fw.MemberPods(c) {
					g.Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository + ":v" + to))
				}
				cur := fw.GetCluster(c)
				g.Expect(cur.Status.CurrentVersion).To(Equal(to))
			}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
			fw.WaitAvailable(c, 5*time.Minute)
			framework.ReportDuration("upgrade to "+to, time.Since(start))
			replaced, maxDown, err := obs.stop()
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("restart order: %v\n", replaced)
			Expect(maxDown).To(BeNumerically("<=", 1), "more than one member was down at once")
			Expect(replaced).To(HaveLen(3), "each member restarted exactly once")
			for i, r := range replaced[:len(replaced)-1] {
				Expect(r.pod).NotTo(Equal(r.leaderBefore), "restart %d took down the leader before the followers", i+1)
			}
			expectVotingMembers(c, memberNames(c, 3), time.Minute)
			w.WaitProgress(20, time.Minute)
			w.StopAndVerify(c)
		}
		expectKey(c, "/e2e/before-upgrade", "kept")

		// The roll onto etcd 3.6 gave every member the operator's --max-learners: the next scale-up lets
		// the second new member join beside the first instead of after its promotion.
		By("scaling 3 → 5 on etcd " + etcdMinorUpgradeTo)
		start := time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 5), 2*time.Minute)
		framework.ReportDuration("scale 3 → 5 on etcd "+etcdMinorUpgradeTo, time.Since(start))
		expectAgreement(c, 5)
		Expect(slices.Collect(maps.Values(clusterEvents(c, corev1.EventTypeNormal, "MemberChange")))).To(
			ContainElement(ContainSubstring("as a learner (5 of 5 members), beside 1 learner(s)")), "the second learner joined after the first's promotion")
		expectKey(c, "/e2e/before-upgrade", "kept")
	})

	It("heals a member whose volume and pod are deleted together", func() {
		ns := fw.NewNamespace("heal")
		c := fw.NewCluster(ns, "heal", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		putGet(c, "/e2e/before-heal", "kept")
		w := fw.StartWriter(c, "/e2e/heal")
		w.WaitProgress(20, time.Minute)

		victim := "heal-1"
		before, err := memberList(c, "heal-0")
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim}, pvc)).To(Succeed())
		Expect(k8s.Delete(ctx, pvc)).To(Succeed())
		uid := deletePod(ns, victim)
		waitPodReplaced(ns, victim, uid, 5*time.Minute)
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		framework.ReportDuration("member healed after losing its volume", time.Since(start))

		after, err := memberList(c, "heal-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(memberID(after, victim)).NotTo(Equal(memberID(before, victim)), "the healed member is a new etcd member")
		newPVC := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim}, newPVC)).To(Succeed())
		Expect(newPVC.UID).NotTo(Equal(pvc.UID))
		// The new member has the data in its own store (a serializable read is answered locally).
		Eventually(func() (string, error) {
			return etcdctl(c, victim, "--endpoints="+localURL(c), "get", "/e2e/before-heal",
				"--print-value-only", "--consistency=s")
		}).WithTimeout(time.Minute).Should(ContainSubstring("kept"))
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
	})

	It("converges when the operator pod is killed in the middle of a scale-up", Serial, func() {
		ns := fw.NewNamespace("failover")
		c := fw.NewCluster(ns, "failover", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		w := fw.StartWriter(c, "/e2e/failover")
		w.WaitProgress(20, time.Minute)

		start := time.Now()
		fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 })
		By("waiting until the scale-up has begun")
		Eventually(func() int { return len(fw.MemberPods(c)) }).WithTimeout(2 * time.Minute).
			WithPolling(200 * time.Millisecond).Should(BeNumerically(">", 3))
		By("killing the operator")
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for i := range pods.Items {
			Expect(k8s.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
		}
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 5), 3*time.Minute)
		expectAgreement(c, 5)
		framework.ReportDuration("scale 3 → 5 with the operator killed midway", time.Since(start))
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
	})
})

func memberID(members []etcdMember, name string) uint64 {
	for _, m := range members {
		if m.Name == name {
			return m.ID
		}
	}
	return 0
}

// expectAgreement checks that etcd's member list, the member pods and the EtcdCluster status agree on n members.
func expectAgreement(c *etcdv1beta1.EtcdCluster, n int) {
	EventuallyWithOffset(1, func(g Gomega) {
		pods := fw.MemberPods(c)
		var podNames []string
		for _, p := range pods {
			g.Expect(p.DeletionTimestamp).To(BeNil())
			podNames = append(podNames, p.Name)
		}
		g.Expect(podNames).To(Equal(memberNames(c, n)))
		cur := fw.GetCluster(c)
		var statusNames []string
		for _, m := range cur.Status.Members {
			g.Expect(m.Healthy).To(BeTrue(), "member %s", m.Name)
			g.Expect(m.Learner).To(BeFalse(), "member %s", m.Name)
			statusNames = append(statusNames, m.Name)
		}
		slices.Sort(statusNames)
		g.Expect(statusNames).To(Equal(memberNames(c, n)))
		g.Expect(cur.Status.Replicas).To(Equal(int32(n)))
		g.Expect(cur.Status.ReadyReplicas).To(Equal(int32(n)))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// replacement is one member pod replaced during a rollout, with the leader seen just before.
type replacement struct {
	pod          string
	leaderBefore string
}

func (r replacement) String() string {
	return fmt.Sprintf("%s(leader before: %s)", r.pod, r.leaderBefore)
}

// rolloutObserver samples the member pods and the leader while a rollout runs: which pod was replaced when,
// who led just before, and the most members down at once.
type rolloutObserver struct {
	c      *etcdv1beta1.EtcdCluster
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	replaced []replacement
	maxDown  int
	err      error
}

func startRolloutObserver(c *etcdv1beta1.EtcdCluster) *rolloutObserver {
	octx, cancel := context.WithCancel(ctx)
	o := &rolloutObserver{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		// uids holds, per member name, the UID of its live pod, or "" while its replacement is awaited.
		uids := map[string]string{}
		leader := ""
		for octx.Err() == nil {
			pods := &corev1.PodList{}
			if err := k8s.List(octx, pods, client.InNamespace(c.Namespace),
				client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"}); err != nil {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			o.mu.Lock()
			down := 0
			seen := map[string]bool{}
			for i := range pods.Items {
				p := &pods.Items[i]
				seen[p.Name] = true
				live := p.DeletionTimestamp == nil
				if !live || !framework.PodReady(p) {
					down++
				}
				known, ok := uids[p.Name]
				switch {
				case !ok:
					uids[p.Name] = ""
					if live {
						uids[p.Name] = string(p.UID)
					}
				case known == "":
					if live {
						uids[p.Name] = string(p.UID)
					}
				case !live || string(p.UID) != known:
					o.replaced = append(o.replaced, replacement{pod: p.Name, leaderBefore: leader})
					uids[p.Name] = ""
					if live {
						uids[p.Name] = string(p.UID)
					}
				}
			}
			for name, known := range uids {
				if seen[name] {
					continue
				}
				down++
				if known != "" {
					o.replaced = append(o.replaced, replacement{pod: name, leaderBefore: leader})
					uids[name] = ""
				}
			}
			o.maxDown = max(o.maxDown, down)
			o.mu.Unlock()
			if l, err := leaderPod(c); err == nil {
				leader = l
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	return o
}

func (o *rolloutObserver) stop() ([]replacement, int, error) { return o.stopAfterRolls(1) }

// stopAfterRolls is stop for a change that rolls the members rolls times: a member replaced more often is an error.
func (o *rolloutObserver) stopAfterRolls(rolls int) ([]replacement, int, error) {
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	names := make([]string, 0, len(o.replaced))
	times := map[string]int{}
	for _, r := range o.replaced {
		names = append(names, r.pod)
		times[r.pod]++
	}
	for _, n := range times {
		if n > rolls {
			o.err = fmt.Errorf("a member was replaced more than %d time(s): %s", rolls, strings.Join(names, ", "))
		}
	}
	return o.replaced, o.maxDown, o.err
}
