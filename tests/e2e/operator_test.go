//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Specs that change the operator itself (its image, flags or pod) are Serial: the suite runs its other specs
// in parallel processes, whose clusters the same operator reconciles meanwhile.

// leaderElectionID is the operator's leader lease (cmd/main.go).
const leaderElectionID = "etcd-operator.etcd.seedops.io"

// rollOperatorBackAtCleanup records the operator Deployment's pod template and rolls the operator back to it
// when the spec ends. The function it returns rolls back at once (the cleanup then has nothing left to do).
func rollOperatorBackAtCleanup() (rollBack func()) {
	original := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, original)).To(Succeed())
	restored := false
	rollBack = func() {
		if restored {
			return
		}
		By("rolling the operator back to its original pod template")
		rollOperator(func(d *appsv1.Deployment) { d.Spec.Template = original.Spec.Template }, "")
		restored = true
	}
	DeferCleanup(rollBack)
	return rollBack
}

// restartOperatorWithFlag rolls the operator to a pod whose --flag is value (replacing any --flag it had).
func restartOperatorWithFlag(flag, value string) {
	By("restarting the operator with --" + flag + "=" + value)
	rollOperator(func(d *appsv1.Deployment) {
		m := &d.Spec.Template.Spec.Containers[0]
		m.Args = slices.DeleteFunc(slices.Clone(m.Args), func(a string) bool { return strings.HasPrefix(a, "--"+flag+"=") })
		m.Args = append(m.Args, "--"+flag+"="+value)
	}, "")
}

// rollOperator changes the operator Deployment's pod template, waits for the rollout and returns the one
// operator pod of the new template.
func rollOperator(change func(*appsv1.Deployment), phase string) *corev1.Pod {
	Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d); err != nil {
			return err
		}
		change(d)
		return k8s.Update(ctx, d)
	}).WithTimeout(time.Minute).Should(Succeed())
	var pod *corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old operator pods still running")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		var current []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && envOf(&p.Spec.Containers[0], "E2E_FAILPOINT_PHASE") == phase {
				current = append(current, p)
			}
		}
		g.Expect(current).To(HaveLen(1), "pods of the new template")
		g.Expect(len(pods.Items)).To(Equal(1), "terminating operator pods")
		pod = &current[0]
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	// Ready is not leading: the change comes once the new pod holds the leader lease.
	EventuallyWithOffset(1, func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaderElectionID}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).To(Equal(pod.Name), "leader (the lease is held under the pod's name)")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return pod
}
