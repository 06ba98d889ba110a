//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/tests/framework"
)

// TLS (on by default) and certificate rotation on real members: certificates last 10 minutes and are
// renewed 9 minutes before expiry, so the operator rotates them about a minute after issuing them.
var _ = Describe("TLS", Label("tls"), Ordered, func() {
	var (
		ns string
		c  *etcdv1beta1.EtcdCluster
	)

	BeforeAll(func() {
		ns = fw.NewNamespace("tls")
		c = fw.NewCluster(ns, "secure", etcdVersion, 3)
		c.Spec.TLS.CertificateDuration = &metav1.Duration{Duration: 10 * time.Minute}
		c.Spec.TLS.RenewBefore = &metav1.Duration{Duration: 9 * time.Minute}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		framework.ReportDuration("time to a healthy 3-member TLS cluster", fw.WaitAvailable(c, 5*time.Minute))
	})

	serverSerial := func() *big.Int {
		s := &corev1.Secret{}
		ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-server-tls"}, s)).To(Succeed())
		cert, err := pki.ParseCertificate(s.Data["tls.crt"])
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return cert.SerialNumber
	}
	// servedSerial is the serial of the certificate a member presents on a new connection.
	servedSerial := func(g Gomega, p corev1.Pod) *big.Int {
		cfg := fw.ClusterTLS(c, fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.Name, c.Name, ns))
		conn, err := tls.DialWithDialer(&netDialer, "tcp", p.Status.PodIP+":2379", cfg)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}

	It("serves clients only over TLS, and only with a certificate from the cluster's CA", func() {
		cur := fw.GetCluster(c)
		Expect(*cur.Spec.TLS.Enabled).To(BeTrue(), "TLS is the default")
		Expect(cur.Status.ClientEndpoint).To(HavePrefix("https://"))
		Expect(cur.Status.TLS).NotTo(BeNil())
		Expect(cur.Status.TLS.Certificates).To(HaveLen(4))
		expectVotingMembers(c, memberNames(c, 3), time.Minute)
		putGet(c, "/e2e/tls", "secret")

		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.Name + "-client"}, svc)).To(Succeed())
		serverName := c.Name + "-client." + ns + ".svc"
		good := fw.ClusterTLS(c, serverName)
		stranger, _, err := pki.NewCA("stranger", time.Hour, time.Now())
		Expect(err).NotTo(HaveOccurred())
		strangerCert, strangerCertKey, err := stranger.Issue(pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: time.Hour}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		noCert := good.Clone()
		noCert.Certificates = nil
		foreignCert := good.Clone()
		pair, err := tls.X509KeyPair(strangerCert, strangerCertKey)
		Expect(err).NotTo(HaveOccurred())
		foreignCert.Certificates = []tls.Certificate{pair}
		for name, cfg := range map[string]*tls.Config{"no client certificate": noCert, "a certificate from another CA": foreignCert} {
			// The same name and address the working client uses: only the client certificate differs.
			cli, err := framework.EtcdClientTLS(serverName, svc.Spec.ClusterIP, cfg, 3*time.Second)
			if err == nil {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err = cli.Put(pctx, "/e2e/intruder", name)
				cancel()
				_ = cli.Close()
			}
			Expect(err).To(HaveOccurred(), "a client with %s was served", name)
		}
		// A plaintext client gets nothing either.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + svc.Spec.ClusterIP + ":2379"}, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cli.Put(pctx, "/e2e/intruder", "plaintext")
			cancel()
			_ = cli.Close()
		}
		Expect(err).To(HaveOccurred(), "a plaintext client was served")
	})

	It("rotates certificates before they expire, without restarting members or failing a write", func() {
		pods := fw.MemberPods(c)
		Expect(pods).To(HaveLen(3))
		uids := map[string]types.UID{}
		for _, p := range pods {
			uids[p.Name] = p.UID
		}
		w := fw.StartWriter(c, "/e2e/rotation")
		w.WaitProgress(50, time.Minute)

		before := serverSerial()
		start := time.Now()
		Eventually(func() bool { return serverSerial().Cmp(before) != 0 }).WithTimeout(3*time.Minute).WithPolling(2*time.Second).
			Should(BeTrue(), "the server certificate was not renewed")
		framework.ReportDuration("server certificate renewed after", time.Since(start))
		// The kubelet updates the Secret volumes within its sync period; etcd reads the files on every new
		// connection, so each member soon presents the renewed certificate.
		for _, p := range pods {
			Eventually(func(g Gomega) {
				// Renewals repeat every minute or so here: any certificate after the first one will do.
				g.Expect(servedSerial(g, p)).NotTo(Equal(before))
			}).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "member %s", p.Name)
		}
		framework.ReportDuration("every member serves the renewed certificate after", time.Since(start))
		w.WaitProgress(50, time.Minute)

		_, failed := w.Counts()
		w.StopAndVerify(c)
		Expect(failed).To(BeZero(), "writes failed during the rotation")
		for _, p := range fw.MemberPods(c) {
			Expect(p.UID).To(Equal(uids[p.Name]), "member %s was replaced", p.Name)
			for _, st := range p.Status.ContainerStatuses {
				Expect(st.RestartCount).To(BeZero(), "member %s restarted", p.Name)
			}
		}
		cur := fw.GetCluster(c)
		for _, cert := range cur.Status.TLS.Certificates {
			if cert.Name == "server" {
				Expect(cert.NotAfter.Time).To(BeTemporally(">", start.Add(5*time.Minute)), "status shows the renewed expiry")
			}
		}
	})
})

var netDialer = net.Dialer{Timeout: 5 * time.Second}
