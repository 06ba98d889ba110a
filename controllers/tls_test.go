package controllers

import (
	"context"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
)

var _ = Describe("EtcdCluster TLS", func() {
	ctx := context.Background()

	secret := func(c *etcdv1beta1.EtcdCluster, name string) *corev1.Secret {
		s := &corev1.Secret{}
		ExpectWithOffset(1, k8sClient.Get(ctx, key(c.Namespace, name), s)).To(Succeed())
		return s
	}
	certOf := func(s *corev1.Secret) *x509.Certificate {
		cert, err := pki.ParseCertificate(s.Data["tls.crt"])
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return cert
	}
	// plaintextStatefulSet stands in for the members of a cluster created before TLS existed.
	plaintextStatefulSet := func(c *etcdv1beta1.EtcdCluster) {
		plain := c.DeepCopy()
		plain.Spec.TLS.Enabled = ptr.To(false)
		plain.Spec.PVCRetentionPolicy = etcdv1beta1.PVCRetentionPolicy{WhenDeleted: "Retain", WhenScaled: "Retain"}
		ac := resources.StatefulSet(plain, 3, resources.DefaultOptions(), nil, resources.MemberGate{})
		ac.OwnerReferences = nil
		Expect(k8sClient.Apply(ctx, ac, client.FieldOwner("old-operator"))).To(Succeed())
	}

	It("is on by default: a CA, server, peer and client certificates, and members configured for TLS", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		Expect(c.Spec.TLS.Enabled).To(Equal(ptr.To(true)), "the operator records the default in the spec")
		Expect(c.Status.TLS.ClientSecretName).To(Equal(resources.ClientSecretName(c)))

		ca := certOf(secret(c, resources.CASecretName(c)))
		Expect(ca.IsCA).To(BeTrue())
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, name := range []string{resources.CASecretName(c), resources.ServerSecretName(c), resources.PeerSecretName(c), resources.ClientSecretName(c)} {
			s := secret(c, name)
			Expect(s.Type).To(Equal(corev1.SecretTypeTLS), name)
			Expect(s.Labels).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy), name)
			Expect(s.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)), name)
			Expect(s.Data).To(HaveKey("ca.crt"), name)
			Expect(s.Data["ca.crt"]).To(Equal(secret(c, resources.CASecretName(c)).Data["tls.crt"]), name)
		}
		member := resources.MemberName(c, 4) + "." + c.Name + "." + c.Namespace + ".svc.cluster.local"
		for _, check := range []struct {
			secret, name string
			usage        x509.ExtKeyUsage
		}{
			{resources.ServerSecretName(c), member, x509.ExtKeyUsageServerAuth},
			{resources.ServerSecretName(c), resources.ClientServiceName(c) + "." + c.Namespace + ".svc", x509.ExtKeyUsageServerAuth},
			{resources.PeerSecretName(c), member, x509.ExtKeyUsageServerAuth},
			{resources.PeerSecretName(c), member, x509.ExtKeyUsageClientAuth},
			{resources.ClientSecretName(c), "", x509.ExtKeyUsageClientAuth},
		} {
			_, err := certOf(secret(c, check.secret)).Verify(x509.VerifyOptions{DNSName: check.name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{check.usage}})
			Expect(err).NotTo(HaveOccurred(), "%s for %q", check.secret, check.name)
		}
		for _, cs := range c.Status.TLS.Certificates {
			Expect(cs.NotAfter.Time.Equal(certOf(secret(c, cs.SecretName)).NotAfter)).To(BeTrue(), cs.Name)
		}

		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ConfigMapName(c)), cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_LISTEN_CLIENT_URLS", "https://0.0.0.0:2379"))
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_CLIENT_CERT_AUTH", "true"))
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_PEER_CLIENT_CERT_AUTH", "true"))
		Expect(cm.Data["ETCD_INITIAL_CLUSTER"]).To(ContainSubstring("=https://"))
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, c.Name), sts)).To(Succeed())
		Expect(statefulSetServesTLS(sts)).To(BeTrue())
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", resources.PeerSecretName(c))))
	})

	It("keeps a cluster created without TLS as it runs, and the API refuses to switch it", func() {
		c := newCluster(watchedNS)
		plaintextStatefulSet(c)
		createAndSettle(ctx, c)
		Expect(c.Spec.TLS.Enabled).To(Equal(ptr.To(false)))
		Expect(c.Status.TLS.Enabled).To(BeFalse())
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ConfigMapName(c)), cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_LISTEN_CLIENT_URLS", "http://0.0.0.0:2379"))
		Expect(cm.Data).NotTo(HaveKey("ETCD_CERT_FILE"))
		err := apierrors.NewNotFound(corev1.Resource("secrets"), resources.ServerSecretName(c))
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ServerSecretName(c)), &corev1.Secret{})).To(MatchError(err))

		c.Spec.TLS.Enabled = ptr.To(true)
		Expect(k8sClient.Update(ctx, c)).To(MatchError(ContainSubstring("tls.enabled cannot change on an existing cluster")))
	})

	It("changes nothing when the spec asks for TLS on members that run without it", func() {
		c := newCluster(watchedNS)
		plaintextStatefulSet(c)
		c.Spec.TLS.Enabled = ptr.To(true)
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonTLSRefused), HaveField("Message", ContainSubstring("cannot switch between plaintext and TLS"))))
		Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(Default)).To(statusIs(metav1.ConditionFalse, ReasonTLSRefused))
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ConfigMapName(c)), &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound))
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.CASecretName(c)), &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
	})

	It("validates durations at the API server", func() {
		c := newCluster(watchedNS)
		c.Spec.TLS.CertificateDuration = &metav1.Duration{Duration: time.Hour}
		c.Spec.TLS.RenewBefore = &metav1.Duration{Duration: 2 * time.Hour}
		Expect(k8sClient.Create(ctx, c)).To(MatchError(ContainSubstring("tls.renewBefore must be shorter than tls.certificateDuration")))
		c.Spec.TLS.CertificateDuration = &metav1.Duration{Duration: time.Minute}
		c.Spec.TLS.RenewBefore = nil
		Expect(k8sClient.Create(ctx, c)).To(MatchError(ContainSubstring("tls.certificateDuration must be at least 10m")))

		fixed := newCluster(watchedNS)
		Expect(k8sClient.Create(ctx, fixed)).To(Succeed())
		Expect(retryUpdate(ctx, fixed, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.TLS.CASecretName = "another-ca" })).
			To(MatchError(ContainSubstring("tls.caSecretName is immutable")))

		plain := newCluster(watchedNS)
		plain.Spec.TLS.Enabled = ptr.To(false)
		plain.Spec.Auth.Enabled = true
		Expect(k8sClient.Create(ctx, plain)).To(MatchError(ContainSubstring("auth.enabled needs TLS")))
	})

	It("signs with a CA the user supplies, and says so when it is missing", func() {
		c := newCluster(watchedNS)
		c.Spec.TLS.CASecretName = "my-ca"
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonReconcileFailed), HaveField("Message", ContainSubstring("CA Secret my-ca named by spec.tls.caSecretName not found"))))

		userCA, key, err := pki.NewCA("user CA", 24*time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "my-ca", Namespace: c.Namespace},
			Data:       map[string][]byte{"tls.crt": userCA.CertPEM, "tls.key": key},
		})).To(Succeed())
		// The user's Secret is not watched (it is not the operator's): the retry after the failure finds it.
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ServerSecretName(c)}, s)).To(Succeed())
			cert, err := pki.ParseCertificate(s.Data["tls.crt"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cert.CheckSignatureFrom(userCA.Cert)).To(Succeed())
			g.Expect(cert.NotAfter.After(userCA.Cert.NotAfter)).To(BeFalse(), "never outlives its CA")
		}, 60*time.Second, interval).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-ca"}, &corev1.Secret{})).To(Satisfy(apierrors.IsNotFound))
	})

	It("refuses to re-issue certificates from a CA the members do not trust", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		server := secret(c, resources.ServerSecretName(c))
		other, key, err := pki.NewCA("impostor", 24*time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		caSecret := secret(c, resources.CASecretName(c))
		caSecret.Data["tls.crt"], caSecret.Data["tls.key"] = other.CertPEM, key
		Expect(k8sClient.Update(ctx, caSecret)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonReconcileFailed), HaveField("Message", ContainSubstring("rotating a cluster's CA is not supported"))))
		Expect(secret(c, resources.ServerSecretName(c)).Data).To(Equal(server.Data), "the server certificate is left as it was")
	})
})

