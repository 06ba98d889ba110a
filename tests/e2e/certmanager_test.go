//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/tests/framework"
)

var (
	certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	issuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
)

// TLS from cert-manager on the node: a CA Issuer signs the members' and the client's certificates; a renewal
// cert-manager makes reaches every member under a writer that authenticates with the client certificate; a change
// of the issuer's CA is carried through under a writer, one member restarted at a time. Needs cert-manager on the
// node before the operator starts (make test-e2e installs it: hack/node/cert-manager.sh).
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

	// renewAll does what `cmctl renew` does to each Certificate: the Issuing condition asks cert-manager for a
	// new certificate now.
	renewAll := func() {
		for _, name := range leafSecrets() {
			Eventually(func(g Gomega) {
				cert := &unstructured.Unstructured{}
				cert.SetGroupVersionKind(certificateGVK)
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cert)).To(Succeed())
				conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
				conditions = append(conditions, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
					"message": "renewal asked for by the e2e suite", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
				g.Expect(unstructured.SetNestedSlice(cert.Object, conditions, "status", "conditions")).To(Succeed())
				g.Expect(k8s.Status().Update(ctx, cert)).To(Succeed(), "Certificate %s", name)
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}
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
		uids := podUIDs(c)
		w := fw.StartWriter(c, "/e2e/issued-renewal")
		w.WaitProgress(50, time.Minute)

		before := map[string]*big.Int{}
		for _, name := range leafSecrets() {
			before[name] = certificate(Default, name).SerialNumber
		}
		start := time.Now()
		renewAll()
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
		expectSamePods(Default, c, uids)
		for _, p := range fw.MemberPods(c) {
			for _, st := range p.Status.ContainerStatuses {
				Expect(st.RestartCount).To(BeZero(), "member %s restarted", p.Name)
			}
		}
	})

	It("carries a change of the issuer's CA through under a writer: both CAs trusted meanwhile, one member down at most, then the old CA dropped", func() {
		ids := memberIDsByName(c, 3)
		oldCA := issuer
		next, nextKey, err := pki.NewCA("e2e issuer CA, the next one", 24*time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		oldClient := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-client-tls"}, oldClient)).To(Succeed())

		By("a writer that trusts both CAs and presents the client certificate its Secret holds at each handshake, as a client mounting the Secret does")
		roots := x509.NewCertPool()
		roots.AddCert(oldCA.Cert)
		roots.AddCert(next.Cert)
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-client"}, svc)).To(Succeed())
		host := c.Name + "-client." + ns + ".svc"
		cfg := &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				s := &corev1.Secret{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-client-tls"}, s); err != nil {
					return nil, err
				}
				pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
				return &pair, err
			}}
		cli, err := framework.EtcdClientTLS(host, svc.Spec.ClusterIP, cfg, 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		fw.EtcdClient = func(*etcdv1beta1.EtcdCluster) *clientv3.Client { return cli }
		w := fw.StartWriter(c, "/e2e/issuer-ca-change")
		fw.EtcdClient = nil
		w.WaitProgress(50, time.Minute)
		obs := startRolloutObserver(c)

		// The most CAs the server Secret's ca.crt held at once during the change: both, while members move.
		sctx, stopSampling := context.WithCancel(ctx)
		var mostCAs atomic.Int32
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for sctx.Err() == nil {
				s := &corev1.Secret{}
				if k8s.Get(sctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-server-tls"}, s) == nil {
					if n := int32(len(pemCertificates(s.Data["ca.crt"]))); n > mostCAs.Load() {
						mostCAs.Store(n)
					}
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
		DeferCleanup(stopSampling)

		By("replacing the CA in the issuer's Secret, then asking cert-manager to issue again")
		start := time.Now()
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "issuer-ca"}, s)).To(Succeed())
			s.Data = map[string][]byte{corev1.TLSCertKey: next.CertPEM, corev1.TLSPrivateKeyKey: nextKey}
			g.Expect(k8s.Update(ctx, s)).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		issuer = next
		renewAll()

		By("every certificate from the new CA, the old CA no longer trusted, every member serving the new server certificate")
		Eventually(func(g Gomega) {
			for _, name := range leafSecrets() {
				certificate(g, name) // verified against the new CA
				s := &corev1.Secret{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
				cas := pemCertificates(s.Data["ca.crt"])
				g.Expect(cas).To(HaveLen(1), "Secret %s trusts %d CAs", name, len(cas))
				g.Expect(cas[0].Equal(next.Cert)).To(BeTrue(), "Secret %s trusts another CA than the issuer's new one", name)
			}
		}).WithTimeout(10 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("every Secret from the new CA, the old one dropped, after", time.Since(start))
		nextOnly := x509.NewCertPool()
		nextOnly.AddCert(next.Cert)
		for _, name := range memberNames(c, 3) {
			Eventually(func(g Gomega) {
				// Read each time: the members restart (new pods, new IPs) during the change.
				p := podNamed(ns, name)
				g.Expect(p).NotTo(BeNil())
				cfg := fw.ClusterTLS(c, fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.Name, c.Name, ns))
				cfg.RootCAs = nextOnly
				conn, err := tls.DialWithDialer(&netDialer, "tcp", p.Status.PodIP+":2379", cfg)
				g.Expect(err).NotTo(HaveOccurred(), "member %s does not serve a certificate of the new CA", p.Name)
				_ = conn.Close()
			}).WithTimeout(5*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "member %s", name)
		}
		fw.WaitAvailable(c, 5*time.Minute)
		framework.ReportDuration("Available, every member on the new CA, after", time.Since(start))
		w.WaitProgress(50, time.Minute)
		// Two rolls: one to trust both CAs, one to drop the old.
		replaced, maxDown, err := obs.stopAfterRolls(2)
		Expect(err).NotTo(HaveOccurred())
		order := make([]string, 0, len(replaced))
		for _, r := range replaced {
			order = append(order, r.pod)
		}
		AddReportEntry("members restarted, in order", strings.Join(order, ", "))
		stopSampling()
		<-sampled

		steps := slices.Sorted(maps.Values(clusterEvents(c, corev1.EventTypeNormal, "CARotating")))
		AddReportEntry("the CA change's steps (events)", strings.Join(steps, "\n"))
		Expect(steps).NotTo(BeEmpty(), "the CA change's steps are events")
		acked, failed := w.Counts()
		AddReportEntry("writer during the CA change", fmt.Sprintf("%d acknowledged, %d failed, longest gap %s", acked, failed, w.LongestGap()))
		w.StopAndVerify(c)
		Expect(maxDown).To(BeNumerically("<=", 1), "more than one member was down at once")
		Expect(mostCAs.Load()).To(BeNumerically(">=", 2), "the members never trusted both CAs during the change")
		Expect(memberIDsByName(c, 3)).To(Equal(ids), "a member was replaced instead of restarted")
		expectAgreement(c, 3)

		By("a client certificate of the old CA is refused now")
		stale := fw.ClusterTLS(c, host)
		pair, err := tls.X509KeyPair(oldClient.Data[corev1.TLSCertKey], oldClient.Data[corev1.TLSPrivateKeyKey])
		Expect(err).NotTo(HaveOccurred())
		stale.Certificates = []tls.Certificate{pair}
		old, err := framework.EtcdClientTLS(host, svc.Spec.ClusterIP, stale, 3*time.Second)
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = old.Put(pctx, "/e2e/old-ca-client", "refused")
			cancel()
			_ = old.Close()
		}
		Expect(err).To(HaveOccurred(), "a client certificate of the dropped CA was served")
	})
})

// pemCertificates parses every certificate of a PEM bundle (ca.crt).
func pemCertificates(bundle []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return certs
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil && block.Type == "CERTIFICATE" {
			certs = append(certs, cert)
		}
	}
}

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
