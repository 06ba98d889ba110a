package controllers

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// The pod cache can be ahead of the claim cache: after a member's claim and pod were deleted for its
// replacement, a reconcile can see the StatefulSet's new pod beside the old claim, still marked for
// replacement, and plan the deletion again. Seen under load: the new pod of a member replaced off a lost
// node was deleted 110 ms after it was created. The step reads the claim's fate from the API server, not
// from the cache, and leaves a pod whose claim is gone alone.
var _ = Describe("Deleting a member's data with a claim cache behind the pod cache", func() {
	ctx := context.Background()
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: unwatchedNS, Name: "stale"}}
	var r *EtcdClusterReconciler
	BeforeEach(func() { r = &EtcdClusterReconciler{Client: k8sClient} }) // the suite's client exists once it runs
	step := membership.Action{Type: membership.ActionDeleteVolume, Ordinal: 1}

	newClaim := func() *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.DataVolumeName + "-" + resources.MemberName(c, 1),
				Annotations: map[string]string{AnnotationReplace: "true"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
		return pvc
	}
	newPod := func() *corev1.Pod {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.MemberName(c, 1)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		return pod
	}
	// gone deletes obj at once, as pvc-protection and a kubelet would once they let it go.
	gone := func(obj client.Object) {
		Expect(k8sClient.Delete(ctx, obj, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() error {
			live := obj.DeepCopyObject().(client.Object)
			if err := k8sClient.Get(ctx, key(obj.GetNamespace(), obj.GetName()), live); err != nil {
				return client.IgnoreNotFound(err)
			}
			live.SetFinalizers(nil) // pvc-protection's: no controller of it runs here
			_ = k8sClient.Update(ctx, live)
			return fmt.Errorf("%s still there", obj.GetName())
		}, timeout, interval).Should(Succeed())
	}
	podKept := func(pod *corev1.Pod) {
		live := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, key(pod.Namespace, pod.Name), live)).To(Succeed())
		Expect(live.UID).To(Equal(pod.UID))
		Expect(live.DeletionTimestamp).To(BeNil(), "the new pod was deleted")
	}

	It("deletes the claim and its pod while the claim is there", func() {
		pvc, pod := newClaim(), newPod()
		obs := observation{pvcByOrdinal: map[int]*corev1.PersistentVolumeClaim{1: pvc}, podByOrdinal: map[int]*corev1.Pod{1: pod}}
		Expect(r.doStep(ctx, c, step, obs)).To(Succeed())
		live := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(ctx, key(pvc.Namespace, pvc.Name), live); err == nil {
			Expect(live.DeletionTimestamp).NotTo(BeNil(), "the claim was not deleted")
			gone(live)
		} else {
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(pod.Namespace, pod.Name), &corev1.Pod{}))).To(BeTrue(), "an unscheduled pod goes at once")
	})

	It("leaves the new pod alone when the cached claim is gone", func() {
		oldClaim, oldPod := newClaim(), newPod()
		gone(oldPod)
		gone(oldClaim)
		pod := newPod() // the StatefulSet's new pod; its new claim is not in the cache yet
		obs := observation{pvcByOrdinal: map[int]*corev1.PersistentVolumeClaim{1: oldClaim}, podByOrdinal: map[int]*corev1.Pod{1: pod}}
		Expect(r.doStep(ctx, c, step, obs)).To(Succeed())
		podKept(pod)
		gone(pod)
	})

	It("leaves the new pod and its new claim alone when the cache holds the old claim", func() {
		oldClaim, oldPod := newClaim(), newPod()
		gone(oldPod)
		gone(oldClaim)
		claim, pod := newClaim(), newPod()
		stale := oldClaim.DeepCopy()
		stale.DeletionTimestamp = &metav1.Time{Time: oldClaim.CreationTimestamp.Time} // seen being deleted
		for _, cached := range []*corev1.PersistentVolumeClaim{oldClaim, stale} {
			obs := observation{pvcByOrdinal: map[int]*corev1.PersistentVolumeClaim{1: cached}, podByOrdinal: map[int]*corev1.Pod{1: pod}}
			Expect(r.doStep(ctx, c, step, obs)).To(Succeed())
			podKept(pod)
			live := &corev1.PersistentVolumeClaim{}
			Expect(k8sClient.Get(ctx, key(claim.Namespace, claim.Name), live)).To(Succeed())
			Expect(live.UID).To(Equal(claim.UID))
			Expect(live.DeletionTimestamp).To(BeNil(), "the new claim was deleted")
		}
		gone(pod)
		gone(claim)
	})
})
