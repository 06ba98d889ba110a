package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// warnings lists the notes of the Warning events of one reason regarding cluster c.
func warnings(ctx context.Context, c *etcdv1beta1.EtcdCluster, reason string) ([]string, error) {
	list := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == c.UID && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			out = append(out, e.Note)
		}
	}
	return out, nil
}

// The operator's cache holds only Secrets with its managed-by label: a Secret that lost the label looks
// missing there, and must not be replaced by a new CA or password.
var _ = Describe("Secrets the cluster relies on", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	// unlabel removes the managed-by label from Secret name and pokes the cluster (an annotation change
	// is a reconcile trigger), returning the Secret's data as it was.
	unlabel := func(c *etcdv1beta1.EtcdCluster, name string) map[string][]byte {
		s := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, name), s)).To(Succeed())
		data := s.DeepCopy().Data
		delete(s.Labels, resources.LabelManagedBy)
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		Expect(retryUpdate(ctx, c, func(o client.Object) {
			o.SetAnnotations(map[string]string{"example.com/poke": time.Now().String()})
		})).To(Succeed())
		return data
	}
	unchanged := func(c *etcdv1beta1.EtcdCluster, name string, data map[string][]byte) func(g Gomega) {
		return func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, name), s)).To(Succeed())
			g.Expect(s.Data).To(Equal(data), "Secret %s data", name)
			g.Expect(s.Labels).NotTo(HaveKey(resources.LabelManagedBy), "Secret %s left as the user made it", name)
		}
	}
	saysWhy := func(c *etcdv1beta1.EtcdCluster, name string) {
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonSecretNotManaged),
			HaveField("Message", And(ContainSubstring("Secret "+name+" exists without the label "+resources.LabelManagedBy),
				ContainSubstring("left it untouched")))))
		Eventually(func() ([]string, error) { return warnings(ctx, c, ReasonSecretNotManaged) }, timeout, interval).
			Should(ContainElement(ContainSubstring("Secret " + name + " exists without the label")))
	}

	It("never replaces a CA Secret that lost the operator's label, and says why", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		caName := resources.CASecretName(c)
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, caName), &corev1.Secret{}) }, timeout, interval).Should(Succeed())

		data := unlabel(c, caName)
		saysWhy(c, caName)
		Consistently(unchanged(c, caName, data), 2*time.Second, interval).Should(Succeed())

		// Relabelled, it is the operator's again: the cluster recovers with the same CA.
		Expect(retryUpdate(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: caName, Namespace: c.Namespace}}, func(o client.Object) {
			o.SetLabels(map[string]string{resources.LabelManagedBy: resources.ManagedBy})
		})).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).ShouldNot(HaveField("Reason", ReasonSecretNotManaged))
		s := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, caName), s)).To(Succeed())
		Expect(s.Data).To(Equal(data))
	})

	It("never replaces a root password Secret that lost the operator's label, and says why", func() {
		c := newCluster(watchedNS)
		c.Spec.Auth.Enabled = true
		createAndSettle(ctx, c)
		name := rootPasswordSecretName(c)
		Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, name), &corev1.Secret{}) }, timeout, interval).Should(Succeed())

		data := unlabel(c, name)
		saysWhy(c, name)
		Consistently(unchanged(c, name, data), 2*time.Second, interval).Should(Succeed())
	})
})
