package controllers

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Namespaces of the suite: the manager watches the first two (WATCH_NAMESPACE), never the third.
const (
	watchedNS   = "etcd-a"
	watchedNS2  = "etcd-b"
	unwatchedNS = "elsewhere"
)

var (
	testEnv    *envtest.Environment
	k8sClient  client.Client
	cancel     context.CancelFunc
	writes     = &writeCounter{}
	reconciles atomic.Int64
	// auditLog is the API server's audit log of pod deletions (audit_test.go).
	auditLog string
	// serverMinor is the API server's Kubernetes minor version: the specs that stand in for a controller of
	// Kubernetes (the Job controller) write the status that release's controller would.
	serverMinor int
	// agentURLs maps a continuous backup agent's pod (namespace/name) to the URL of its report.
	agentURLs sync.Map
	// mgrClient is the manager's client: it reads from the manager's cache, as the operator does.
	mgrClient client.Client
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "EtcdCluster controller (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases"), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	auditLog = startAudit(testEnv)
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "envtest needs KUBEBUILDER_ASSETS: run `make test`")

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(etcdv1beta1.AddToScheme(scheme)).To(Succeed())
	// Each client of the suite names itself, so the audit log (audit_test.go) tells the specs' own requests
	// from the operator's.
	k8sClient, err = client.New(rest.AddUserAgent(rest.CopyConfig(cfg), "spec"), client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	version, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerVersion()
	Expect(err).NotTo(HaveOccurred())
	serverMinor, err = strconv.Atoi(strings.TrimRight(version.Minor, "+"))
	Expect(err).NotTo(HaveOccurred(), "server version %v", version)
	for _, ns := range []string{watchedNS, watchedNS2, unwatchedNS} {
		Expect(k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}

	// The manager's own connection counts every write it makes, so tests can prove a steady-state
	// reconcile writes nothing.
	mgrCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "operator "+watchedNS+","+watchedNS2)
	mgrCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writes.wrap(rt) })
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   CacheOptions(watchedNS + "," + watchedNS2),
	})
	Expect(err).NotTo(HaveOccurred())
	mgrClient = mgr.GetClient()
	r := &EtcdClusterReconciler{
		Client:    mgr.GetClient(),
		Scheme:    mgr.GetScheme(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("etcd-operator"),
		Options:   resources.DefaultOptions(),
		// Continuous backup agents' pods are objects only here: their reports come from test servers.
		AgentStatusURL: func(p *corev1.Pod) string {
			url, _ := agentURLs.Load(p.Namespace + "/" + p.Name)
			s, _ := url.(string)
			return s
		},
	}
	b, err := r.controllerBuilder(mgr)
	Expect(err).NotTo(HaveOccurred())
	r.metrics, err = registerClusterCollector(metrics.Registry, r.metrics)
	Expect(err).NotTo(HaveOccurred())
	Expect(b.Complete(countingReconciler{r})).To(Succeed())
	Expect((&EtcdBackupReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("etcd-operator"),
		Options:  resources.DefaultOptions(),
	}).SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	if auditLog != "" {
		Expect(os.RemoveAll(filepath.Dir(auditLog))).To(Succeed())
	}
})

// countingReconciler wraps the real reconciler and counts finished reconciles, so a test can wait for
// "a reconcile happened" without sleeping.
type countingReconciler struct{ r *EtcdClusterReconciler }

func (c countingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := c.r.Reconcile(ctx, req)
	reconciles.Add(1)
	return res, err
}

// writeCounter counts mutating API requests (anything but GET/LIST/WATCH), except leader election leases.
type writeCounter struct {
	mu    sync.Mutex
	count int
	log   []string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases/") {
			w.mu.Lock()
			w.count++
			w.log = append(w.log, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (w *writeCounter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count, w.log = 0, nil
}

func (w *writeCounter) get() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count, append([]string(nil), w.log...)
}

// about returns the writes to objects of the cluster named name (the cluster itself, the objects named after
// it, and its events): other specs' clusters in the same namespace reconcile on their own schedule.
func (w *writeCounter) about(name string) []string {
	_, log := w.get()
	var out []string
	for _, l := range log {
		last := l[strings.LastIndex(l, "/")+1:]
		if strings.HasSuffix(l, "/"+name+"/status") || last == name || strings.HasPrefix(last, name+"-") || strings.HasPrefix(last, name+".") {
			out = append(out, l)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
