package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/internal/testproc"
)

// certManagerNS is where the specs with cert-manager run, under an operator started after cert-manager's
// kinds are installed (the suite's operator started without them).
const certManagerNS = "certs"

// certManagerDir is bin/cert-manager-<version> (make cert-manager): the controller and its CRDs.
func certManagerDir() string {
	if dir := os.Getenv("CERT_MANAGER_DIR"); dir != "" {
		return dir
	}
	root, err := filepath.Abs("..") // go test runs in the package's directory
	Expect(err).NotTo(HaveOccurred())
	mod, err := os.ReadFile(filepath.Join(root, "hack", "certmanager", "go.mod"))
	Expect(err).NotTo(HaveOccurred())
	for line := range strings.SplitSeq(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" && f[1] == "github.com/cert-manager/cert-manager" {
			return filepath.Join(root, "bin", "cert-manager-"+f[2])
		}
	}
	Fail("hack/certmanager/go.mod requires no cert-manager version")
	return ""
}

func issuedCluster(ns, issuer, kind string) *etcdv1beta1.EtcdCluster {
	c := newCluster(ns)
	c.Spec.BackupSchedule = ""
	c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: issuer, Kind: kind}
	return c
}

func certificateObject(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(resources.CertificateGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func issuedLeaves(c *etcdv1beta1.EtcdCluster) []resources.LeafCertificate {
	return resources.LeafCertificates(c, resources.DefaultOptions())
}

// countingIssuedReconciler counts the reconciles of the cert-manager specs' operator.
type countingIssuedReconciler struct {
	r *EtcdClusterReconciler
	n *atomic.Int64
}

func (c countingIssuedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer c.n.Add(1)
	return c.r.Reconcile(ctx, req)
}

var _ = Describe("TLS from cert-manager", func() {
	ctx := context.Background()

	It("says cert-manager is missing when its kinds were not served at start, and creates nothing", func() {
		c := issuedCluster(watchedNS, "ca", "Issuer")
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonCertManagerMissing),
			HaveField("Message", ContainSubstring("certificates.cert-manager.io"))))
		Eventually(func() ([]string, error) {
			events, err := eventsWithReason(ctx, c, ReasonReconcileFailed)
			var notes []string
			for _, e := range events {
				notes = append(notes, e.Note)
			}
			return notes, err
		}, timeout, interval).Should(ContainElement(ContainSubstring("needs cert-manager")))
		Consistently(func() bool {
			return apierrors.IsNotFound(get(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}))
		}, 2*time.Second, interval).Should(BeTrue(), "no member is created without certificates")
	})

	It("has the API server refuse a changed issuerRef, and accepts the rest for the operator to judge", func() {
		issued := issuedCluster(watchedNS, "ca", "Issuer")
		Expect(k8sClient.Create(ctx, issued)).To(Succeed())
		Expect(issued.Spec.TLS.IssuerRef.Group).To(Equal("cert-manager.io"), "the group defaults to cert-manager's")
		for _, edit := range []func(*etcdv1beta1.TLSSpec){
			func(t *etcdv1beta1.TLSSpec) { t.IssuerRef.Name = "other" },
			func(t *etcdv1beta1.TLSSpec) { t.IssuerRef.Kind = "ClusterIssuer" },
			func(t *etcdv1beta1.TLSSpec) { t.IssuerRef.Group = "example.com" },
		} {
			err := retryUpdate(ctx, issued, func(o client.Object) { edit(&o.(*etcdv1beta1.EtcdCluster).Spec.TLS) })
			Expect(err).To(MatchError(ContainSubstring("tls.issuerRef cannot be changed on an existing cluster")))
		}
	})

	It("refuses issuerRef added to a cluster whose certificates the operator's CA signs, changes nothing, and clears when it is removed", func() {
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		before := runningState(ctx, c)(Default)
		Expect(before).To(HaveKeyWithValue("Secret "+resources.CASecretName(c), Not(Equal("absent"))))

		Expect(retryUpdate(ctx, c, func(o client.Object) {
			o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca"}
		})).To(Succeed(), "the API server leaves adding issuerRef to the operator")
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
			statusIs(metav1.ConditionTrue, ReasonIssuerRefRefused),
			HaveField("Message", ContainSubstring("spec.tls.issuerRef (Issuer ca of cert-manager.io) was added to a cluster whose certificates the operator's CA")),
			HaveField("Message", ContainSubstring("nothing was changed. Remove spec.tls.issuerRef"))))
		Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(Default)).To(statusIs(metav1.ConditionFalse, ReasonIssuerRefRefused))
		Eventually(func() ([]eventsv1.Event, error) { return eventsWithReason(ctx, c, ReasonIssuerRefRefused) }, timeout, interval).
			ShouldNot(BeEmpty(), "a Warning event says so")
		Consistently(runningState(ctx, c), 2*time.Second, interval).Should(Equal(before),
			"no member configuration, StatefulSet, CA or certificate is touched")

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = nil })).To(Succeed())
		Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).
			ShouldNot(HaveField("Reason", ReasonIssuerRefRefused), "the refusal clears with the spec set back")
		Expect(runningState(ctx, c)(Default)).To(Equal(before))
	})

	It("refuses issuerRef with caSecretName, or with TLS off, on a new cluster, and creates nothing", func() {
		both := issuedCluster(watchedNS, "ca", "Issuer")
		// A name no other spec creates (specs share the namespace): the operator never creates a user's CA, so
		// it stays absent with everything else.
		both.Spec.TLS.CASecretName = "refused-issuer-ca"
		plain := issuedCluster(watchedNS, "ca", "Issuer")
		plain.Spec.TLS.Enabled = ptr.To(false)
		for _, tc := range []struct {
			c    *etcdv1beta1.EtcdCluster
			want string
		}{
			{both, "spec.tls.issuerRef (Issuer ca of cert-manager.io) and spec.tls.caSecretName (refused-issuer-ca) are exclusive"},
			{plain, "spec.tls.issuerRef (Issuer ca of cert-manager.io) needs TLS, but spec.tls.enabled is false"},
		} {
			Expect(k8sClient.Create(ctx, tc.c)).To(Succeed(), "the API server leaves this to the operator")
			Eventually(condition(ctx, tc.c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerRefRefused), HaveField("Message", ContainSubstring(tc.want)),
				HaveField("Message", ContainSubstring("nothing was changed"))))
		}
		Consistently(func(g Gomega) {
			for _, c := range []*etcdv1beta1.EtcdCluster{both, plain} {
				g.Expect(runningState(ctx, c)(g)).To(HaveEach("absent"), "nothing is created for %s", c.Name)
			}
		}, 2*time.Second, interval).Should(Succeed())

		Expect(retryUpdate(ctx, plain, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = nil })).To(Succeed())
		Eventually(condition(ctx, plain, etcdv1beta1.ConditionDegraded), timeout, interval).
			ShouldNot(HaveField("Reason", ReasonIssuerRefRefused), "the refusal clears with issuerRef removed")
		Eventually(func() error {
			return get(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(plain), Namespace: plain.Namespace}})
		},
			timeout, interval).Should(Succeed(), "the cluster without TLS is then built")
	})

	Context("with cert-manager running", Ordered, func() {
		var (
			ca       *pki.CA
			caKeyPEM []byte
			mgrWrite = &writeCounter{}
			mgrRuns  atomic.Int64
			// startOperator starts the operator of certManagerNS and returns what stops it; stopOperator stops
			// the running one.
			startOperator func() func()
			stopOperator  func()
		)

		BeforeAll(func() {
			dir := certManagerDir()
			Expect(filepath.Join(dir, "controller")).To(BeAnExistingFile(), "build it with `make cert-manager`")
			_, err := envtest.InstallCRDs(testEnv.Config, envtest.CRDInstallOptions{
				Paths: []string{filepath.Join(dir, "crds")}, ErrorIfPathMissing: true})
			Expect(err).NotTo(HaveOccurred())
			for _, ns := range []string{certManagerNS, "cert-manager"} {
				Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}

			// cert-manager's controller, as its own process with its own credentials.
			user, err := testEnv.AddUser(envtest.User{Name: "cert-manager", Groups: []string{"system:masters"}}, nil)
			Expect(err).NotTo(HaveOccurred())
			kubeconfig, err := user.KubeConfig()
			Expect(err).NotTo(HaveOccurred())
			tmp := GinkgoT().TempDir()
			Expect(os.WriteFile(filepath.Join(tmp, "kubeconfig"), kubeconfig, 0o600)).To(Succeed())
			log := filepath.Join(tmp, "cert-manager.log")
			proc, err := testproc.Start(exec.Command(filepath.Join(dir, "controller"),
				"--kubeconfig="+filepath.Join(tmp, "kubeconfig"), "--cluster-resource-namespace=cert-manager"), log)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				proc.Stop()
				if CurrentSpecReport().Failed() {
					out, _ := os.ReadFile(log)
					AddReportEntry("cert-manager log", string(out))
				}
			})

			// The operator, started now that cert-manager's kinds are served, watching only certManagerNS; a spec
			// restarts it (stopOperator, then startOperator).
			startOperator = func() func() {
				cfg := rest.AddUserAgent(rest.CopyConfig(testEnv.Config), "operator "+certManagerNS)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return mgrWrite.wrap(rt) })
				mgr, err := ctrl.NewManager(cfg, ctrl.Options{
					Scheme:     k8sClient.Scheme(),
					Metrics:    metricsserver.Options{BindAddress: "0"},
					Cache:      CacheOptions(certManagerNS),
					Controller: config.Controller{SkipNameValidation: ptr.To(true)},
				})
				Expect(err).NotTo(HaveOccurred())
				r := &EtcdClusterReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), APIReader: mgr.GetAPIReader(),
					Recorder: mgr.GetEventRecorder("etcd-operator"), Options: resources.DefaultOptions()}
				b, err := r.controllerBuilder(mgr)
				Expect(err).NotTo(HaveOccurred())
				Expect(r.certificates).NotTo(BeNil(), "the operator watches Certificates where the kind is served")
				Expect(r.issuers).NotTo(BeNil(), "and Issuers")
				Expect(r.clusterIssuersWatched).To(BeTrue(), "and ClusterIssuers, where it may list and watch them cluster-wide")
				Expect(b.Complete(countingIssuedReconciler{r, &mgrRuns})).To(Succeed())
				mctx, stop := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer GinkgoRecover()
					defer close(done)
					Expect(mgr.Start(mctx)).To(Succeed())
				}()
				return func() { stop(); <-done }
			}
			stopOperator = startOperator()
			DeferCleanup(func() { stopOperator() })

			// A CA issuer from a CA Secret.
			ca, caKeyPEM, err = pki.NewCA("cert-manager test CA", 24*time.Hour, time.Now())
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: certManagerNS},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: caKeyPEM},
			})).To(Succeed())
			issuer := &unstructured.Unstructured{Object: map[string]any{
				"spec": map[string]any{"ca": map[string]any{"secretName": "etcd-ca"}},
			}}
			issuer.SetGroupVersionKind(resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: "Issuer"}))
			issuer.SetNamespace(certManagerNS)
			issuer.SetName("ca")
			Expect(k8sClient.Create(ctx, issuer)).To(Succeed())
			Eventually(func(g Gomega) string {
				g.Expect(get(ctx, issuer)).To(Succeed())
				status, _ := readyCondition(issuer)
				return status
			}, timeout, interval).Should(Equal("True"), "cert-manager's issuers controller marks the Issuer Ready")
		})

		It("says an issuer that does not exist is missing, and creates nothing", func() {
			c := issuedCluster(certManagerNS, "absent", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerNotReady),
				HaveField("Message", ContainSubstring("Issuer "+certManagerNS+"/absent named by spec.tls.issuerRef not found"))))
			Consistently(func(g Gomega) {
				for _, leaf := range issuedLeaves(c) {
					g.Expect(apierrors.IsNotFound(get(ctx, certificateObject(c.Namespace, resources.CertificateName(leaf))))).To(BeTrue())
				}
				g.Expect(apierrors.IsNotFound(get(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}}))).To(BeTrue())
			}, 2*time.Second, interval).Should(Succeed())
		})

		It("says an issuer that is not Ready is not, and creates nothing", func() {
			issuer := &unstructured.Unstructured{Object: map[string]any{
				"spec": map[string]any{"ca": map[string]any{"secretName": "no-such-secret"}},
			}}
			issuer.SetGroupVersionKind(resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: "Issuer"}))
			issuer.SetNamespace(certManagerNS)
			issuer.SetName("broken")
			Expect(k8sClient.Create(ctx, issuer)).To(Succeed())
			c := issuedCluster(certManagerNS, "broken", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerNotReady),
				HaveField("Message", ContainSubstring("Issuer "+certManagerNS+"/broken named by spec.tls.issuerRef is not Ready")),
				HaveField("Message", ContainSubstring("no-such-secret"))), "cert-manager's own reason is quoted")
			Consistently(func(g Gomega) {
				for _, leaf := range issuedLeaves(c) {
					g.Expect(apierrors.IsNotFound(get(ctx, certificateObject(c.Namespace, resources.CertificateName(leaf))))).To(BeTrue())
				}
			}, 2*time.Second, interval).Should(Succeed())
		})

		It("issues as soon as a missing Issuer is created and Ready: the Issuer's event, not a poll", func() {
			name := "late-issuer"
			c := issuedCluster(certManagerNS, name, "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerNotReady),
				HaveField("Message", ContainSubstring("Issuer "+certManagerNS+"/"+name+" named by spec.tls.issuerRef not found"))))

			By("creating the Issuer: cert-manager marks it Ready")
			caIssuer(ctx, name)
			ready := time.Now()
			// A cluster waiting for a watched Issuer is looked at again only after issuancePendingRetry (a minute)
			// without an event, and the cluster was created seconds ago: Certificates within seconds of the Issuer's
			// Ready come from the Issuer's event (a lost event would show as a minute's wait, a poll as 15 s).
			Expect(issuancePendingRetry).To(BeNumerically(">=", time.Minute))
			Eventually(func(g Gomega) {
				for _, leaf := range issuedLeaves(c) {
					g.Expect(get(ctx, certificateObject(c.Namespace, resources.CertificateName(leaf)))).To(Succeed())
				}
			}, 10*time.Second, interval).Should(Succeed(), "the Certificates are created once the Issuer is Ready")
			GinkgoWriter.Printf("Certificates created %s after the Issuer was seen Ready\n", time.Since(ready))
			Eventually(func() error {
				return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), &appsv1.StatefulSet{})
			}, timeout, interval).Should(Succeed(), "and then the members")
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).ShouldNot(HaveField("Reason", BeElementOf(
				ReasonIssuerNotReady, ReasonCertificatesPending)))
		})

		It("keeps reconciling a running cluster whose Issuer is deleted, says so with the certificates' deadline, and leaves them alone", func() {
			name := "deleted-issuer"
			caIssuer(ctx, name)
			c := issuedCluster(certManagerNS, name, "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			var notAfter time.Time
			Eventually(func(g Gomega) {
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
				g.Expect(c.Status.TLS).NotTo(BeNil())
				g.Expect(c.Status.TLS.Certificates).To(HaveLen(3))
				g.Expect(runningState(ctx, c)(g)).To(HaveKeyWithValue("StatefulSet", Not(Equal("absent"))))
				notAfter = c.Status.TLS.Certificates[0].NotAfter.Time
				for _, cert := range c.Status.TLS.Certificates {
					if cert.NotAfter.Time.Before(notAfter) {
						notAfter = cert.NotAfter.Time
					}
				}
			}, timeout, interval).Should(Succeed())
			secrets := func(g Gomega) map[string]string {
				state := runningState(ctx, c)(g)
				delete(state, "StatefulSet")
				delete(state, "ConfigMap")
				for _, leaf := range issuedLeaves(c) {
					s := &corev1.Secret{}
					g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.IssuedSecretName(leaf)), s)).To(Succeed())
					state["staging "+s.Name] = s.ResourceVersion
				}
				return state
			}
			before := secrets(Default)

			By("deleting the Issuer")
			issuer := &unstructured.Unstructured{}
			issuer.SetGroupVersionKind(resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: "Issuer"}))
			issuer.SetNamespace(certManagerNS)
			issuer.SetName(name)
			Expect(k8sClient.Delete(ctx, issuer)).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerNotReady),
				HaveField("Message", ContainSubstring("Issuer "+certManagerNS+"/"+name+" named by spec.tls.issuerRef not found")),
				HaveField("Message", ContainSubstring("the first of which expires at "+notAfter.UTC().Format(time.RFC3339))),
				HaveField("Message", ContainSubstring("the rest of the cluster is reconciled"))))
			Eventually(func() ([]eventsv1.Event, error) { return eventsWithReason(ctx, c, ReasonIssuerNotReady) }, timeout, interval).
				Should(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note", ContainSubstring("not found")))))

			By("scaling: the StatefulSet and the PodDisruptionBudget follow")
			Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
			Eventually(func(g Gomega) {
				sts := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
				g.Expect(*sts.Spec.Replicas).To(Equal(int32(5)))
				pdb := &policyv1.PodDisruptionBudget{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.PDBName(c)), pdb)).To(Succeed())
				g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(3))
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
				g.Expect(conditionOf(c, etcdv1beta1.ConditionDegraded)).To(HaveField("Reason", ReasonIssuerNotReady))
			}, timeout, interval).Should(Succeed())
			Consistently(secrets, 2*time.Second, interval).Should(Equal(before), "no certificate Secret is touched")
		})

		It("issues from a ClusterIssuer", func() {
			Expect(k8sClient.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "etcd-ca", Namespace: "cert-manager"},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: caKeyPEM},
			})).To(Succeed())
			issuer := &unstructured.Unstructured{Object: map[string]any{
				"spec": map[string]any{"ca": map[string]any{"secretName": "etcd-ca"}},
			}}
			issuer.SetGroupVersionKind(resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: "ClusterIssuer"}))
			issuer.SetName("etcd-cluster-ca")
			Expect(k8sClient.Create(ctx, issuer)).To(Succeed())
			c := issuedCluster(certManagerNS, "etcd-cluster-ca", "ClusterIssuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			for _, leaf := range issuedLeaves(c) {
				Eventually(func(g Gomega) []byte {
					s := &corev1.Secret{}
					g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), s)).To(Succeed())
					return s.Data["ca.crt"]
				}, timeout, interval).Should(Equal(ca.CertPEM), leaf.SecretName)
			}
			Eventually(func() error {
				return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), &appsv1.StatefulSet{})
			}, timeout, interval).Should(Succeed())
		})

		It("has cert-manager issue the server, peer and client certificates, chained to the issuer's CA, and then builds the members", func() {
			c := issuedCluster(certManagerNS, "ca", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())

			for _, leaf := range issuedLeaves(c) {
				cert := certificateObject(c.Namespace, resources.CertificateName(leaf))
				Eventually(func(g Gomega) string {
					g.Expect(get(ctx, cert)).To(Succeed())
					status, _ := readyCondition(cert)
					return status
				}, timeout, interval).Should(Equal("True"), "Certificate %s becomes Ready", cert.GetName())
				Expect(cert.GetOwnerReferences()).To(ContainElement(HaveField("UID", c.UID)))
			}
			for _, leaf := range issuedLeaves(c) {
				Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), &corev1.Secret{}) }, timeout, interval).
					Should(Succeed(), "the operator writes %s from cert-manager's staging Secret", leaf.SecretName)
			}

			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			member := resources.MemberName(c, 4) + "." + c.Name + "." + c.Namespace + ".svc.cluster.local"
			for _, check := range []struct {
				secret, name string
				usage        x509.ExtKeyUsage
			}{
				{resources.ServerSecretName(c), member, x509.ExtKeyUsageServerAuth},
				{resources.ServerSecretName(c), resources.ClientServiceName(c) + "." + c.Namespace + ".svc", x509.ExtKeyUsageServerAuth},
				{resources.ServerSecretName(c), "localhost", x509.ExtKeyUsageClientAuth},
				{resources.PeerSecretName(c), member, x509.ExtKeyUsageServerAuth},
				{resources.PeerSecretName(c), member, x509.ExtKeyUsageClientAuth},
				{resources.ClientSecretName(c), "", x509.ExtKeyUsageClientAuth},
			} {
				s := &corev1.Secret{}
				Expect(k8sClient.Get(ctx, key(c.Namespace, check.secret), s)).To(Succeed())
				Expect(s.Data["ca.crt"]).To(Equal(ca.CertPEM), "%s carries the issuer's CA", check.secret)
				Expect(s.Labels).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy), check.secret)
				cert, err := pki.ParseCertificate(s.Data[corev1.TLSCertKey])
				Expect(err).NotTo(HaveOccurred())
				_, err = cert.Verify(x509.VerifyOptions{DNSName: check.name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{check.usage}})
				Expect(err).NotTo(HaveOccurred(), "%s for %q", check.secret, check.name)
			}
			peer := &corev1.Secret{}
			Expect(k8sClient.Get(ctx, key(c.Namespace, resources.PeerSecretName(c)), peer)).To(Succeed())
			peerCert, err := pki.ParseCertificate(peer.Data[corev1.TLSCertKey])
			Expect(err).NotTo(HaveOccurred())
			Expect(peerCert.Subject.CommonName).To(Equal(resources.PeerCommonName(c)), "the peer port accepts only this name")

			By("the members mount the Secrets cert-manager wrote")
			sts := &appsv1.StatefulSet{}
			Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts) }, timeout, interval).Should(Succeed())
			var mounted []string
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					mounted = append(mounted, v.Secret.SecretName)
				}
			}
			Expect(mounted).To(ContainElements(resources.ServerSecretName(c), resources.PeerSecretName(c)))
			Eventually(func(g Gomega) {
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
				g.Expect(c.Status.TLS).NotTo(BeNil())
				g.Expect(c.Status.TLS.Certificates).To(HaveLen(3), "server, peer and client; the CA is the issuer's")
				g.Expect(conditionOf(c, etcdv1beta1.ConditionDegraded)).NotTo(HaveField("Reason", BeElementOf(
					ReasonCertManagerMissing, ReasonIssuerNotReady, ReasonCertificatesPending)))
			}, timeout, interval).Should(Succeed())

			By("a steady-state reconcile writes nothing, Certificates included")
			for round := range 3 {
				mgrWrite.reset()
				before := mgrRuns.Load()
				Expect(retryUpdate(ctx, c, func(o client.Object) {
					o.SetAnnotations(map[string]string{"test/round": fmt.Sprint(round)})
				})).To(Succeed())
				Eventually(mgrRuns.Load, timeout, interval).Should(BeNumerically(">", before))
				Expect(mgrWrite.about(c.Name)).To(BeEmpty(), "steady-state reconcile %d wrote", round)
			}
		})

		It("refuses issuerRef removed from a cluster whose certificates cert-manager issues, changes nothing, and clears when it is set back", func() {
			c := issuedCluster(certManagerNS, "ca", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
				g.Expect(c.Status.TLS).NotTo(BeNil())
				g.Expect(c.Status.TLS.Certificates).To(HaveLen(3))
				g.Expect(runningState(ctx, c)(g)).To(HaveKeyWithValue("StatefulSet", Not(Equal("absent"))))
			}, timeout, interval).Should(Succeed())
			before := runningState(ctx, c)(Default)
			Expect(before).To(HaveKeyWithValue("Secret "+resources.CASecretName(c), "absent"), "the issuer holds the CA")

			Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = nil })).
				To(Succeed(), "the API server leaves removing issuerRef to the operator")
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerRefRefused),
				HaveField("Message", ContainSubstring("spec.tls.issuerRef was removed from a cluster whose certificates cert-manager issues")),
				HaveField("Message", ContainSubstring("Set spec.tls.issuerRef back (name: ca, kind: Issuer, group: cert-manager.io)"))))
			Consistently(runningState(ctx, c), 2*time.Second, interval).Should(Equal(before),
				"no CA is created, no certificate replaced, no member touched")

			Expect(retryUpdate(ctx, c, func(o client.Object) {
				o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca", Kind: "Issuer"}
			})).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).
				ShouldNot(HaveField("Reason", ReasonIssuerRefRefused), "the refusal clears with issuerRef set back")
			Expect(runningState(ctx, c)(Default)).To(Equal(before))
		})

		It("takes a certificate cert-manager renews without touching the members", func() {
			c := issuedCluster(certManagerNS, "ca", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			sts := &appsv1.StatefulSet{}
			Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts) }, timeout, interval).Should(Succeed())
			server := &corev1.Secret{}
			serial := func(g Gomega) string {
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.ServerSecretName(c)), server)).To(Succeed())
				cert, err := pki.ParseCertificate(server.Data[corev1.TLSCertKey])
				g.Expect(err).NotTo(HaveOccurred())
				return cert.SerialNumber.String()
			}
			first := serial(Default)
			Eventually(func(g Gomega) {
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.TLS).NotTo(BeNil())
				g.Expect(c.Status.TLS.Certificates).To(HaveLen(3))
			}, timeout, interval).Should(Succeed())
			mgrWrite.reset()

			By("asking cert-manager to renew, as `cmctl renew` does (its Issuing condition)")
			cert := certificateObject(c.Namespace, resources.CertificateName(issuedLeaves(c)[0]))
			Expect(get(ctx, cert)).To(Succeed())
			conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
			conditions = append(conditions, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
				"message": "renewal requested by the test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			Expect(unstructured.SetNestedSlice(cert.Object, conditions, "status", "conditions")).To(Succeed())
			Expect(k8sClient.Status().Update(ctx, cert)).To(Succeed())

			Eventually(serial, timeout, interval).ShouldNot(Equal(first), "cert-manager issued a new server certificate")
			Expect(server.Data["ca.crt"]).To(Equal(ca.CertPEM))
			Eventually(func(g Gomega) int64 {
				g.Expect(get(ctx, cert)).To(Succeed())
				revision, _, _ := unstructured.NestedInt64(cert.Object, "status", "revision")
				return revision
			}, timeout, interval).Should(BeNumerically(">=", 2))

			By("members read renewed files from their Secret volumes: the StatefulSet is not changed")
			Consistently(func(g Gomega) {
				now := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), now)).To(Succeed())
				g.Expect(now.Generation).To(Equal(sts.Generation))
				for _, w := range mgrWrite.about(c.Name) {
					g.Expect(w).NotTo(ContainSubstring("/statefulsets/"))
					g.Expect(w).NotTo(ContainSubstring("/certificates/"), "the operator leaves renewal to cert-manager")
				}
			}, 2*time.Second, interval).Should(Succeed())
		})

		It("mounts what cert-manager writes into staging Secrets, and takes a renewal from the same CA at once, without a roll", func() {
			c := issuedCluster(certManagerNS, "ca", "Issuer")
			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			sts := &appsv1.StatefulSet{}
			Eventually(func() error { return k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts) }, timeout, interval).Should(Succeed())
			Expect(sts.Spec.Template.Annotations).NotTo(HaveKey(resources.AnnotationTrustBundle), "one CA: the template is as before bundles")
			mountsIssued := func(g Gomega, leaf resources.LeafCertificate) *corev1.Secret {
				staged, mounted := &corev1.Secret{}, &corev1.Secret{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.IssuedSecretName(leaf)), staged)).To(Succeed())
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), mounted)).To(Succeed())
				g.Expect(staged.Annotations).To(HaveKeyWithValue("cert-manager.io/certificate-name", resources.CertificateName(leaf)))
				g.Expect(mounted.Data[corev1.TLSCertKey]).To(Equal(staged.Data[corev1.TLSCertKey]), leaf.SecretName)
				g.Expect(mounted.Data[corev1.TLSPrivateKeyKey]).To(Equal(staged.Data[corev1.TLSPrivateKeyKey]), leaf.SecretName)
				g.Expect(mounted.Data[resources.CAKey]).To(Equal(ca.CertPEM), "the trust bundle of one CA is that CA")
				g.Expect(mounted.Annotations).To(HaveKeyWithValue(resources.AnnotationCertificate, resources.CertificateName(leaf)))
				g.Expect(metav1.IsControlledBy(mounted, c)).To(BeTrue(), "%s is the operator's", leaf.SecretName)
				return mounted
			}
			peer := issuedLeaves(c)[1]
			var first []byte
			Eventually(func(g Gomega) {
				for _, leaf := range issuedLeaves(c) {
					mountsIssued(g, leaf)
				}
				first = mountsIssued(g, peer).Data[corev1.TLSCertKey]
			}, timeout, interval).Should(Succeed())

			renewNow(ctx, c.Namespace, resources.CertificateName(peer))
			Eventually(func(g Gomega) []byte { return mountsIssued(g, peer).Data[corev1.TLSCertKey] }, timeout, interval).
				ShouldNot(Equal(first), "the renewed peer certificate is mounted")
			Consistently(func(g Gomega) {
				now := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), now)).To(Succeed())
				g.Expect(now.Generation).To(Equal(sts.Generation), "no member restarts for a renewal from the same CA")
				mountsIssued(g, peer)
			}, 2*time.Second, interval).Should(Succeed())
		})

		It("carries a change of the issuer's CA through a trust bundle: both CAs, a roll, the new certificates, then the new CA alone", func() {
			name := "rotated-ca"
			c, old := caIssuedCluster(ctx, name)
			log := changeIssuerCA(ctx, c, name, old)
			next := log.new

			By("the members end up trusting the new CA alone, with its certificates")
			Eventually(func(g Gomega) {
				mountsCA(ctx, g, c, next.CertPEM, next)
				sts := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
				g.Expect(sts.Spec.Template.Annotations).NotTo(HaveKey(resources.AnnotationTrustBundle))
				g.Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(g)).NotTo(HaveField("Reason", ReasonCARotating))
			}, timeout, interval).Should(Succeed())
			Expect(log.check(c)).To(BeEmpty(), "every mounted Secret and member template version, in order")

			By("events say where the change went")
			Eventually(func(g Gomega) []string {
				var notes []string
				events, err := eventsWithReason(ctx, c, ReasonCARotating)
				g.Expect(err).NotTo(HaveOccurred())
				for _, e := range events {
					notes = append(notes, e.Note)
				}
				return notes
			}, timeout, interval).Should(ContainElements(
				ContainSubstring("added to the trust bundle"),
				ContainSubstring("every member trusts CA \""+next.Cert.Subject.String()+"\": its certificates are taken into the mounted Secrets"),
				ContainSubstring("dropped from the trust bundle"),
				ContainSubstring("Progressing=True: the issuer's CA changed")))
		})

		It("holds the new CA's certificates until every member pod runs with the bundle, and resumes after an operator restart", func() {
			name := "resumed-ca"
			c, old := caIssuedCluster(ctx, name)
			image := resources.Image(c, resources.DefaultOptions())
			makeMemberPods(ctx, c, 3, image)

			log := changeIssuerCA(ctx, c, name, old)
			next, both := log.new, log.both
			template := func(g Gomega) string {
				sts := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
				return sts.Spec.Template.Annotations[resources.AnnotationTrustBundle]
			}
			bothPEM := append(append([]byte{}, old.CertPEM...), next.CertPEM...)
			By("both CAs in the bundle and the template; the members still run without it, so the old certificates stay")
			Eventually(func(g Gomega) {
				mountsCA(ctx, g, c, bothPEM, old)
				g.Expect(template(g)).To(Equal(both))
				g.Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(g)).To(And(statusIs(metav1.ConditionTrue, ReasonCARotating),
					HaveField("Message", ContainSubstring("to restart, one at a time, with the trust bundle"))))
			}, timeout, interval).Should(Succeed())
			Consistently(func(g Gomega) { mountsCA(ctx, g, c, bothPEM, old) }, 2*time.Second, interval).Should(Succeed())

			By("an operator restart in the middle of the change")
			stopOperator()
			stopOperator = startOperator()
			Consistently(func(g Gomega) {
				mountsCA(ctx, g, c, bothPEM, old)
				g.Expect(template(g)).To(Equal(both))
			}, 2*time.Second, interval).Should(Succeed(), "the restarted operator holds the certificates as the last one did")

			// restart plays the StatefulSet controller: member i's pod again, from the template with digest.
			restart := func(i int, digest string) {
				pod := &corev1.Pod{}
				Expect(k8sClient.Get(ctx, key(c.Namespace, resources.MemberName(c, i)), pod)).To(Succeed())
				Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
				Eventually(func() bool { return apierrors.IsNotFound(get(ctx, pod)) }, timeout, interval).Should(BeTrue())
				pod = &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i), Namespace: c.Namespace,
						Labels: resources.Labels(c, resources.ComponentEtcd)},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}},
				}
				if digest != "" {
					pod.Annotations = map[string]string{resources.AnnotationTrustBundle: digest}
				}
				Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			}
			By("the members restart with the bundle; until the last has, the old certificates stay")
			restart(0, both)
			restart(1, both)
			Consistently(func(g Gomega) { mountsCA(ctx, g, c, bothPEM, old) }, 2*time.Second, interval).Should(Succeed())
			restart(2, both)

			By("then the new certificates, then the new CA alone, and a last roll")
			Eventually(func(g Gomega) {
				mountsCA(ctx, g, c, next.CertPEM, next)
				g.Expect(template(g)).To(BeEmpty())
				g.Expect(condition(ctx, c, etcdv1beta1.ConditionProgressing)(g)).To(And(statusIs(metav1.ConditionTrue, ReasonCARotating),
					HaveField("Message", ContainSubstring("the members restart one at a time to trust CA"))))
			}, timeout, interval).Should(Succeed())
			for i := range 3 {
				restart(i, "")
			}
			Eventually(condition(ctx, c, etcdv1beta1.ConditionProgressing), timeout, interval).ShouldNot(HaveField("Reason", ReasonCARotating))
			Expect(log.check(c)).To(BeEmpty(), "every mounted Secret and member template version, in order")
		})

		It("migrates a cluster whose Certificates wrote the mounted Secrets themselves, without a roll, and still knows who signs them", func() {
			c := issuedCluster(certManagerNS, "ca", "Issuer")
			By("the Certificates of an earlier operator, writing the Secrets the members mount")
			before := map[string][]byte{}
			for _, leaf := range issuedLeaves(c) {
				cert := resources.Certificate(c, leaf)
				Expect(unstructured.SetNestedField(cert.Object, leaf.SecretName, "spec", "secretName")).To(Succeed())
				cert.SetOwnerReferences(nil)
				Expect(k8sClient.Create(ctx, cert)).To(Succeed())
			}
			for _, leaf := range issuedLeaves(c) {
				Eventually(func(g Gomega) {
					s := &corev1.Secret{}
					g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), s)).To(Succeed())
					g.Expect(s.Annotations).To(HaveKeyWithValue("cert-manager.io/certificate-name", resources.CertificateName(leaf)))
					before[leaf.SecretName] = s.Data[corev1.TLSCertKey]
				}, timeout, interval).Should(Succeed())
			}

			Expect(k8sClient.Create(ctx, c)).To(Succeed())
			Eventually(func(g Gomega) {
				for _, leaf := range issuedLeaves(c) {
					cert := certificateObject(c.Namespace, resources.CertificateName(leaf))
					g.Expect(get(ctx, cert)).To(Succeed())
					secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
					g.Expect(secretName).To(Equal(resources.IssuedSecretName(leaf)))
					staged, mounted := &corev1.Secret{}, &corev1.Secret{}
					g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.IssuedSecretName(leaf)), staged)).To(Succeed())
					g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), mounted)).To(Succeed())
					g.Expect(mounted.Data[corev1.TLSCertKey]).To(Equal(staged.Data[corev1.TLSCertKey]), "the operator took %s over", leaf.SecretName)
					g.Expect(mounted.Data[corev1.TLSCertKey]).NotTo(Equal(before[leaf.SecretName]))
					g.Expect(mounted.Data[resources.CAKey]).To(Equal(ca.CertPEM))
					g.Expect(mounted.Annotations).To(HaveKeyWithValue(resources.AnnotationCertificate, resources.CertificateName(leaf)))
					g.Expect(metav1.IsControlledBy(mounted, c)).To(BeTrue())
				}
				sts := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
				g.Expect(sts.Spec.Template.Annotations).NotTo(HaveKey(resources.AnnotationTrustBundle), "the same CA: no roll")
				g.Expect(get(ctx, c)).To(Succeed())
				g.Expect(c.Status.TLS).NotTo(BeNil())
				g.Expect(c.Status.TLS.Certificates).To(HaveLen(3))
			}, timeout, interval).Should(Succeed())

			By("removing issuerRef is still refused, naming the issuer")
			Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = nil })).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).Should(And(
				statusIs(metav1.ConditionTrue, ReasonIssuerRefRefused),
				HaveField("Message", ContainSubstring("Set spec.tls.issuerRef back (name: ca, kind: Issuer, group: cert-manager.io)"))))
			Expect(retryUpdate(ctx, c, func(o client.Object) {
				o.(*etcdv1beta1.EtcdCluster).Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca", Kind: "Issuer"}
			})).To(Succeed())
			Eventually(condition(ctx, c, etcdv1beta1.ConditionDegraded), timeout, interval).
				ShouldNot(HaveField("Reason", ReasonIssuerRefRefused))
		})
	})
})

