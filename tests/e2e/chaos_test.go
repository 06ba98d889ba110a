//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/tests/framework"
)

// The chaos run: a writer runs while, at random moments, a random member pod is killed, the
// operator pod is killed, and one member's network is cut (iptables DROP inside the pod's network
// namespace) and later restored. One member fault at a time (the next waits until every member is ready
// again), so a majority is never down by design; operator kills come on top, also in the middle of a cut.
// At the end every acknowledged write must be readable and the cluster Available with all members voting.
// It prints the availability (share of successful write attempts) and the longest window without a
// successful write.
//
// On three nodes or more (make test-nodes leaves them up; E2E_NODE_FAULT set), a member's node is also powered
// off and partitioned, each for less than --heal-after, and brought back.
//
// It carries the label "chaos" and is not part of `make test-e2e`: `make test-chaos CHAOS_DURATION=2m`
// runs it (CHAOS_SEED replays a schedule). It needs to run as root on the node (nsenter, iptables).
var _ = Describe("Chaos", Label("chaos"), Serial, func() {
	It("keeps every acknowledged write and quorum while members, the operator and a member's network fail", func() {
		duration := 2 * time.Minute
		if v := os.Getenv("CHAOS_DURATION"); v != "" {
			d, err := time.ParseDuration(v)
			Expect(err).NotTo(HaveOccurred(), "CHAOS_DURATION")
			duration = d
		}
		seed := uint64(time.Now().UnixNano())
		if v := os.Getenv("CHAOS_SEED"); v != "" {
			s, err := strconv.ParseUint(v, 10, 64)
			Expect(err).NotTo(HaveOccurred(), "CHAOS_SEED")
			seed = s
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		GinkgoWriter.Printf("chaos: duration %s, seed %d (CHAOS_SEED=%d replays this schedule)\n", duration, seed, seed)
		AddReportEntry("chaos seed", seed)

		nodeFaults := len(fw.Nodes()) >= 3 && framework.NodeFaultScript != ""
		AddReportEntry("node faults", nodeFaults)
		ns := fw.NewNamespace("chaos")
		c := fw.NewCluster(ns, "chaos", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 2*time.Minute)
		w := fw.StartWriter(c, "/e2e/chaos")
		w.WaitProgress(20, time.Minute)

		mon := startAckMonitor(w)
		start := time.Now()
		deadline := start.Add(duration)
		faults := map[string]int{}
		var timeline []string
		logf := func(format string, args ...any) {
			line := fmt.Sprintf("%6.1fs ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
			timeline = append(timeline, line)
			GinkgoWriter.Println("chaos: " + line)
		}

		var round []string
		for {
			// A random interval before the next fault.
			pause := time.Duration(2000+rng.IntN(8000)) * time.Millisecond
			if time.Until(deadline) <= pause {
				break
			}
			time.Sleep(pause)
			// Every round injects each kind of fault once, in random order.
			if len(round) == 0 {
				round = []string{"member-kill", "operator-kill", "network-cut"}
				// On several nodes: a member's node powered off and on again, and partitioned and healed, each
				// for less than --heal-after (the member comes back; a replacement is test-nodes' scenario).
				if nodeFaults {
					round = append(round, "node-power-cycle", "node-partition")
				}
				rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			}
			kind := round[0]
			round = round[1:]
			faults[kind]++
			switch kind {
			case "node-power-cycle", "node-partition":
				node, member := memberNodeAwayFromOperator(c)
				hold := time.Duration(10+rng.IntN(20)) * time.Second
				fault, undo := framework.PowerOff, framework.PowerOn
				if kind == "node-partition" {
					fault, undo = framework.Partition, framework.Heal
				}
				logf("%s: %s (member %s) for %s", kind, node, member, hold)
				fault(node)
				undone := false
				DeferCleanup(func() {
					if !undone {
						undo(node)
					}
				})
				time.Sleep(hold)
				undo(node)
				undone = true
				fw.WaitNodeReady(node, true, 2*time.Minute)
				logf("%s: %s is back", kind, node)
			case "operator-kill":
				logf("killing the operator")
				killOperator()
			case "member-kill":
				victim := memberNames(c, 3)[rng.IntN(3)]
				p := &corev1.Pod{}
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, p)).To(Succeed())
				logf("killing member %s", victim)
				Expect(k8s.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
				waitPodReplaced(ns, victim, string(p.UID), 5*time.Minute)
				logf("member %s is back (ready)", victim)
			case "network-cut":
				victim := memberNames(c, 3)[rng.IntN(3)]
				hold := time.Duration(10+rng.IntN(30)) * time.Second
				p := &corev1.Pod{}
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, p)).To(Succeed())
				Eventually(func() error {
					_, err := leaderFrom(c, p)
					return err
				}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Succeed(), "member %s does not answer before the cut", victim)
				logf("cutting the network of %s for %s", victim, hold)
				cutNetwork(p)
				restored := false
				DeferCleanup(func() {
					if !restored {
						restoreNetwork(p)
					}
				})
				// The cut is real: the member, which answered before, no longer answers on its pod IP.
				Eventually(func() error {
					_, err := leaderFrom(c, p)
					return err
				}).WithTimeout(30*time.Second).WithPolling(time.Second).ShouldNot(Succeed(), "member %s still answers through the cut", victim)
				if rng.IntN(3) == 0 {
					time.Sleep(hold / 2)
					logf("killing the operator during the cut")
					faults["operator-kill"]++
					killOperator()
					time.Sleep(hold / 2)
				} else {
					time.Sleep(hold)
				}
				restoreNetwork(p)
				restored = true
				logf("restored the network of %s", victim)
			}
			// One member fault at a time: the next waits until every member is ready again.
			Eventually(func(g Gomega) {
				pods := fw.MemberPods(c)
				g.Expect(pods).To(HaveLen(3))
				for i := range pods {
					g.Expect(pods[i].DeletionTimestamp).To(BeNil())
					g.Expect(framework.PodReady(&pods[i])).To(BeTrue(), "member %s is not ready", pods[i].Name)
				}
			}).WithTimeout(5 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		}
		chaos := time.Since(start)
		logf("chaos over; verifying")

		By("waiting for the operator, an Available cluster and three voting members")
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		}).WithTimeout(3 * time.Minute).Should(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
		expectAgreement(c, 3)
		w.WaitProgress(20, time.Minute)
		st := mon.stop()

		By("reading back every acknowledged write")
		w.StopAndVerify(c)

		total := 0
		for _, n := range faults {
			total += n
		}
		Expect(faults["member-kill"]+faults["network-cut"]).To(BeNumerically(">", 0), "the schedule injected no member fault")
		summary := fmt.Sprintf("chaos %s (seed %d): %d faults (%d member kills, %d operator kills, %d network cuts, "+
			"%d node power cycles, %d node partitions); "+
			"writes attempted %d, acknowledged %d, failed %d; availability %.2f%% of write attempts, %.2f%% of the time; "+
			"longest unavailable window %s (at %.1fs); all %d acknowledged writes verified",
			chaos.Round(time.Second), seed, total, faults["member-kill"], faults["operator-kill"], faults["network-cut"],
			faults["node-power-cycle"], faults["node-partition"],
			st.attempts, st.acked, st.failed, 100*float64(st.acked)/float64(max(st.attempts, 1)), 100*st.timeAvailable,
			st.longestGap.Round(10*time.Millisecond), st.longestGapAt.Sub(start).Seconds(), w.AckedCount())
		AddReportEntry("chaos", summary)
		GinkgoWriter.Println(summary)
		GinkgoWriter.Println("chaos timeline:\n  " + strings.Join(timeline, "\n  "))
		_, _ = fmt.Fprintln(GinkgoWriter)
		// Also on stdout even without -v, for `make test-chaos` logs.
		fmt.Println(summary)
	})
})

