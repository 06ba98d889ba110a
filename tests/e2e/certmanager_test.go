//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/tests/framework"
)

var (
	certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	issuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
)

// TLS from cert-manager on the node: a CA Issuer signs the members' and the client's certificates, and a renewal
// cert-manager makes reaches every member under a writer that authenticates with the client certificate. Needs
// cert-manager on the node before the operator starts (make test-e2e installs it: hack/node/cert-manager.sh).
var _ = Describe("TLS from cert-manager", Label("tls", "certmanager"), Ordered, func() {
	var (
		ns     string
		c      *etcdv1beta1.EtcdCluster
		issuer *pki.CA
	)
	leafSecrets := func() []string { return []string{c.Name + "-server-tls", c.Name + "-peer-tls", c.Name + "-client-tls"} }

	BeforeAll(func() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(certificateGVK.GroupVersion().WithKind("CertificateList"))
		err := k8s.List(ctx, list, client.Limit(1))
		Expect(meta.IsNoMatchError(err)).To(BeFalse(), "cert-manager is not installed on the node: hack/node/cert-manager.sh (make test-e2e runs it)")
		Expect(err).NotTo(HaveOccurred())

		ns = fw.NewNamespace("certmanager")
		var keyPEM []byte
		issuer, keyPEM, err = pki.NewCA("e2e issuer CA", 24*time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer-ca"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: issuer.CertPEM, corev1.TLSPrivateKeyKey: keyPEM},
		})).To(Succeed())
		iss := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "ca-issuer", "namespace": ns},
			"spec":     map[string]any{"ca": map[string]any{"secretName": "issuer-ca"}},
		}}
		iss.SetGroupVersionKind(issuerGVK)
		Expect(k8s.Create(ctx, iss)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(iss), iss)).To(Succeed())
			g.Expect(readyStatus(iss)).To(Equal("True"))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed(), "the CA Issuer is not Ready")

		c = fw.NewCluster(ns, "issued", etcdVersion, 3)
		c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca-issuer"}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		framework.ReportDuration("time to a healthy 3-member cluster with certificates from a cert-manager CA Issuer", fw.WaitAvailable(c, 5*time.Minute))
	})

	// certificate is a leaf Secret's certificate, verified against the issuer's CA.
	certificate := func(g Gomega, name string) *x509.Certificate {
		s := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		cert, err := pki.ParseCertificate(s.Data[corev1.TLSCertKey])
		g.Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		roots.AddCert(issuer.Cert)
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		g.Expect(err).NotTo(HaveOccurred(), "Secret %s holds a certificate the issuer's CA did not sign", name)
		return cert
	}
	servedSerial := func(g Gomega, p corev1.Pod) *big.Int {
		cfg := fw.ClusterTLS(c, fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.Name, c.Name, ns))
		conn, err := tls.DialWithDialer(&netDialer, "tcp", p.Status.PodIP+":2379", cfg)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}

	It("serves with certificates the issuer signed, from Certificates the cluster owns", func() {
		for _, name := range leafSecrets() {
			cert := &unstructured.Unstructured{}
			cert.SetGroupVersionKind(certificateGVK)
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cert)).To(Succeed(), "Certificate %s", name)
			Expect(readyStatus(cert)).To(Equal("True"), "Certificate %s", name)
			Expect(cert.GetOwnerReferences()).To(ContainElement(HaveField("Name", c.Name)), "Certificate %s", name)
			certificate(Default, name)
		}
		server := certificate(Default, c.Name+"-server-tls")
		for _, p := range fw.MemberPods(c) {
			Expect(servedSerial(Default, p)).To(Equal(server.SerialNumber), "member %s", p.Name)
		}
		expectVotingMembers(c, memberNames(c, 3), time.Minute)
		putGet(c, "/e2e/issued", "by cert-manager")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		Expect(c.Status.TLS).NotTo(BeNil())
	})

	It("carries a renewal cert-manager makes to every member under a writer, without restarting a member", func() {
		pods := fw.MemberPods(c)
		Expect(pods).To(HaveLen(3))
		uids := map[string]types.UID{}
		for _, p := range pods {
			uids[p.Name] = p.UID
		}
		w := fw.StartWriter(c, "/e2e/issued-renewal")
		w.WaitProgress(50, time.Minute)

		before := map[string]*big.Int{}
		for _, name := range leafSecrets() {
			before[name] = certificate(Default, name).SerialNumber
		}
		start := time.Now()
		// What `cmctl renew` does: the Issuing condition asks cert-manager for a new certificate now.
		for _, name := range leafSecrets() {
			cert := &unstructured.Unstructured{}
			cert.SetGroupVersionKind(certificateGVK)
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cert)).To(Succeed())
			conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
			conditions = append(conditions, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
				"message": "renewal asked for by the e2e suite", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			Expect(unstructured.SetNestedSlice(cert.Object, conditions, "status", "conditions")).To(Succeed())
			Expect(k8s.Status().Update(ctx, cert)).To(Succeed(), "Certificate %s", name)
		}
		for _, name := range leafSecrets() {
			Eventually(func(g Gomega) {
				g.Expect(certificate(g, name).SerialNumber).NotTo(Equal(before[name]))
			}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "Secret %s was not renewed", name)
		}
		framework.ReportDuration("cert-manager renewed the three certificates after", time.Since(start))
		server := certificate(Default, c.Name+"-server-tls")
		for _, p := range pods {
			Eventually(func(g Gomega) {
				g.Expect(servedSerial(g, p)).To(Equal(server.SerialNumber))
			}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "member %s", p.Name)
		}
		framework.ReportDuration("every member serves the renewed certificate after", time.Since(start))
		w.WaitProgress(50, time.Minute)
		// A new client with the renewed client certificate is served too.
		putGet(c, "/e2e/issued-renewed", "renewed client certificate")

		acked, failed := w.Counts()
		AddReportEntry("writer during the renewal", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s", acked, failed, w.LongestGap()))
		w.StopAndVerify(c)
		Expect(failed).To(BeZero(), "writes failed during the renewal")
		for _, p := range fw.MemberPods(c) {
			Expect(p.UID).To(Equal(uids[p.Name]), "member %s was replaced", p.Name)
			for _, st := range p.Status.ContainerStatuses {
				Expect(st.RestartCount).To(BeZero(), "member %s restarted", p.Name)
			}
		}
	})
})

// readyStatus is the status of a cert-manager object's Ready condition.
func readyStatus(u *unstructured.Unstructured) string {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
