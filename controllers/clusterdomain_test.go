package controllers

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/internal/resources"
)

var _ = Describe("An operator restarted with another --cluster-domain", func() {
	It("keeps a running cluster's names: no new template, configuration or certificate", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)

		objects := map[string]client.Object{
			"StatefulSet":        &appsv1.StatefulSet{},
			"ConfigMap":          &corev1.ConfigMap{},
			"server certificate": &corev1.Secret{},
			"peer certificate":   &corev1.Secret{},
			"client certificate": &corev1.Secret{},
		}
		names := map[string]string{
			"StatefulSet": resources.StatefulSetName(c), "ConfigMap": resources.ConfigMapName(c),
			"server certificate": resources.ServerSecretName(c), "peer certificate": resources.PeerSecretName(c),
			"client certificate": resources.ClientSecretName(c),
		}
		versions := map[string]string{}
		for what, o := range objects {
			Expect(k8sClient.Get(ctx, key(c.Namespace, names[what]), o)).To(Succeed(), what)
			versions[what] = o.GetResourceVersion()
		}

		// A second operator, configured with another domain, reconciles the same cluster (reading the API
		// server directly, so it sees what the first one wrote).
		other := resources.DefaultOptions()
		other.ClusterDomain = "other.example"
		r := &EtcdClusterReconciler{Client: k8sClient, Scheme: k8sClient.Scheme(), APIReader: k8sClient,
			Recorder: &events.FakeRecorder{}, Options: other}
		for range 3 {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(c.Namespace, c.Name)})
			Expect(err).NotTo(HaveOccurred())
		}
		for what, o := range objects {
			Expect(k8sClient.Get(ctx, key(c.Namespace, names[what]), o)).To(Succeed(), what)
			Expect(o.GetResourceVersion()).To(Equal(versions[what]), "%s changed under another --cluster-domain", what)
		}
		Expect(get(ctx, c)).To(Succeed())
		Expect(c.Status.ClientEndpoint).To(ContainSubstring(".svc.cluster.local:"), "status names the cluster's own domain")
	})
})

var _ = Describe("An operator upgraded to other probe settings", func() {
	It("keeps a running cluster's template: the timings and paths come with the next roll, never cause one", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
		version := sts.ResourceVersion

		other := resources.DefaultOptions()
		other.Probes = resources.ProbeSettings{StartupPeriod: 10, StartupTimeout: 5, StartupFailures: 60,
			ReadinessPeriod: 5, ReadinessTimeout: 5, ReadinessFailures: 3,
			StartupPath: "/health?serializable=true&other", LivenessPath: "/health?serializable=false&other"}
		r := &EtcdClusterReconciler{Client: k8sClient, Scheme: k8sClient.Scheme(), APIReader: k8sClient,
			Recorder: &events.FakeRecorder{}, Options: other}
		for range 3 {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(c.Namespace, c.Name)})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
		Expect(sts.ResourceVersion).To(Equal(version), "the member template changed with the operator's probe settings alone")
	})
})
