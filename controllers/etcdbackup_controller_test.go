package controllers

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/resources"
)

// envtest runs no Job controller and no kubelet: finishJob plays both for one backup Job, the way they
// report a run — a pod whose backup container terminated with the result as its termination message, then
// the Job's terminal conditions.
func finishJob(ctx context.Context, job *batchv1.Job, succeeded bool, message string) {
	finishJobAs(ctx, job, resources.BackupContainerName, succeeded, message)
}

// finishJobAs finishes job as finishJob does, its pod's container named container reporting message.
func finishJobAs(ctx context.Context, job *batchv1.Job, container string, succeeded bool, message string) {
	exit := int32(0)
	if !succeeded {
		exit = 1
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-run", Namespace: job.Namespace,
			Labels: map[string]string{batchv1.JobNameLabel: job.Name, resources.LabelManagedBy: resources.ManagedBy},
			// As the Job controller creates them: controlled by the Job.
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: job.Spec.Template.Spec,
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	if !succeeded {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, Image: "operator",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, StartedAt: now, FinishedAt: now}}}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())

	Expect(get(ctx, job)).To(Succeed())
	job.Status.StartTime = &now
	if succeeded {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		// From Kubernetes 1.31 the Job controller sets SuccessCriteriaMet before Complete, and the API server
		// requires it; 1.30's refuses it on a Job without a success policy.
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		if serverMinor >= 31 {
			job.Status.Conditions = append([]batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now}}, job.Status.Conditions...)
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now},
		}
	}
	Expect(k8sClient.Status().Update(ctx, job)).To(Succeed())
}

func resultJSON(key string, rev int64) string {
	b, err := json.Marshal(backup.Result{Info: backup.Info{Key: key, Location: "pvc://claim/" + key, SizeBytes: 20512, Revision: rev,
		SHA256: "ab", EtcdVersion: "3.5.9", StartTime: time.Now().UTC(), FinishTime: time.Now().UTC()}})
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func newBackup(c *etcdv1beta1.EtcdCluster, name string) *etcdv1beta1.EtcdBackup {
	return &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterName: c.Name},
	}
}

func backupJob(ctx context.Context, b *etcdv1beta1.EtcdBackup) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupJobName(b), Namespace: b.Namespace}}
	Eventually(func() error { return get(ctx, job) }, timeout, interval).Should(Succeed())
	return job
}