// killOperator deletes the operator's pods at once (no grace period).
func killOperator() {
	pods := &corev1.PodList{}
	ExpectWithOffset(1, k8s.List(ctx, pods, client.InNamespace(operatorNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			ExpectWithOffset(1, client.IgnoreNotFound(k8s.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)))).To(Succeed())
		}
	}
}

// chaosRule is the iptables rule spec (after the chain) that cuts a pod off: everything but loopback.
func chaosRules() [][]string {
	return [][]string{
		{"INPUT", "!", "-i", "lo", "-m", "comment", "--comment", "etcd-e2e-chaos", "-j", "DROP"},
		{"OUTPUT", "!", "-o", "lo", "-m", "comment", "--comment", "etcd-e2e-chaos", "-j", "DROP"},
	}
}

// podNetNS finds the network namespace of a running pod on this node: any process in the pod's cgroup
// (the sandbox's pause process or a container) shares it.
func podNetNS(p *corev1.Pod) (string, error) {
	uid := string(p.UID)
	marks := []string{"pod" + uid, "pod" + strings.ReplaceAll(uid, "-", "_")}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, m := range marks {
			if strings.Contains(string(cg), m+"/") || strings.Contains(string(cg), m+".slice") {
				return filepath.Join("/proc", e.Name(), "ns", "net"), nil
			}
		}
	}
	return "", fmt.Errorf("no process of pod %s/%s (uid %s) found in /proc: the chaos run must run as root on the node", p.Namespace, p.Name, uid)
}