// caIssuedCluster creates a CA Issuer of its own CA Secret (both named name) in certManagerNS and a cluster of
// its certificates, and waits until the cluster has its StatefulSet and every mounted Secret trusts that CA.
func caIssuedCluster(ctx context.Context, name string) (*etcdv1beta1.EtcdCluster, *pki.CA) {
	old, _ := caIssuer(ctx, name)
	c := issuedCluster(certManagerNS, name, "Issuer")
	Expect(k8sClient.Create(ctx, c)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), &appsv1.StatefulSet{})).To(Succeed())
		for _, leaf := range issuedLeaves(c) {
			s := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), s)).To(Succeed())
			g.Expect(s.Data[resources.CAKey]).To(Equal(old.CertPEM))
		}
	}, timeout, interval).Should(Succeed())
	return c, old
}

// changeIssuerCA gives the Issuer name of c a new CA in place of old: it follows c's mounted Secrets and
// StatefulSet from then on in the caChangeLog it returns (whose new is that CA), replaces the Issuer's CA
// Secret and renews every certificate of c as `cmctl renew` does.
func changeIssuerCA(ctx context.Context, c *etcdv1beta1.EtcdCluster, name string, old *pki.CA) *caChangeLog {
	next, nextKey, err := pki.NewCA(name+" next CA", 24*time.Hour, time.Now())
	Expect(err).NotTo(HaveOccurred())
	log := &caChangeLog{old: old, new: next, both: resources.TrustBundleDigest(resources.CASet{old.Cert, next.Cert}),
		bundleBoth: map[string]uint64{}, leafNew: map[string]uint64{}, bundleNew: map[string]uint64{}}
	wctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	log.follow(wctx, c)

	By("replacing the issuer's CA, then renewing every certificate as `cmctl renew` does")
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: certManagerNS}}
	Expect(retryUpdate(ctx, caSecret, func(o client.Object) {
		o.(*corev1.Secret).Data = map[string][]byte{corev1.TLSCertKey: next.CertPEM, corev1.TLSPrivateKeyKey: nextKey}
	})).To(Succeed())
	for _, leaf := range issuedLeaves(c) {
		renewNow(ctx, c.Namespace, resources.CertificateName(leaf))
	}
	return log
}

