package controllers

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// setEtcdStatus writes the etcd container's status of member pod i, as the kubelet would.
func setEtcdStatus(ctx context.Context, c *etcdv1beta1.EtcdCluster, i int, cs corev1.ContainerStatus) {
	pod := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
	cs.Name = resources.EtcdContainerName
	cs.Image = pod.Spec.Containers[0].Image
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

func etcdWaiting(reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
}

// podUID is the UID of member pod i ("" while it does not exist).
func podUID(ctx context.Context, c *etcdv1beta1.EtcdCluster, i int) types.UID {
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod); err != nil {
		return ""
	}
	return pod.UID
}

// degradedWarnings lists the Warning events that said the cluster's members cannot start.
func degradedWarnings(ctx context.Context, c *etcdv1beta1.EtcdCluster) ([]string, error) {
	events, err := eventsWithReason(ctx, c, ReasonMemberCannotStart)
	var out []string
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Note, etcdv1beta1.ConditionDegraded+"=True") {
			out = append(out, e.Note)
		}
	}
	return out, err
}

var _ = Describe("A version that cannot be pulled", func() {
	It("is reported while the cluster bootstraps, and a corrected version replaces only the pods in which etcd never ran", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		c.Spec.Version = "3.5.99"
		createAndSettle(ctx, c)
		missing := resources.Image(c, resources.DefaultOptions())
		makeMemberPods(ctx, c, 3, missing)
		pullFailure := fmt.Sprintf("failed to pull and unpack image %q: not found", missing)
		setEtcdStatus(ctx, c, 0, etcdWaiting("ErrImagePull", pullFailure))
		setEtcdStatus(ctx, c, 1, etcdWaiting("ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q", missing)))
		// Member 2's etcd has run (it crash-loops): its volume may hold a member's data, and it is never
		// replaced by this path.
		ran := etcdWaiting("CrashLoopBackOff", "back-off 10s restarting failed container")
		ran.RestartCount = 2
		ran.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
		setEtcdStatus(ctx, c, 2, ran)
		ranUID := podUID(ctx, c, 2)

		By("reporting the pods that cannot start, with their image and the kubelet's reason")
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonMemberCannotStart),
			HaveField("Message", And(
				ContainSubstring("pod %s: container etcd (image %s): ErrImagePull: %s", resources.MemberName(c, 0), missing, pullFailure),
				ContainSubstring("pod %s: container etcd (image %s): ImagePullBackOff", resources.MemberName(c, 1), missing)))))
		Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(Default)).To(statusIs(metav1.ConditionFalse, ReasonMemberCannotStart))
		Expect(condition(ctx, c, etcdv1beta1.ConditionAvailable)(Default)).To(statusIs(metav1.ConditionFalse, ReasonBootstrapping))
		Eventually(degradedWarnings, timeout, interval).WithArguments(ctx, c).Should(HaveLen(1))
		Expect(podDeletions(c.Namespace, resources.MemberName(c, 0))).To(BeEmpty(), "nothing to restart onto while the spec is unchanged")

		By("correcting spec.version")
		stuck := map[int]types.UID{0: podUID(ctx, c, 0), 1: podUID(ctx, c, 1)}
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Version = "3.5.9" })).To(Succeed())
		corrected := resources.Image(&etcdv1beta1.EtcdCluster{Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.9"}}, resources.DefaultOptions())
		for i, uid := range stuck {
			Eventually(func() types.UID { return podUID(ctx, c, i) }, timeout, interval).ShouldNot(Equal(uid),
				"the pod of member %d, in which etcd never ran, is deleted", i)
			// The StatefulSet controller recreates it on the current template (envtest runs none).
			if podUID(ctx, c, i) == "" {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i), Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentEtcd)},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainerName, Image: corrected}}},
				}
				Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			}
		}

		By("leaving the pod in which etcd ran, and reporting it")
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonMemberCannotStart),
			HaveField("Message", And(
				ContainSubstring("pod %s: container etcd (image %s): CrashLoopBackOff", resources.MemberName(c, 2), missing),
				Not(ContainSubstring(resources.MemberName(c, 0)+":")), Not(ContainSubstring(resources.MemberName(c, 1)+":"))))))
		Expect(podUID(ctx, c, 2)).To(Equal(ranUID))
		Expect(podDeletions(c.Namespace, resources.MemberName(c, 2))).To(BeEmpty())
		for i := range 2 {
			pod := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
			Expect(pod.Spec.Containers[0].Image).To(Equal(corrected))
			Expect(awaitPodDeletions(c.Namespace, resources.MemberName(c, i))).To(HaveLen(1), "member %d's pod is deleted once", i)
		}
		// The condition's reason stayed the same through the correction: one warning, not one per reconcile.
		Expect(degradedWarnings(ctx, c)).To(HaveLen(1))
	})
})
