package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// The namespace controller takes a while to delete what a namespace holds; until it reaches a cluster, the
// cluster's reconciles find their objects going and cannot create new ones there (the API server refuses
// any creation in a namespace being deleted). That is the end of the cluster, not a failure to retry.
var _ = Describe("A cluster whose namespace is being deleted", func() {
	clusterInNewNamespace := func(ctx context.Context) (*corev1.Namespace, *etcdv1beta1.EtcdCluster) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ending-"}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		c := newCluster(ns.Name)
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		return ns, c
	}

	It("reports why it cannot converge and returns no error to retry", func() {
		ctx := context.Background()
		ns, c := clusterInNewNamespace(ctx)

		// A reconciler of its own: the suite's manager does not watch this namespace.
		r := &EtcdClusterReconciler{Client: k8sClient, Scheme: k8sClient.Scheme(), APIReader: k8sClient,
			Recorder: &events.FakeRecorder{}, Options: resources.DefaultOptions()}
		req := ctrl.Request{NamespacedName: key(c.Namespace, c.Name)}
		Eventually(func(g Gomega) {
			_, err := r.Reconcile(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(get(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}})).To(Succeed())
		}, timeout, interval).Should(Succeed())

		// envtest runs no namespace controller: the namespace stays in Terminating, as a real one does while
		// its content goes. One of the cluster's objects is gone already.
		Expect(k8sClient.Delete(ctx, ns)).To(Succeed())
		Expect(k8sClient.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}})).To(Succeed())

		_, err := r.Reconcile(ctx, req)
		Expect(err).NotTo(HaveOccurred(), "a write refused in a namespace being deleted is not retried as a failure")
		Expect(get(ctx, c)).To(Succeed())
		progressing := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)
		Expect(progressing).NotTo(BeNil())
		Expect(progressing.Message).To(ContainSubstring("being terminated"), "status still says why the cluster does not converge")
	})

	It("does not retry a backup whose Job cannot be created there", func() {
		ctx := context.Background()
		ns, c := clusterInNewNamespace(ctx)
		b := newBackup(c, "last")
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Expect(k8sClient.Delete(ctx, ns)).To(Succeed())

		r := &EtcdBackupReconciler{Client: k8sClient, Scheme: k8sClient.Scheme(), Recorder: &events.FakeRecorder{},
			Options: resources.DefaultOptions()}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(b.Namespace, b.Name)})
		Expect(err).NotTo(HaveOccurred(), "a write refused in a namespace being deleted is not retried as a failure")
		err = get(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: resources.BackupJobName(b)}})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the backup's Job: %v", err)
		Expect(get(ctx, b)).To(Succeed())
		Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupPending))
	})
})
