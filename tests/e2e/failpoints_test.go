//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/tests/framework"
)

// The failpoint e2e: the operator image built with the failpoints tag, armed through its
// environment, exits the process (exit code 77, no deferred status write) right after a step of scale-up,
// scale-down, upgrade, heal and certificate renewal. The kubelet restarts the container; the restarted
// operator must pick up from what it finds and converge, with every acknowledged write kept. Each phase
// rolls the Deployment to a fresh pod (its emptyDir counts the crashes), then checks on the node that each
// armed failpoint fired exactly as often as armed and the container restarted that many times.
//
// Not covered here: restore (a restore source is applied to a new cluster's StatefulSet, so its crash
// point is the StatefulSet failpoint, exercised by the other phases) and the backup Job.
var (
	failpointImage = os.Getenv("E2E_FAILPOINT_IMAGE")
	// kubeletRoots are the nodes' kubelet root directories, separated by ':' (one per node).
	kubeletRoots = filepath.SplitList(os.Getenv("E2E_KUBELET_ROOT"))
)

const (
	failpointStateDir = "/var/run/failpoints"
)

var _ = Describe("Operator crashes at failpoints", Label("failpoints", "membership"), Serial, func() {
	It("converges after a crash right after each step of scale, upgrade, heal and certificate renewal", func() {
		Expect(failpointImage).NotTo(BeEmpty(), "E2E_FAILPOINT_IMAGE: the failpoint build of the operator image (make test-e2e builds it)")
		Expect(kubeletRoots).NotTo(BeEmpty(), "E2E_KUBELET_ROOT: the nodes' kubelet root directories, to read the crash counts")
		rollOperatorBackAtCleanup()

		ns := fw.NewNamespace("failpoints")
		c := fw.NewCluster(ns, "fp", etcdUpgradeFrom, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)
		w := fw.StartWriter(c, "/e2e/failpoints")
		w.WaitProgress(20, time.Minute)

		phase := func(name string, armed map[string]int, change func(), converged func()) {
			By(name + " with " + armSpec(armed))
			start := time.Now()
			pod := armOperator(name, armed)
			change()
			converged()
			expectCrashes(pod, armed)
			framework.ReportDuration("failpoints: "+name, time.Since(start))
			w.WaitProgress(20, time.Minute)
		}

		phase("scale 3 → 5", map[string]int{failpoint.AfterMembershipStep: 2, failpoint.AfterStatefulSetApply: 1},
			func() { fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 5 }) },
			func() {
				fw.WaitAvailable(c, 8*time.Minute)
				expectVotingMembers(c, memberNames(c, 5), 3*time.Minute)
				expectAgreement(c, 5)
			})

		phase("scale 5 → 3", map[string]int{failpoint.AfterMembershipStep: 1, failpoint.AfterStatefulSetApply: 1},
			func() { fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = 3 }) },
			func() {
				fw.WaitAvailable(c, 8*time.Minute)
				expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
				Eventually(func() int { return len(fw.MemberPods(c)) }).WithTimeout(2 * time.Minute).Should(Equal(3))
				expectAgreement(c, 3)
			})

		phase("upgrade "+etcdUpgradeFrom+" → "+etcdVersion, map[string]int{failpoint.AfterMembershipStep: 1, failpoint.AfterStatefulSetApply: 1},
			func() { fw.UpdateCluster(c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = etcdVersion }) },
			func() {
				Eventually(func(g Gomega) {
					for _, p := range fw.MemberPods(c) {
						g.Expect(p.Spec.Containers[0].Image).To(Equal(etcdRepository + ":v" + etcdVersion))
					}
					g.Expect(fw.GetCluster(c).Status.CurrentVersion).To(Equal(etcdVersion))
				}).WithTimeout(10 * time.Minute).WithPolling(time.Second).Should(Succeed())
				fw.WaitAvailable(c, 5*time.Minute)
				expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
			})

		victim := c.Name + "-1"
		var lostPVC types.UID
		var lostID uint64
		phase("heal a member whose volume and pod are deleted", map[string]int{failpoint.AfterMembershipStep: 1},
			func() {
				members, err := memberList(c, c.Name+"-0")
				Expect(err).NotTo(HaveOccurred())
				lostID = memberID(members, victim)
				Expect(lostID).NotTo(BeZero())
				pvc := &corev1.PersistentVolumeClaim{}
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim}, pvc)).To(Succeed())
				lostPVC = pvc.UID
				Expect(k8s.Delete(ctx, pvc)).To(Succeed())
				deletePod(ns, victim)
			},
			func() {
				Eventually(func(g Gomega) {
					pvc := &corev1.PersistentVolumeClaim{}
					g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + victim}, pvc)).To(Succeed())
					g.Expect(pvc.UID).NotTo(Equal(lostPVC))
				}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
				// A new member, not the old one restarted on an empty volume.
				Eventually(func(g Gomega) {
					members, err := memberList(c, c.Name+"-0")
					g.Expect(err).NotTo(HaveOccurred())
					id := memberID(members, victim)
					g.Expect(id).NotTo(BeZero())
					g.Expect(id).NotTo(Equal(lostID), "member %s still has its old ID", victim)
				}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
				fw.WaitAvailable(c, 8*time.Minute)
				expectVotingMembers(c, memberNames(c, 3), 3*time.Minute)
				expectAgreement(c, 3)
			})

		serverSecret := &corev1.Secret{}
		var oldCert []byte
		phase("re-issue a deleted server certificate", map[string]int{failpoint.AfterCertificateIssued: 1},
			func() {
				Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-server-tls"}, serverSecret)).To(Succeed())
				oldCert = serverSecret.Data[corev1.TLSCertKey]
				Expect(k8s.Delete(ctx, serverSecret)).To(Succeed())
			},
			func() {
				Eventually(func(g Gomega) {
					s := &corev1.Secret{}
					g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(serverSecret), s)).To(Succeed())
					g.Expect(s.UID).NotTo(Equal(serverSecret.UID))
					g.Expect(s.Data[corev1.TLSCertKey]).NotTo(BeEmpty())
					g.Expect(s.Data[corev1.TLSCertKey]).NotTo(Equal(oldCert))
				}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
				fw.WaitAvailable(c, 5*time.Minute)
			})

		w.WaitProgress(20, time.Minute)
		w.StopAndVerify(c)
	})
})

