package controllers

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	alertrules "github.com/seedops/etcd-operator/config/prometheus"
	"github.com/seedops/etcd-operator/internal/resources"
)

const (
	timeout  = 20 * time.Second
	interval = 100 * time.Millisecond
)

var clusterSeq int

// newCluster returns the README's sample cluster under a fresh name.
func newCluster(ns string) *etcdv1beta1.EtcdCluster {
	clusterSeq++
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prod-etcd-%d", clusterSeq), Namespace: ns},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Version:        "3.5.9",
			Replicas:       3,
			StorageSize:    resource.MustParse("10Gi"),
			BackupSchedule: "0 2 * * *",
		},
	}
}

func key(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// managed lists every object the controller creates for a cluster with a backup schedule.
func managed(c *etcdv1beta1.EtcdCluster) map[string]client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: c.Namespace} }
	return map[string]client.Object{
		"ConfigMap":           &corev1.ConfigMap{ObjectMeta: meta(resources.ConfigMapName(c))},
		"peer Service":        &corev1.Service{ObjectMeta: meta(resources.PeerServiceName(c))},
		"client Service":      &corev1.Service{ObjectMeta: meta(resources.ClientServiceName(c))},
		"StatefulSet":         &appsv1.StatefulSet{ObjectMeta: meta(resources.StatefulSetName(c))},
		"PodDisruptionBudget": &policyv1.PodDisruptionBudget{ObjectMeta: meta(resources.PDBName(c))},
		"CronJob":             &batchv1.CronJob{ObjectMeta: meta(resources.BackupCronJobName(c))},
		"PodMonitor":          podMonitor(c),
		"PrometheusRule":      prometheusRule(c),
	}
}

// podMonitor and prometheusRule are the cluster's prometheus-operator objects, to read (the suite installs
// prometheus-operator's kinds).
func podMonitor(c *etcdv1beta1.EtcdCluster) *unstructured.Unstructured {
	return monitoringObject(c, resources.PodMonitorGVK, resources.PodMonitorName(c))
}

func prometheusRule(c *etcdv1beta1.EtcdCluster) *unstructured.Unstructured {
	return monitoringObject(c, resources.PrometheusRuleGVK, resources.PrometheusRuleName(c))
}

func monitoringObject(c *etcdv1beta1.EtcdCluster, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(c.Namespace)
	u.SetName(name)
	return u
}

func get(ctx context.Context, o client.Object) error {
	return k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o)
}

// createAndSettle creates the cluster and waits until every managed object exists and status describes
// the current generation.
func createAndSettle(ctx context.Context, c *etcdv1beta1.EtcdCluster) {
	Expect(k8sClient.Create(ctx, c)).To(Succeed())
	for kind, o := range managed(c) {
		Eventually(func() error { return get(ctx, o) }, timeout, interval).Should(Succeed(), kind)
	}
	Eventually(func(g Gomega) {
		g.Expect(get(ctx, c)).To(Succeed())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		// Certificates are reported once their Secrets' events come back after issuing them.
		g.Expect(c.Status.TLS).NotTo(BeNil())
		if c.Status.TLS.Enabled {
			g.Expect(c.Status.TLS.Certificates).To(HaveLen(4))
		}
	}, timeout, interval).Should(Succeed())
}

// makeMemberPods plays the StatefulSet controller and kubelet: envtest runs neither.
func makeMemberPods(ctx context.Context, c *etcdv1beta1.EtcdCluster, n int, image string) {
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i), Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentEtcd)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	}
}

