package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// TestBackupOfCluster: a backup counts for the cluster whose UID it records; one without the record counts
// only when it started after the cluster was created.
func TestBackupOfCluster(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", UID: "uid-now", CreationTimestamp: created}}
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(created.Add(d)); return &t }
	for _, tc := range []struct {
		name    string
		uid     types.UID
		started *metav1.Time
		want    bool
	}{
		{"recorded as this cluster's", "uid-now", at(time.Hour), true},
		{"recorded as this cluster's, whatever its time", "uid-now", nil, true},
		{"recorded as a deleted namesake's", "uid-before", at(time.Hour), false},
		{"unrecorded, started after the cluster's creation", "", at(time.Hour), true},
		{"unrecorded, started before the cluster's creation", "", at(-time.Hour), false},
		{"unrecorded, started within the second of the cluster's creation", "", at(0), false},
		{"unrecorded, never started", "", nil, false},
	} {
		if got := backupOfCluster(c, tc.uid, tc.started); got != tc.want {
			t.Errorf("%s: backupOfCluster = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// collectGarbage does what envtest lacks a garbage collector for: it deletes the objects a deleted
// cluster owns. EtcdBackups and their Jobs, and the default backup claim, are not the cluster's.
func collectGarbage(ctx context.Context, c *etcdv1beta1.EtcdCluster) {
	owned := func(o client.Object) bool {
		for _, ref := range o.GetOwnerReferences() {
			if ref.UID == c.UID {
				return true
			}
		}
		return false
	}
	for _, o := range managed(c) {
		if err := get(ctx, o); err == nil && owned(o) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed())
		}
	}
	secrets := &corev1.SecretList{}
	Expect(k8sClient.List(ctx, secrets, client.InNamespace(c.Namespace))).To(Succeed())
	for i := range secrets.Items {
		if owned(&secrets.Items[i]) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &secrets.Items[i]))).To(Succeed())
		}
	}
	policies := &networkingv1.NetworkPolicyList{}
	Expect(k8sClient.List(ctx, policies, client.InNamespace(c.Namespace))).To(Succeed())
	for i := range policies.Items {
		if owned(&policies.Items[i]) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &policies.Items[i]))).To(Succeed())
		}
	}
}

var _ = Describe("Backups of a deleted cluster of the same name", func() {
	It("are neither reported nor restored by the cluster created after it", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		c.Spec.Recovery.QuorumLoss = etcdv1beta1.QuorumLossFromBackup
		spec := c.Spec.DeepCopy()
		createAndSettle(ctx, c)

		By("backing the first cluster up, on demand and on its schedule")
		b := newBackup(c, "old-"+c.Name)
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		job := backupJob(ctx, b)
		Expect(job.Labels).To(HaveKeyWithValue(resources.LabelClusterUID, string(c.UID)))
		oldKey := "etcd-a/" + c.Name + "/on-demand/" + c.Name + "-20261122T120000Z-r77.db"
		finishJob(ctx, job, true, resultJSON(oldKey, 77))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupSucceeded))
			g.Expect(b.Status.ClusterUID).To(Equal(c.UID))
		}, timeout, interval).Should(Succeed())
		// A scheduled run the CronJob's deletion left behind (an orphaning delete keeps a CronJob's Jobs).
		cj := &batchv1.CronJob{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.BackupCronJobName(c)), cj)).To(Succeed())
		Expect(cj.Spec.JobTemplate.Labels).To(HaveKeyWithValue(resources.LabelClusterUID, string(c.UID)))
		scheduled := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-backup-1", Namespace: c.Namespace,
			Labels: cj.Spec.JobTemplate.Labels}, Spec: cj.Spec.JobTemplate.Spec}
		Expect(k8sClient.Create(ctx, scheduled)).To(Succeed())
		finishJob(ctx, scheduled, true, resultJSON("etcd-a/"+c.Name+"/scheduled/"+c.Name+"-20261122T130000Z-r80.db", 80))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.LastScheduledBackupJob).To(Equal(scheduled.Name))
			g.Expect(c.Status.LastBackupTime).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		Expect((&EtcdClusterReconciler{Client: k8sClient}).recoveryBackups(ctx, c, nil)).NotTo(BeEmpty())

		By("deleting the cluster and creating it again under its name")
		Expect(k8sClient.Delete(ctx, c)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(get(ctx, c)) }, timeout, interval).Should(BeTrue())
		collectGarbage(ctx, c)
		again := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace}, Spec: *spec}
		createAndSettle(ctx, again)
		Expect(again.UID).NotTo(Equal(c.UID))

		Consistently(func(g Gomega) {
			g.Expect(get(ctx, again)).To(Succeed())
			g.Expect(again.Status.LastBackupTime).To(BeNil(), "the deleted cluster's backup is not this one's")
			g.Expect(again.Status.LastBackupLocation).To(BeEmpty())
			g.Expect(again.Status.LastScheduledBackupJob).To(BeEmpty())
			g.Expect(apimeta.FindStatusCondition(again.Status.Conditions, etcdv1beta1.ConditionBackupSucceeded)).To(BeNil())
			g.Expect(registrySeries(metricsPrefix+"backup_last_success_timestamp_seconds", again)).To(BeZero())
			g.Expect((&EtcdClusterReconciler{Client: k8sClient}).recoveryBackups(ctx, again, nil)).To(BeEmpty(),
				"a quorum loss must not restore the deleted cluster's data")
		}, 2*time.Second, interval).Should(Succeed())

		By("counting the new cluster's own backups")
		own := newBackup(again, "new-"+again.Name)
		Expect(k8sClient.Create(ctx, own)).To(Succeed())
		newKey := "etcd-a/" + c.Name + "/on-demand/" + c.Name + "-20261122T140000Z-r5.db"
		finishJob(ctx, backupJob(ctx, own), true, resultJSON(newKey, 5))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, again)).To(Succeed())
			g.Expect(again.Status.LastBackupLocation).To(Equal("pvc://claim/" + newKey))
			g.Expect(registrySeries(metricsPrefix+"backup_last_success_timestamp_seconds", again)).To(Equal(1))
			backups, err := (&EtcdClusterReconciler{Client: k8sClient}).recoveryBackups(ctx, again, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(backups).To(ConsistOf(HaveField("Backup.Location", "pvc://claim/"+newKey)))
		}, timeout, interval).Should(Succeed())
	})
})