// mountsCA checks every mounted Secret of c holds the given bundle as ca.crt and a certificate of ca.
func mountsCA(ctx context.Context, g Gomega, c *etcdv1beta1.EtcdCluster, bundle []byte, ca *pki.CA) {
	for _, leaf := range issuedLeaves(c) {
		s := &corev1.Secret{}
		g.Expect(k8sClient.Get(ctx, key(c.Namespace, leaf.SecretName), s)).To(Succeed())
		g.Expect(s.Data[resources.CAKey]).To(Equal(bundle), "the ca.crt of %s", leaf.SecretName)
		cert, err := pki.ParseCertificate(s.Data[corev1.TLSCertKey])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cert.CheckSignatureFrom(ca.Cert)).To(Succeed(), "%s holds a certificate of %s", leaf.SecretName, ca.Cert.Subject)
	}
}

// conditionOf is the condition of type t of c as last read (nil when absent).
func conditionOf(c *etcdv1beta1.EtcdCluster, t string) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// runningState is what a refused spec must leave as it is, by resourceVersion ("absent" when missing): the
// members' StatefulSet and configuration, the operator's CA Secret and the certificate Secrets.
func runningState(ctx context.Context, c *etcdv1beta1.EtcdCluster) func(g Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		objs := map[string]client.Object{
			"StatefulSet": &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: resources.StatefulSetName(c), Namespace: c.Namespace}},
			"ConfigMap":   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: resources.ConfigMapName(c), Namespace: c.Namespace}},
		}
		secrets := []string{resources.CASecretName(c)}
		for _, leaf := range issuedLeaves(c) {
			secrets = append(secrets, leaf.SecretName)
		}
		for _, name := range secrets {
			objs["Secret "+name] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
		}
		state := map[string]string{}
		for what, o := range objs {
			switch err := get(ctx, o); {
			case apierrors.IsNotFound(err):
				state[what] = "absent"
			default:
				g.Expect(err).NotTo(HaveOccurred())
				state[what] = o.GetResourceVersion()
			}
		}
		return state
	}
}