func armSpec(armed map[string]int) string {
	var parts []string
	for _, name := range failpoint.All {
		if n := armed[name]; n > 0 {
			parts = append(parts, name+"="+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, ",")
}

// armOperator rolls the operator Deployment to a new pod of the failpoint build armed with armed, and
// returns that pod once it runs.
func armOperator(phase string, armed map[string]int) *corev1.Pod {
	return rollOperator(func(d *appsv1.Deployment) {
		spec := &d.Spec.Template.Spec
		m := &spec.Containers[0]
		m.Image = failpointImage
		setEnv(m, failpoint.EnvFailpoints, armSpec(armed))
		setEnv(m, failpoint.EnvStateDir, failpointStateDir)
		setEnv(m, "E2E_FAILPOINT_PHASE", phase) // a new pod per phase, even with the same failpoints armed
		if !hasVolume(spec.Volumes, "failpoints") {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "failpoints",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			m.VolumeMounts = append(m.VolumeMounts, corev1.VolumeMount{Name: "failpoints", MountPath: failpointStateDir})
		}
	}, phase)
}

// expectCrashes checks that each armed failpoint fired exactly as often as armed in pod (counted in its
// emptyDir, read on the node) and that every restart of the container is accounted for: by a failpoint, or by
// an exit the operator chose itself and recorded (its manager stopped, e.g. on a lost leader lease on a busy
// machine; reported, since this spec is about crash points, not about the API server's latency). A restart
// neither explains (a panic, an OOM kill) fails the spec.
func expectCrashes(pod *corev1.Pod, armed map[string]int) {
	total := 0
	dir := podVolumeDir(pod, "kubernetes.io~empty-dir", "failpoints")
	for _, name := range failpoint.All {
		want := armed[name]
		total += want
		b, err := os.ReadFile(filepath.Join(dir, name))
		if want == 0 {
			ExpectWithOffset(1, os.IsNotExist(err)).To(BeTrue(), "failpoint %s fired but was not armed", name)
			continue
		}
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "failpoint %s never fired", name)
		ExpectWithOffset(1, strings.TrimSpace(string(b))).To(Equal(strconv.Itoa(want)), "times failpoint %s fired", name)
	}
	// The last crash may have come right after the step the phase waited for: the kubelet reports the
	// restart (after its back-off) a little later. Once it did, the operator runs again.
	EventuallyWithOffset(1, func(g Gomega) {
		exits := recordedExits(dir)
		cur := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), cur)).To(Succeed())
		g.Expect(cur.Status.ContainerStatuses).NotTo(BeEmpty())
		st := cur.Status.ContainerStatuses[0]
		g.Expect(st.RestartCount).To(BeEquivalentTo(total+len(exits)),
			"operator container restarts: %d failpoint crashes and the exits it recorded %q; last ended: %s", total, exits, lastTermination(st))
		last := st.LastTerminationState.Terminated
		g.Expect(last).NotTo(BeNil())
		if strings.HasPrefix(last.Message, failpoint.ExitPrefix) {
			g.Expect(exits).NotTo(BeEmpty(), "an exit the operator did not record")
			g.Expect(last.ExitCode).To(BeEquivalentTo(1))
		} else {
			g.Expect(last.ExitCode).To(BeEquivalentTo(failpoint.ExitCode), "last ended: %s", lastTermination(st))
			g.Expect(last.Message).To(HavePrefix("failpoint "))
		}
		g.Expect(st.State.Running).NotTo(BeNil(), "operator container running again")
		GinkgoWriter.Printf("operator pod %s: %d restarts, last: %s\n", cur.Name, st.RestartCount, last.Message)
		for _, e := range exits {
			AddReportEntry("operator exit besides the failpoints", cur.Name+": "+e)
		}
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// recordedExits are the exits the operator recorded in its failpoint state directory dir (failpoint.RecordExit).
func recordedExits(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, failpoint.ExitsFile))
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// lastTermination says how a container last ended: its reason, exit code, time and last words.
func lastTermination(st corev1.ContainerStatus) string {
	t := st.LastTerminationState.Terminated
	if t == nil {
		return "never"
	}
	return fmt.Sprintf("%s (exit %d) at %s: %q", t.Reason, t.ExitCode, t.FinishedAt.Format(time.TimeOnly), t.Message)
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func envOf(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

// podVolumeDir is the directory of pod's volume on its node: under the kubelet root that holds the pod.
func podVolumeDir(pod *corev1.Pod, plugin, volume string) string {
	for _, root := range kubeletRoots {
		podDir := filepath.Join(root, "pods", string(pod.UID))
		if _, err := os.Stat(podDir); err == nil {
			return filepath.Join(podDir, "volumes", plugin, volume)
		}
	}
	Fail(fmt.Sprintf("pod %s (%s, node %s) is under none of the kubelet roots %v", pod.Name, pod.UID, pod.Spec.NodeName, kubeletRoots))
	return ""
}
