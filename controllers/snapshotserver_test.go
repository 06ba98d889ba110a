package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/resources"
)

var _ = Describe("Snapshot server", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("serves a claim's snapshot to the restoring members, says what they wait for, and goes once the restore is recorded", func() {
		const snapshot = "etcd-a/old/on-demand/old-20261122T020000Z-r5.db"
		c := newCluster(watchedNS)
		c.Spec.BackupSchedule = ""
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}, Key: snapshot}}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		name := resources.SnapshotServerName(c)
		meta := metav1.ObjectMeta{Name: name, Namespace: c.Namespace}

		server := &appsv1.StatefulSet{ObjectMeta: meta}
		Eventually(func() error { return get(ctx, server) }, timeout, interval).Should(Succeed())
		Expect(get(ctx, c)).To(Succeed())
		Expect(server.Spec.Template.Spec.Containers[0].Args).To(ContainElements("serve-snapshot", "--key="+snapshot, "--pvc-claim=old-backups"))
		Expect(server.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "old-backups")))
		secret := &corev1.Secret{ObjectMeta: meta}
		for _, o := range []client.Object{server, &corev1.Service{ObjectMeta: meta}, &networkingv1.NetworkPolicy{ObjectMeta: meta}, secret} {
			Expect(get(ctx, o)).To(Succeed())
			Expect(metav1.IsControlledBy(o, c)).To(BeTrue(), "%T %s goes with the cluster", o, name)
		}
		Expect(secret.Data[resources.SnapshotServerTokenKey]).To(HaveLen(43), "a random 32-byte token")

		// The members download from it: no claim mounted, the token from the Secret.
		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}
		Eventually(func() error { return get(ctx, set) }, timeout, interval).Should(Succeed())
		Expect(set.Spec.Template.Spec.Volumes).NotTo(ContainElement(HaveField("Name", "backups")))
		Expect(set.Spec.Template.Spec.InitContainers).To(ContainElement(And(HaveField("Name", resources.RestoreContainerName),
			HaveField("Args", ContainElement("--snapshot-server="+resources.SnapshotServerURL(c, resources.DefaultOptions()))),
			HaveField("Env", ContainElement(And(HaveField("Name", backup.SnapshotTokenEnv),
				HaveField("ValueFrom.SecretKeyRef.Name", name), HaveField("ValueFrom.SecretKeyRef.Key", resources.SnapshotServerTokenKey)))))))

		// envtest runs no StatefulSet controller: no server pod yet, then one the scheduler cannot place.
		makeMemberPods(ctx, c, 1, resources.Image(c, resources.DefaultOptions()))
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonWaitingForSnapshotServer), HaveField("Message", ContainSubstring("not created yet"))))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentSnapshotServer)},
			Spec:       server.Spec.Template.Spec,
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 2 node(s) had volume node affinity conflict, 1 node(s) were unschedulable.", LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonWaitingForSnapshotServer),
			HaveField("Message", And(ContainSubstring("backup claim old-backups"), ContainSubstring("volume node affinity conflict")))))

		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).ShouldNot(
			HaveField("Reason", ReasonWaitingForSnapshotServer))

		// What computeStatus records once every member restored: the server, its Service and policy go; the
		// token stays with the cluster.
		Eventually(func() error {
			Expect(get(ctx, c)).To(Succeed())
			c.Status.RestoredFrom = "pvc://old-backups/" + snapshot
			return k8sClient.Status().Update(ctx, c)
		}, timeout, interval).Should(Succeed())
		setPodReady(ctx, c, 0, false) // a member pod's change brings the next reconcile
		for _, o := range []client.Object{&appsv1.StatefulSet{ObjectMeta: meta}, &corev1.Service{ObjectMeta: meta}, &networkingv1.NetworkPolicy{ObjectMeta: meta}} {
			Eventually(func() bool { return apierrors.IsNotFound(get(ctx, o)) }, timeout, interval).Should(BeTrue(), "%T %s", o, name)
		}
		Expect(get(ctx, secret)).To(Succeed())
	})

	It("leaves S3 restores as they were: no server, the members read the bucket", func() {
		c := newCluster(watchedNS)
		c.Spec.BackupSchedule = ""
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			S3:  &etcdv1beta1.S3BackupDestination{Endpoint: "http://minio.backup.svc:9000", Bucket: "etcd", CredentialsSecretName: "s3-credentials"},
			Key: "etcd-a/old/on-demand/old-20261122T020000Z-r5.db"}}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}
		Eventually(func() error { return get(ctx, set) }, timeout, interval).Should(Succeed())
		Expect(set.Spec.Template.Spec.InitContainers).To(ContainElement(And(HaveField("Name", resources.RestoreContainerName),
			HaveField("Args", ContainElement("--s3-bucket=etcd")))))
		Expect(apierrors.IsNotFound(get(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.SnapshotServerName(c), Namespace: c.Namespace}}))).To(BeTrue())
	})
})