var _ = Describe("Backups", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("runs an on-demand EtcdBackup as a Job and reports where the snapshot went", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		b := newBackup(c, "before-upgrade-"+c.Name)
		Expect(k8sClient.Create(ctx, b)).To(Succeed())

		job := backupJob(ctx, b)
		Expect(job.OwnerReferences).To(ConsistOf(HaveField("UID", b.UID)))
		Expect(job.Labels).To(HaveKeyWithValue(resources.LabelBackupKind, resources.BackupKindOnDemand))
		Expect(job.Labels).To(HaveKeyWithValue(resources.LabelInstance, c.Name))
		pod := job.Spec.Template.Spec
		Expect(pod.AutomountServiceAccountToken).To(Equal(ptr.To(false)), "backup pods need no API access")
		Expect(pod.Containers[0].Args).To(ContainElements("backup", "--kind=on-demand", "--pvc-claim="+resources.BackupPVCName(c)))
		// The default destination: a claim that outlives the cluster (no owner reference).
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.BackupPVCName(c)), pvc)).To(Succeed())
		Expect(pvc.OwnerReferences).To(BeEmpty())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupPending))
			g.Expect(b.Status.JobName).To(Equal(job.Name))
			g.Expect(b.Status.Destination.PVC.ClaimName).To(Equal(resources.BackupPVCName(c)))
		}, timeout, interval).Should(Succeed())

		key := "etcd-a/" + c.Name + "/on-demand/" + c.Name + "-20261122T120000Z-r77.db"
		finishJob(ctx, job, true, resultJSON(key, 77))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupSucceeded))
			g.Expect(b.Status.Key).To(Equal(key))
			g.Expect(b.Status.Location).To(Equal("pvc://claim/" + key))
			g.Expect(b.Status.Revision).To(Equal(int64(77)))
			g.Expect(b.Status.SizeBytes).To(Equal(int64(20512)))
			g.Expect(b.Status.CompletionTime).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
		// The cluster reports its newest backup, whatever its kind.
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.LastBackupLocation).To(Equal("pvc://claim/" + key))
			g.Expect(c.Status.LastBackupTime).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
	})

	It("reports a failed on-demand backup with the reason the pod gave", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		b := newBackup(c, "doomed-"+c.Name)
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		finishJob(ctx, backupJob(ctx, b), false, `{"error":"snapshot from http://x:2379: context deadline exceeded"}`)
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupFailed))
			g.Expect(b.Status.Error).To(ContainSubstring("context deadline exceeded"))
		}, timeout, interval).Should(Succeed())
	})

	It("never takes a finished Job of its name that another EtcdBackup owns for its own", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		name := "nightly-" + c.Name
		// The Job of a deleted EtcdBackup of the same name, which succeeded and is not collected yet.
		gone := newBackup(c, name)
		gone.UID = "00000000-0000-0000-0000-00000000dead"
		Expect(k8sClient.Apply(ctx, resources.BackupJob(c, gone, resources.DefaultOptions()), client.FieldOwner("old-operator"))).To(Succeed())
		stale := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupJobName(gone), Namespace: c.Namespace}}
		Expect(get(ctx, stale)).To(Succeed())
		staleKey := "etcd-a/" + c.Name + "/on-demand/" + c.Name + "-20261122T010000Z-r3.db"
		finishJob(ctx, stale, true, resultJSON(staleKey, 3))

		b := newBackup(c, name)
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Error).To(And(ContainSubstring("Job "+stale.Name+" exists but is not this EtcdBackup's"),
				ContainSubstring(string(gone.UID))))
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupPending))
			g.Expect(b.Status.Key).To(BeEmpty(), "another backup's snapshot is not this one's")
			g.Expect(b.Status.JobName).To(BeEmpty())
		}, 2*time.Second, interval).Should(Succeed())
		Expect(get(ctx, stale)).To(Succeed())
		Expect(stale.OwnerReferences).To(ConsistOf(HaveField("UID", gone.UID)), "the other backup's Job is not adopted")
		events := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, events, client.InNamespace(c.Namespace))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Regarding.UID", b.UID), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Reason", ReasonJobNotOwned))))

		// Once the stale Job is gone, the backup runs a Job of its own.
		Expect(k8sClient.Delete(ctx, stale, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func(g Gomega) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupJobName(b), Namespace: b.Namespace}}
			g.Expect(get(ctx, job)).To(Succeed())
			g.Expect(metav1.IsControlledBy(job, b)).To(BeTrue())
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.JobName).To(Equal(job.Name))
			g.Expect(b.Status.Error).To(BeEmpty())
		}, timeout, interval).Should(Succeed())
	})

	It("waits for a cluster that does not exist yet, then backs it up", func() {
		c := newCluster(watchedNS)
		b := newBackup(c, "early-"+c.Name)
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, b)).To(Succeed())
			g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupPending))
			g.Expect(b.Status.Error).To(ContainSubstring("not found"))
		}, timeout, interval).Should(Succeed())
		createAndSettle(ctx, c)
		backupJob(ctx, b)
	})

	It("reports scheduled runs on the cluster: BackupSucceeded, last backup, and a failed run", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		pvc := &corev1.PersistentVolumeClaim{}
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.BackupPVCName(c)), pvc) }, timeout, interval).Should(Succeed())
		Expect(pvc.OwnerReferences).To(BeEmpty(), "deleting a cluster must not delete its backups")

		// What the CronJob controller would create from the job template.
		cj := &batchv1.CronJob{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.BackupCronJobName(c)), cj)).To(Succeed())
		run := func(name string) *batchv1.Job {
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: cj.Spec.JobTemplate.Labels},
				Spec:       cj.Spec.JobTemplate.Spec,
			}
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			return job
		}
		key1 := "etcd-a/" + c.Name + "/scheduled/" + c.Name + "-20261122T020000Z-r10.db"
		finishJob(ctx, run(c.Name+"-backup-1"), true, resultJSON(key1, 10))
		Eventually(condition(ctx, c, etcdv1beta1.ConditionBackupSucceeded), timeout, interval).Should(statusIs(metav1.ConditionTrue, ReasonBackupSucceeded))
		Expect(c.Status.LastBackupLocation).To(HaveSuffix(key1))
		Expect(c.Status.LastScheduledBackupJob).To(Equal(c.Name + "-backup-1"))
		last := c.Status.LastBackupTime

		finishJob(ctx, run(c.Name+"-backup-2"), false, `{"error":"upload s3://etcd/x: Access Denied"}`)
		Eventually(condition(ctx, c, etcdv1beta1.ConditionBackupSucceeded), timeout, interval).Should(And(
			statusIs(metav1.ConditionFalse, ReasonBackupFailed), HaveField("Message", ContainSubstring("Access Denied"))))
		Expect(c.Status.LastBackupTime).To(Equal(last), "a failed run does not move the last backup")
		Expect(c.Status.LastBackupLocation).To(HaveSuffix(key1))
	})

	It("starts a restored cluster only once its EtcdBackup succeeded, restoring every member first", func() {
		c := newCluster(watchedNS)
		c.Spec.BackupSchedule = ""
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{BackupName: "snap-" + c.Name}}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonWaitingForBackup), HaveField("Message", ContainSubstring("not found"))))
		sts := managed(c)["StatefulSet"]
		Consistently(func() bool { return apierrors.IsNotFound(get(ctx, sts)) }, time.Second, interval).Should(BeTrue(),
			"nothing starts before the snapshot is known")

		// A backup of another (absent) cluster that has already succeeded, as after the source was deleted.
		b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "snap-" + c.Name, Namespace: c.Namespace},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: "deleted-source"}}
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Eventually(func() error { // the backup controller writes Pending meanwhile: retry on conflict
			Expect(get(ctx, b)).To(Succeed())
			b.Status = etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Key: "etcd-a/old/on-demand/old-20261122T020000Z-r5.db",
				Destination: &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}}}
			return k8sClient.Status().Update(ctx, b)
		}, timeout, interval).Should(Succeed())

		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}
		Eventually(func() error { return get(ctx, set) }, timeout, interval).Should(Succeed())
		// The member gate runs first (a new cluster's template has it), then the restore.
		Expect(set.Spec.Template.Spec.InitContainers).To(HaveExactElements(
			HaveField("Name", resources.MemberGateContainerName),
			And(HaveField("Name", resources.RestoreContainerName),
				HaveField("Args", ContainElements("restore", "--key=etcd-a/old/on-demand/old-20261122T020000Z-r5.db", "--pvc-claim=old-backups")))))

		// A member whose snapshot fails verification: the cluster says so and stays down.
		makeMemberPods(ctx, c, 1, resources.Image(c, resources.DefaultOptions()))
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, 0)), pod)).To(Succeed())
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.RestoreContainerName, Image: "operator",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
				Message: `{"error":"snapshot failed verification: sha256 of snapshot.db is 00, its trailer says 01"}`}}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonRestoreFailed), HaveField("Message", ContainSubstring("failed verification"))))
	})

	It("drops the restore from the member template once every member's restore is recorded", func() {
		c := newCluster(watchedNS)
		c.Spec.BackupSchedule = ""
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}, Key: "etcd-a/old/on-demand/old-20261122T020000Z-r5.db"}}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}
		initNames := func() []string {
			if err := get(ctx, set); err != nil {
				return nil
			}
			var names []string
			for _, ic := range set.Spec.Template.Spec.InitContainers {
				names = append(names, ic.Name)
			}
			return names
		}
		Eventually(initNames, timeout, interval).Should(ContainElement(resources.RestoreContainerName))
		Consistently(initNames, time.Second, interval).Should(ContainElement(resources.RestoreContainerName),
			"the restore stays while no restore is recorded")

		// What computeStatus records once every member restored and the cluster is Available.
		Eventually(func() error {
			Expect(get(ctx, c)).To(Succeed())
			c.Status.RestoredFrom = "pvc://old-backups/etcd-a/old/on-demand/old-20261122T020000Z-r5.db"
			return k8sClient.Status().Update(ctx, c)
		}, timeout, interval).Should(Succeed())
		// A status write does not trigger a reconcile; the member pods' next change (here: their creation) does.
		makeMemberPods(ctx, c, 1, resources.Image(c, resources.DefaultOptions()))
		Eventually(initNames, timeout, interval).Should(HaveExactElements(resources.MemberGateContainerName))
		Expect(set.Spec.Template.Spec.Volumes).NotTo(ContainElement(HaveField("Name", "backups")), "nor the backup claim's volume")
		Expect(get(ctx, c)).To(Succeed())
		Expect(c.Status.RestoredFrom).NotTo(BeEmpty(), "the record of the restore is kept")
	})
})
