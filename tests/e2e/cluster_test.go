//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/kubectlplugin"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Creation, reads and writes, the disruption budget, pod security, pod deletions and cluster deletion, on one
// 3-member cluster, in order.
var _ = Describe("A 3-member EtcdCluster", Ordered, func() {
	var (
		ns string
		c  *etcdv1beta1.EtcdCluster
	)

	BeforeAll(func() {
		ns = fw.NewNamespace("cluster")
		c = fw.NewCluster(ns, "prod-etcd", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		framework.ReportDuration("time to a healthy 3-member cluster", fw.WaitAvailable(c, 5*time.Minute))
	})

	It("becomes Available with every member ready and reported in status", func() {
		cur := fw.GetCluster(c)
		Expect(cur.Status.Phase).To(Equal(etcdv1beta1.PhaseRunning))
		Expect(cur.Status.ReadyReplicas).To(Equal(int32(3)))
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(c)
			g.Expect(cur.Status.CurrentVersion).To(Equal(etcdVersion))
			g.Expect(cur.Status.Members).To(HaveLen(3))
			leaders := 0
			for _, m := range cur.Status.Members {
				g.Expect(m.Healthy).To(BeTrue(), "member %s", m.Name)
				if m.Leader {
					leaders++
				}
			}
			g.Expect(leaders).To(Equal(1))
		}).WithTimeout(time.Minute).Should(Succeed())
		for _, p := range fw.MemberPods(c) {
			Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository + ":v" + etcdVersion))
		}
	})

	It("has 3 started voting members, as etcdctl sees them from inside the cluster", func() {
		expectVotingMembers(c, memberNames(c, 3), time.Minute)
	})

	It("writes and reads back, inside the cluster and through the client Service", func() {
		_, err := etcdctl(c, "prod-etcd-0", "put", "/e2e/hello", "world")
		Expect(err).NotTo(HaveOccurred())
		// Read on another member, from its own local store.
		out, err := etcdctl(c, "prod-etcd-2", "--endpoints="+localURL(c), "get", "/e2e/hello",
			"--print-value-only")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(out)).To(Equal("world"))
		putGet(c, "/e2e/from-host", "ok")
	})

	It("serves etcd's metrics on every member's metrics port, without a client certificate", func() {
		// What the PodMonitor scrapes: the container port named metrics, plain HTTP.
		for _, p := range fw.MemberPods(c) {
			var port int32
			for _, cp := range p.Spec.Containers[0].Ports {
				if cp.Name == "metrics" {
					port = cp.ContainerPort
				}
			}
			Expect(port).NotTo(BeZero(), "pod %s has no container port named metrics", p.Name)
			url := fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, port)
			Eventually(func(g Gomega) {
				resp, err := http.Get(url) //nolint:gosec // the member's metrics listener on the node
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
				g.Expect(string(body)).To(MatchRegexp(`(?m)^etcd_server_has_leader 1$`), "member %s", p.Name)
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}
	})

	It("is shown by kubectl etcd status and reached through kubectl etcd etcdctl", func() {
		// A member's version and database size come from the operator's own look at it, which a member
		// whose name does not resolve yet (a pod seconds old) misses; the operator looks again within its
		// step interval.
		Eventually(func(g Gomega) {
			out, err := plugin("status", "-n", ns, c.Name)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("EtcdCluster %s in namespace %s", c.Name, ns))
			g.Expect(out).To(MatchRegexp(`(?m)^\s+Available\s+True\s+QuorumHealthy`))
			leaders := 0
			for _, name := range memberNames(c, 3) {
				// NAME ID ROLE LEADER HEALTHY VERSION ...: every member a healthy voter on the cluster's version.
				row := regexp.MustCompile(`(?m)^\s+` + name + `\s+[0-9a-f]+\s+voter\s+(\*\s+)?yes\s+` + regexp.QuoteMeta(etcdVersion) + `\s`)
				match := row.FindStringSubmatch(out)
				g.Expect(match).NotTo(BeNil(), "no healthy voter row for %s in:\n%s", name, out)
				if match[1] != "" {
					leaders++
				}
			}
			g.Expect(leaders).To(Equal(1), out)
		}).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())

		out, err := plugin("etcdctl", "-n", ns, c.Name, "--", "member", "list")
		Expect(err).NotTo(HaveOccurred(), out)
		for _, name := range memberNames(c, 3) {
			Expect(out).To(ContainSubstring(", started, %s, ", name))
		}
	})

	It("defragments every member in turn on kubectl etcd defrag, leader last, restarting none", func() {
		pods, restarts, warned := podUIDs(c), etcdRestarts(c), clusterEvents(c, corev1.EventTypeWarning, "QuorumLost", "MembersUnhealthy")
		out, err := plugin("defrag", "-n", ns, c.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		cur := fw.GetCluster(c)
		request := cur.Annotations[etcdv1beta1.DefragmentAnnotation]
		Expect(request).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			st := fw.GetCluster(c).Status.Defragmentation
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.LastRequest).To(Equal(request))
			g.Expect(st.Current).To(BeNil())
			g.Expect(st.LastCompletionTime).NotTo(BeNil())
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		// The completion event lists the members in the order they were done: the leader last.
		var leader string
		for _, m := range fw.GetCluster(c).Status.Members {
			if m.Leader {
				leader = m.Name
			}
		}
		// Events are written after the status that reports the completion (the recorder sends them on its own).
		Eventually(func(g Gomega) {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var completed []string
			for _, e := range events.Items {
				if e.Regarding.Name == c.Name && e.Reason == "DefragmentationCompleted" {
					completed = append(completed, e.Note)
				}
			}
			g.Expect(completed).To(ConsistOf(MatchRegexp(`\[\S+ \S+ ` + regexp.QuoteMeta(leader) + `\]`)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// Routine maintenance is no outage: while the leader defragments, the others may elect another
		// leader, which must not be reported as members unhealthy or quorum lost.
		var news []string
		for key, warning := range clusterEvents(c, corev1.EventTypeWarning, "QuorumLost", "MembersUnhealthy") {
			if _, ok := warned[key]; !ok {
				news = append(news, warning)
			}
		}
		Expect(news).To(BeEmpty(), "warnings during the defragmentation")
		Eventually(func(g Gomega) { expectSamePods(g, c, pods) }).Should(Succeed())
		Expect(etcdRestarts(c)).To(Equal(restarts), "an etcd container restarted")
		out, err = plugin("status", "-n", ns, c.Name)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^Defragmentation:\n  Last:\s+\S+ ago`))
	})

	It("keeps quorum with a PodDisruptionBudget of minAvailable 2", func() {
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, pdb)).To(Succeed())
		Expect(pdb.Spec.MinAvailable).NotTo(BeNil())
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(2))
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
			g.Expect(pdb.Status.CurrentHealthy).To(Equal(int32(3)))
			g.Expect(pdb.Status.DisruptionsAllowed).To(Equal(int32(1)))
		}).WithTimeout(time.Minute).Should(Succeed())
	})

	It("has a backup CronJob with the schedule", func() {
		cj := &batchv1.CronJob{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-backup"}, cj)).To(Succeed())
		Expect(cj.Spec.Schedule).To(Equal("0 2 * * *"))
	})

	It("runs every pod under the restricted Pod Security Standard", func() {
		// The namespaces enforce restricted, so every pod that exists was admitted under it; a server-side
		// dry run of the label also re-checks the running pods and warns about any that would violate it.
		for _, n := range []string{ns, operatorNamespace} {
			nsObj := &corev1.Namespace{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: n}, nsObj)).To(Succeed())
			Expect(nsObj.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"), "namespace %s", n)
			_, stderr, err := framework.Run(kubectl, "label", "namespace", n, "--dry-run=server", "--overwrite",
				"pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
			Expect(err).NotTo(HaveOccurred())
			Expect(stderr).NotTo(ContainSubstring("violate"), "namespace %s", n)
		}
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace))).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range append(pods.Items, fw.MemberPods(c)...) {
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), "pod %s", p.Name)
			for _, ctr := range p.Spec.Containers {
				Expect(ctr.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "pod %s", p.Name)
				Expect(ctr.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), "pod %s", p.Name)
			}
		}
	})

	Context("data survives", func() {
		It("deleting a single member pod", func() {
			w := fw.StartWriter(c, "/e2e/one-pod")
			w.WaitProgress(20, time.Minute)
			leader, err := leaderPod(c)
			Expect(err).NotTo(HaveOccurred())
			victim := "prod-etcd-0"
			if leader == victim {
				victim = "prod-etcd-1"
			}
			start := time.Now()
			uid := deletePod(ns, victim)
			waitPodReplaced(ns, victim, uid, 3*time.Minute)
			fw.WaitAvailable(c, 3*time.Minute)
			framework.ReportDuration("a deleted follower back and ready", time.Since(start))
			w.WaitProgress(20, time.Minute)
			w.StopAndVerify(c)
			expectKey(c, "/e2e/hello", "world")
			expectVotingMembers(c, memberNames(c, 3), time.Minute)
		})

		It("deleting the leader's pod", func() {
			w := fw.StartWriter(c, "/e2e/leader")
			w.WaitProgress(20, time.Minute)
			leader, err := leaderPod(c)
			Expect(err).NotTo(HaveOccurred())
			start := time.Now()
			uid := deletePod(ns, leader)
			waitPodReplaced(ns, leader, uid, 3*time.Minute)
			fw.WaitAvailable(c, 3*time.Minute)
			framework.ReportDuration("a deleted leader back and ready", time.Since(start))
			w.WaitProgress(20, time.Minute)
			w.StopAndVerify(c)
			expectKey(c, "/e2e/hello", "world")
			expectVotingMembers(c, memberNames(c, 3), time.Minute)
		})

		It("deleting all pods at once", func() {
			w := fw.StartWriter(c, "/e2e/all")
			w.WaitProgress(20, time.Minute)
			start := time.Now()
			uids := map[string]string{}
			for _, p := range fw.MemberPods(c) {
				uids[p.Name] = string(p.UID)
			}
			Expect(k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns),
				client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"})).To(Succeed())
			for name, uid := range uids {
				waitPodReplaced(ns, name, uid, 5*time.Minute)
			}
			fw.WaitAvailable(c, 3*time.Minute)
			framework.ReportDuration("all members deleted, back and ready", time.Since(start))
			w.WaitProgress(20, 2*time.Minute)
			w.StopAndVerify(c)
			expectKey(c, "/e2e/hello", "world")
			expectVotingMembers(c, memberNames(c, 3), time.Minute)
		})
	})

	It("removes its objects when deleted and keeps the volumes (default retention)", func() {
		Expect(k8s.Delete(ctx, c)).To(Succeed())
		fw.ExpectGone(c, 2*time.Minute)
		for _, obj := range []client.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name + "-client"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name + "-config"}},
			&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name}},
			&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name + "-backup"}},
		} {
			fw.ExpectGone(obj, 2*time.Minute)
		}
		Eventually(func() []corev1.Pod { return fw.MemberPods(c) }).WithTimeout(2 * time.Minute).Should(BeEmpty())
		pvcs := &corev1.PersistentVolumeClaimList{}
		Expect(k8s.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
		Expect(claimNames(pvcs.Items)).To(ConsistOf("data-"+c.Name+"-0", "data-"+c.Name+"-1", "data-"+c.Name+"-2", c.Name+"-backups"),
			"the default policy keeps member volumes, and backups always outlive their cluster")
	})
})

var _ = Describe("An EtcdCluster with pvcRetentionPolicy whenDeleted: Delete", func() {
	It("removes its volumes with it", func() {
		ns := fw.NewNamespace("retention")
		c := fw.NewCluster(ns, "scratch", etcdVersion, 1)
		c.Spec.PVCRetentionPolicy.WhenDeleted = etcdv1beta1.DeleteVolume
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 3*time.Minute)
		putGet(c, "/e2e/k", "v")
		pvcs := &corev1.PersistentVolumeClaimList{}
		Expect(k8s.List(ctx, pvcs, client.InNamespace(ns))).To(Succeed())
		Expect(claimNames(pvcs.Items)).To(ConsistOf("data-"+c.Name+"-0", c.Name+"-backups"))

		Expect(k8s.Delete(ctx, c)).To(Succeed())
		fw.ExpectGone(c, 2*time.Minute)
		// Member volumes go with the cluster; the backup claim never does (backups outlive their cluster).
		Eventually(func() ([]string, error) {
			l := &corev1.PersistentVolumeClaimList{}
			err := k8s.List(ctx, l, client.InNamespace(ns))
			return claimNames(l.Items), err
		}).WithTimeout(2 * time.Minute).Should(ConsistOf(c.Name + "-backups"))
	})
})

func claimNames(claims []corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, p := range claims {
		out = append(out, p.Name)
	}
	return out
}

// deletePod deletes a pod and returns its UID, to recognise its replacement.
func deletePod(ns, name string) string {
	p := &corev1.Pod{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	ExpectWithOffset(1, k8s.Delete(ctx, p)).To(Succeed())
	GinkgoWriter.Printf("deleted pod %s (%s)\n", name, p.UID)
	return string(p.UID)
}

// errorIfNotEmpty is what a command wrote on stderr, as an error.
func errorIfNotEmpty(stderr string) error {
	if strings.TrimSpace(stderr) == "" {
		return nil
	}
	return errors.New(stderr)
}

// plugin runs `kubectl etcd` with args: the plugin's own code, in process, against the node (KUBECONFIG).
func plugin(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := kubectlplugin.NewRootCommand(kubectlplugin.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, "e2e")
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errors.Join(err, errorIfNotEmpty(errOut.String()))
}