// A client certificate Secret that cannot be turned into a TLS configuration is reported with the reason,
// not as a certificate "not issued yet".
func TestUnusableClientCertificateIsReported(t *testing.T) {
	ctx := context.Background()
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.9", Replicas: 3, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)}}}
	now := time.Now()
	ca, caKey, err := pki.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	var clientCert, clientKey []byte
	for _, leaf := range resources.LeafCertificates(c, resources.DefaultOptions()) {
		if leaf.SecretName == resources.ClientSecretName(c) {
			if clientCert, clientKey, err = ca.Issue(leaf.Request, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if clientCert == nil {
		t.Fatal("no client certificate among the leaf certificates")
	}
	scheme := testScheme(t)
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace,
			Labels: resources.Labels(c, resources.ComponentTLS)}, Data: data}
	}
	for name, tc := range map[string]struct {
		data map[string][]byte
		want string
	}{
		"no CA in the Secret": {map[string][]byte{"tls.crt": clientCert, "tls.key": clientKey, "ca.crt": nil}, "no CA certificate found"},
		"corrupt certificate": {map[string][]byte{"tls.crt": []byte("garbage"), "tls.key": clientKey, "ca.crt": ca.CertPEM}, "client certificate:"},
	} {
		t.Run(name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
				secret(resources.CASecretName(c), map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": caKey, "ca.crt": ca.CertPEM}),
				secret(resources.ClientSecretName(c), tc.data),
			).Build()
			r := &EtcdClusterReconciler{Client: cl, Options: resources.DefaultOptions()}
			obs := observation{}
			if obs.tls, err = r.observeTLS(ctx, c, nil, r.Options); err != nil {
				t.Fatal(err)
			}
			_, err := r.dial(ctx, c, &obs, []string{"https://c-0:2379"})
			if err == nil || strings.Contains(err.Error(), "not issued yet") || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), resources.ClientSecretName(c)) {
				t.Fatalf("dial error %v; want the Secret named and the reason %q", err, tc.want)
			}
		})
	}
}