func setPodReady(ctx context.Context, c *etcdv1beta1.EtcdCluster, i int, ready bool) {
	pod := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

func condition(ctx context.Context, c *etcdv1beta1.EtcdCluster, t string) func(g Gomega) metav1.Condition {
	return func(g Gomega) metav1.Condition {
		g.Expect(get(ctx, c)).To(Succeed())
		cond := meta.FindStatusCondition(c.Status.Conditions, t)
		g.Expect(cond).NotTo(BeNil(), t)
		return *cond
	}
}

func statusIs(st metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(HaveField("Status", st), HaveField("Reason", reason))
}

var _ = Describe("EtcdCluster controller", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("creates every managed object, owned by the cluster and shaped by the spec", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)

		for kind, o := range managed(c) {
			Expect(get(ctx, o)).To(Succeed())
			refs := o.GetOwnerReferences()
			Expect(refs).To(HaveLen(1), kind)
			Expect(refs[0].UID).To(Equal(c.UID), kind)
			Expect(*refs[0].Controller).To(BeTrue(), kind)
			Expect(*refs[0].BlockOwnerDeletion).To(BeTrue(), kind)
			Expect(o.GetLabels()).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy), kind)
		}

		sts := managed(c)["StatefulSet"].(*appsv1.StatefulSet)
		Expect(get(ctx, sts)).To(Succeed())
		Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
		Expect(sts.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
		Expect(sts.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
		Expect(sts.Spec.ServiceName).To(Equal(resources.PeerServiceName(c)))
		Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("gcr.io/etcd-development/etcd:v3.5.9"))
		Expect(sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("10Gi"))
		Expect(sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted).To(Equal(appsv1.RetainPersistentVolumeClaimRetentionPolicyType))

		peer := managed(c)["peer Service"].(*corev1.Service)
		Expect(get(ctx, peer)).To(Succeed())
		Expect(peer.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(peer.Spec.PublishNotReadyAddresses).To(BeTrue())

		pdb := managed(c)["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget)
		Expect(get(ctx, pdb)).To(Succeed())
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(2))

		cm := managed(c)["ConfigMap"].(*corev1.ConfigMap)
		Expect(get(ctx, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "new"))
		Expect(cm.Data["ETCD_INITIAL_CLUSTER"]).To(ContainSubstring(resources.MemberName(c, 2) + "="))

		cj := managed(c)["CronJob"].(*batchv1.CronJob)
		Expect(get(ctx, cj)).To(Succeed())
		Expect(cj.Spec.Schedule).To(Equal("0 2 * * *"))
		Expect(cj.Spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent))
	})

	It("reports truthful status: bootstrapping, available, degraded, quorum lost", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		Expect(c.Status.Phase).To(Equal(etcdv1beta1.PhasePending))
		Expect(meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(
			PointTo(statusIs(metav1.ConditionFalse, ReasonBootstrapping)))
		Expect(meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)).To(
			PointTo(statusIs(metav1.ConditionTrue, ReasonCreating)))
		for _, cond := range c.Status.Conditions {
			Expect(cond.ObservedGeneration).To(Equal(c.Generation), cond.Type)
		}
		Expect(c.Status.ClientEndpoint).To(Equal(fmt.Sprintf("https://%s-client.%s.svc.cluster.local:2379", c.Name, c.Namespace)))

		makeMemberPods(ctx, c, 3, resources.Image(c, resources.DefaultOptions()))
		for i := range 3 {
			setPodReady(ctx, c, i, true)
		}
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionTrue, ReasonQuorumHealthy))
		// This suite runs no etcd, so the operator truthfully cannot confirm membership: it waits.
		Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonWaiting), HaveField("Message", ContainSubstring("etcd is unreachable"))))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.Phase).To(Equal(etcdv1beta1.PhaseProgressing))
			g.Expect(c.Status.ReadyReplicas).To(Equal(int32(3)))
			g.Expect(c.Status.Members).To(HaveLen(3))
		}, timeout, interval).Should(Succeed())

		setPodReady(ctx, c, 2, false)
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonMembersUnhealthy), HaveField("Message", ContainSubstring(resources.MemberName(c, 2)))))
		Expect(condition(ctx, c, etcdv1beta1.ConditionAvailable)(Default)).To(statusIs(metav1.ConditionTrue, ReasonQuorumHealthy))

		setPodReady(ctx, c, 1, false)
		Eventually(condition(ctx, c, etcdv1beta1.ConditionAvailable), timeout, interval).Should(statusIs(metav1.ConditionFalse, ReasonQuorumLost))
		Eventually(func() etcdv1beta1.ClusterPhase { _ = get(ctx, c); return c.Status.Phase }, timeout, interval).Should(Equal(etcdv1beta1.PhaseUnavailable))
	})

	It("makes zero API writes in a steady-state reconcile", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		// Let the creation reconciles finish: status stops changing once every object exists.
		Eventually(func() int64 { _ = get(ctx, c); return c.Status.ObservedGeneration }, timeout, interval).Should(Equal(c.Generation))

		for round := range 3 {
			writes.reset()
			before := reconciles.Load()
			// An annotation change triggers a reconcile without changing the spec.
			Expect(get(ctx, c)).To(Succeed())
			c.Annotations = map[string]string{"test/round": fmt.Sprint(round)}
			Expect(k8sClient.Update(ctx, c)).To(Succeed())
			Eventually(reconciles.Load, timeout, interval).Should(BeNumerically(">", before))
			Expect(writes.about(c.Name)).To(BeEmpty(), "steady-state reconcile %d wrote", round)
		}
	})

	DescribeTable("undoes drift on every managed object",
		func(kind string, edit func(client.Object), check func(g Gomega, o client.Object)) {
			c := newCluster(watchedNS)
			createAndSettle(ctx, c)
			o := managed(c)[kind]
			Expect(get(ctx, o)).To(Succeed())
			uid := o.GetUID()

			if edit == nil {
				By("deleting the " + kind)
				Expect(k8sClient.Delete(ctx, o)).To(Succeed())
				Eventually(func(g Gomega) {
					fresh := managed(c)[kind]
					g.Expect(get(ctx, fresh)).To(Succeed())
					g.Expect(fresh.GetUID()).NotTo(Equal(uid))
				}, timeout, interval).Should(Succeed())
				return
			}
			By("editing the " + kind)
			Expect(retryUpdate(ctx, o, edit)).To(Succeed())
			Eventually(func(g Gomega) {
				fresh := managed(c)[kind]
				g.Expect(get(ctx, fresh)).To(Succeed())
				check(g, fresh)
			}, timeout, interval).Should(Succeed())
		},
		Entry("ConfigMap deleted", "ConfigMap", nil, nil),
		Entry("ConfigMap edited", "ConfigMap",
			func(o client.Object) { o.(*corev1.ConfigMap).Data["ETCD_INITIAL_CLUSTER_STATE"] = "existing" },
			func(g Gomega, o client.Object) {
				g.Expect(o.(*corev1.ConfigMap).Data).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "new"))
			}),
		Entry("peer Service deleted", "peer Service", nil, nil),
		Entry("peer Service edited", "peer Service",
			func(o client.Object) { o.(*corev1.Service).Spec.PublishNotReadyAddresses = false },
			func(g Gomega, o client.Object) {
				g.Expect(o.(*corev1.Service).Spec.PublishNotReadyAddresses).To(BeTrue())
			}),
		Entry("client Service deleted", "client Service", nil, nil),
		Entry("client Service edited", "client Service",
			func(o client.Object) { o.(*corev1.Service).Spec.Selector[resources.LabelInstance] = "someone-else" },
			func(g Gomega, o client.Object) {
				g.Expect(o.(*corev1.Service).Spec.Selector).To(HaveKeyWithValue(resources.LabelInstance, o.GetLabels()[resources.LabelInstance]))
			}),
		Entry("StatefulSet deleted", "StatefulSet", nil, nil),
		Entry("StatefulSet edited", "StatefulSet",
			func(o client.Object) {
				sts := o.(*appsv1.StatefulSet)
				sts.Spec.Replicas = ptr.To[int32](7)
				sts.Spec.Template.Spec.Containers[0].Image = "evil/etcd:latest"
			},
			func(g Gomega, o client.Object) {
				sts := o.(*appsv1.StatefulSet)
				g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
				g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("gcr.io/etcd-development/etcd:v3.5.9"))
			}),
		Entry("PodDisruptionBudget deleted", "PodDisruptionBudget", nil, nil),
		Entry("PodDisruptionBudget edited", "PodDisruptionBudget",
			func(o client.Object) { o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = ptr.To(intOrString(0)) },
			func(g Gomega, o client.Object) {
				g.Expect(o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable.IntValue()).To(Equal(2))
			}),
		Entry("PodMonitor deleted", "PodMonitor", nil, nil),
		Entry("PodMonitor edited", "PodMonitor",
			func(o client.Object) {
				u := o.(*unstructured.Unstructured)
				Expect(unstructured.SetNestedField(u.Object, []any{map[string]any{"port": "client"}}, "spec", "podMetricsEndpoints")).To(Succeed())
			},
			func(g Gomega, o client.Object) {
				endpoints, _, _ := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "spec", "podMetricsEndpoints")
				g.Expect(endpoints).To(HaveLen(1))
				g.Expect(endpoints[0]).To(HaveKeyWithValue("port", "metrics"))
			}),
		Entry("PrometheusRule deleted", "PrometheusRule", nil, nil),
		Entry("PrometheusRule edited", "PrometheusRule",
			func(o client.Object) {
				u := o.(*unstructured.Unstructured)
				Expect(unstructured.SetNestedField(u.Object, []any{map[string]any{"name": "silenced", "rules": []any{}}}, "spec", "groups")).To(Succeed())
			},
			func(g Gomega, o client.Object) {
				groups, _, _ := unstructured.NestedSlice(o.(*unstructured.Unstructured).Object, "spec", "groups")
				g.Expect(groups).To(HaveLen(len(mustClusterRuleGroups())))
				g.Expect(groups[0]).To(HaveKeyWithValue("name", "etcd-operator.clusters"))
			}),
		Entry("CronJob deleted", "CronJob", nil, nil),
		Entry("CronJob edited", "CronJob",
			func(o client.Object) { o.(*batchv1.CronJob).Spec.Schedule = "* * * * *" },
			func(g Gomega, o client.Object) { g.Expect(o.(*batchv1.CronJob).Spec.Schedule).To(Equal("0 2 * * *")) }),
	)

	It("propagates replicas, backupSchedule and storage growth", func() {
		class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "expandable"}, Provisioner: "example.com/test", AllowVolumeExpansion: ptr.To(true)}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, class))).To(Succeed())
		c := newCluster(watchedNS)
		c.Spec.StorageClassName = ptr.To("expandable")
		createAndSettle(ctx, c)
		objs := managed(c)

		By("scaling to 5")
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		Eventually(func(g Gomega) {
			sts, pdb, cm := objs["StatefulSet"].(*appsv1.StatefulSet), objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget), objs["ConfigMap"].(*corev1.ConfigMap)
			g.Expect(get(ctx, sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(Equal(int32(5)))
			g.Expect(get(ctx, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(3))
			g.Expect(get(ctx, cm)).To(Succeed())
			g.Expect(cm.Data["ETCD_INITIAL_CLUSTER"]).To(ContainSubstring(resources.MemberName(c, 4) + "="))
		}, timeout, interval).Should(Succeed())

		By("removing and re-adding the backup schedule")
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.BackupSchedule = "" })).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(get(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: resources.BackupCronJobName(c), Namespace: c.Namespace}}))
		},
			timeout, interval).Should(BeTrue())
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.BackupSchedule = "@hourly" })).To(Succeed())
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.BackupCronJobName(c)), cj)).To(Succeed())
			g.Expect(cj.Spec.Schedule).To(Equal("@hourly"))
		}, timeout, interval).Should(Succeed())

		By("growing storage: existing claims grow, the StatefulSet is replaced without its pods")
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-" + resources.MemberName(c, 0), Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentEtcd)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("expandable"),
				VolumeName:       "pv-test",
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
		pvc.Status.Phase = corev1.ClaimBound // only bound claims may grow
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		Expect(k8sClient.Status().Update(ctx, pvc)).To(Succeed())
		sts := objs["StatefulSet"].(*appsv1.StatefulSet)
		Expect(get(ctx, sts)).To(Succeed())
		oldUID := sts.UID

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.StorageSize = resource.MustParse("20Gi") })).To(Succeed())
		// Play the garbage collector (envtest runs none): once the old StatefulSet is deleted with the
		// orphan policy, drop its orphan finalizer as the collector does after releasing the pods.
		Eventually(func(g Gomega) {
			old := &appsv1.StatefulSet{}
			err := k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), old)
			if apierrors.IsNotFound(err) || (err == nil && old.UID != oldUID) {
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(old.DeletionTimestamp).NotTo(BeNil(), "old StatefulSet not deleted yet")
			g.Expect(old.Finalizers).To(ContainElement(metav1.FinalizerOrphanDependents))
			old.Finalizers = nil
			g.Expect(k8sClient.Update(ctx, old)).To(Succeed())
		}, timeout, interval).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, pvc)).To(Succeed())
			g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"))
			fresh := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), fresh)).To(Succeed())
			g.Expect(fresh.UID).NotTo(Equal(oldUID))
			g.Expect(fresh.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"))
		}, timeout, interval).Should(Succeed())
	})

	It("stops changing managed objects while paused", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Paused = true })).To(Succeed())
		Eventually(func() etcdv1beta1.ClusterPhase { _ = get(ctx, c); return c.Status.Phase }, timeout, interval).Should(Equal(etcdv1beta1.PhasePaused))
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		Eventually(func() int64 { _ = get(ctx, c); return c.Status.ObservedGeneration }, timeout, interval).Should(Equal(c.Generation))
		sts := managed(c)["StatefulSet"].(*appsv1.StatefulSet)
		Expect(get(ctx, sts)).To(Succeed())
		Expect(*sts.Spec.Replicas).To(Equal(int32(3)), "a paused cluster's StatefulSet must not follow the spec")

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Paused = false })).To(Succeed())
		Eventually(func() int32 { _ = get(ctx, sts); return *sts.Spec.Replicas }, timeout, interval).Should(Equal(int32(5)))
	})

	It("leaves clusters outside WATCH_NAMESPACE alone and serves every watched namespace", func() {
		outside := newCluster(unwatchedNS)
		Expect(k8sClient.Create(ctx, outside)).To(Succeed())
		inside := newCluster(watchedNS2)
		createAndSettle(ctx, inside)
		// The watched cluster settled after the unwatched one was created; the unwatched one got nothing.
		Consistently(func(g Gomega) {
			for kind, o := range managed(outside) {
				g.Expect(apierrors.IsNotFound(get(ctx, o))).To(BeTrue(), kind)
			}
			g.Expect(get(ctx, outside)).To(Succeed())
			g.Expect(outside.Status.ObservedGeneration).To(BeZero())
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("is deleted at once, leaving its objects to the garbage collector through owner references", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		Expect(c.Finalizers).To(BeEmpty(), "deletion needs no work of the operator")
		Expect(registrySeries("etcd_operator_cluster_members", c)).To(Equal(4), "a member count per state, on the metrics endpoint")
		Expect(k8sClient.Delete(ctx, c)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(get(ctx, c)) }, timeout, interval).Should(BeTrue())
		Eventually(func() int { return registrySeries("", c) }, timeout, interval).Should(BeZero(), "a deleted cluster's series are dropped")
		// envtest runs no garbage collector; owner references (checked above) are what it acts on, and
		// the e2e suite proves the cleanup on a real cluster.
	})
})

func retryUpdate(ctx context.Context, o client.Object, edit func(client.Object)) error {
	var err error
	for range 10 {
		if err = get(ctx, o); err != nil {
			return err
		}
		edit(o)
		if err = k8sClient.Update(ctx, o); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

func intOrString(i int) intstr.IntOrString { return intstr.FromInt(i) }

// mustClusterRuleGroups are the rule groups every cluster's PrometheusRule holds.
func mustClusterRuleGroups() []resources.RuleGroup {
	groups, err := resources.ClusterRuleGroups(alertrules.AlertRules)
	Expect(err).NotTo(HaveOccurred())
	return groups
}