var netMu sync.Mutex

func cutNetwork(p *corev1.Pod) {
	netMu.Lock()
	defer netMu.Unlock()
	netns, err := podNetNS(p)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, r := range chaosRules() {
		_, _, err := framework.Run("nsenter", append([]string{"--net=" + netns, "iptables", "-w", "-I"}, r...)...)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
}

// restoreNetwork removes the cut (the pod's sandbox, and so its network namespace, outlives container
// restarts; a pod that is gone took its namespace with it).
func restoreNetwork(p *corev1.Pod) {
	netMu.Lock()
	defer netMu.Unlock()
	netns, err := podNetNS(p)
	if err != nil {
		cur := &corev1.Pod{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(p), cur) == nil && cur.UID == p.UID {
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
		}
		return
	}
	for _, r := range chaosRules() {
		_, _, err := framework.Run("nsenter", append([]string{"--net=" + netns, "iptables", "-w", "-D"}, r...)...)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
}

// ackMonitor samples the writer's acknowledged count to find the windows without a successful write.
type ackMonitor struct {
	w          *framework.Writer
	stopCh     chan struct{}
	done       chan struct{}
	ackedStart int
	failStart  int
	started    time.Time

	longestGap   time.Duration
	longestGapAt time.Time // when that window began
	unavailable  time.Duration
}

type ackStats struct {
	attempts, acked, failed int
	longestGap              time.Duration
	longestGapAt            time.Time
	timeAvailable           float64
}

// unavailableAfter is how long without a successful write counts as unavailable time (the writer
// acknowledges a write every ~10-20 ms while the cluster serves).
const unavailableAfter = time.Second

func startAckMonitor(w *framework.Writer) *ackMonitor {
	m := &ackMonitor{w: w, stopCh: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	m.ackedStart, m.failStart = w.Counts()
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		last, lastAt := m.ackedStart, m.started
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		observe := func(now time.Time, final bool) {
			n := w.AckedCount()
			if n == last && !final {
				return
			}
			if gap := now.Sub(lastAt); gap > m.longestGap {
				m.longestGap, m.longestGapAt = gap, lastAt
			}
			if gap := now.Sub(lastAt); gap > unavailableAfter {
				m.unavailable += gap
			}
			last, lastAt = n, now
		}
		for {
			select {
			case <-m.stopCh:
				observe(time.Now(), true)
				return
			case now := <-tick.C:
				observe(now, false)
			}
		}
	}()
	return m
}

func (m *ackMonitor) stop() ackStats {
	close(m.stopCh)
	<-m.done
	ackedNow, failedNow := m.w.Counts()
	acked, failed := ackedNow-m.ackedStart, failedNow-m.failStart
	total := time.Since(m.started)
	return ackStats{attempts: acked + failed, acked: acked, failed: failed, longestGap: m.longestGap,
		longestGapAt: m.longestGapAt, timeAvailable: 1 - float64(m.unavailable)/float64(total)}
}
