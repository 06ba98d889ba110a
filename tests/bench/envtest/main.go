// Command envtest benchmarks the operator's control plane at scale on envtest (no node): 1,000
// EtcdClusters created at once among 10,000 unrelated ConfigMaps, Secrets and Pods. It measures the time
// until every cluster is reconciled into its objects, reconciles per second, API writes at rest and per
// steady-state reconcile, and the operator's peak RSS and heap, and writes CPU and heap profiles.
//
// The operator runs in a child process (this binary, "operator" mode, building the manager as
// cmd/main.go does) so that its RSS is not mixed with the harness's. Not a test: it never fails on a
// figure; it writes them to -out as JSON for the report.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/memlimit"
	"github.com/seedops/etcd-operator/internal/resources"
)

var scheme = k8sruntime.NewScheme()

// maxConcurrentReconciles is passed to the operator process (BENCH_MAX_CONCURRENT_RECONCILES).
var maxConcurrentReconciles = 4

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1beta1.AddToScheme(scheme))
}

// Result is one run's figures.
type Result struct {
	Clusters   int `json:"clusters"`
	Unrelated  int `json:"unrelated"`
	Namespaces int `json:"namespaces"`
	// MaxConcurrentReconciles is the operator's --max-concurrent-reconciles.
	MaxConcurrentReconciles int      `json:"maxConcurrentReconciles"`
	GoMemLimit              string   `json:"goMemLimit"`          // the operator process's GOMEMLIMIT
	LoadSeconds             float64  `json:"loadSeconds"`         // creating the unrelated objects
	CreateSeconds           float64  `json:"createSeconds"`       // creating the clusters (harness side)
	ReconciledSeconds       float64  `json:"reconciledSeconds"`   // creation start until every cluster has all its objects and current status
	SettledSeconds          float64  `json:"settledSeconds"`      // ... until the work queue is also empty
	Reconciles              float64  `json:"reconciles"`          // during the burst, until settled
	ReconcilesPerSecond     float64  `json:"reconcilesPerSecond"` // reconciles / settledSeconds
	WritesBurst             int64    `json:"writesBurst"`
	WritesAtRest            int64    `json:"writesAtRest"` // in RestSeconds without any change
	RestWriteLog            []string `json:"restWriteLog,omitempty"`
	RestSeconds             float64  `json:"restSeconds"`
	SteadyReconciles        float64  `json:"steadyReconciles"` // one per cluster, triggered by an annotation
	SteadyWrites            int64    `json:"steadyWrites"`
	SteadyWriteLog          []string `json:"steadyWriteLog,omitempty"`
	SteadyReconcilesPS      float64  `json:"steadyReconcilesPerSecond"`
	IdleRSSMiB              float64  `json:"idleRSSMiB"` // synced, unrelated objects loaded, no cluster yet
	IdleHeapMiB             float64  `json:"idleHeapMiB"`
	PeakRSSMiB              float64  `json:"peakRSSMiB"` // VmHWM over the whole run
	PeakHeapInuseMiB        float64  `json:"peakHeapInuseMiB"`
	PeakHeapAllocMiB        float64  `json:"peakHeapAllocMiB"`
	FinalRSSMiB             float64  `json:"finalRSSMiB"`
	FinalRSSFileMiB         float64  `json:"finalRSSFileMiB"` // file-backed (the binary), outside GOMEMLIMIT
	FinalHeapInuseMiB       float64  `json:"finalHeapInuseMiB"`
	Reads                   []string `json:"reads"`
	SecretsWatched          bool     `json:"secretsWatched"`
	UnfilteredWatches       []string `json:"unfilteredWatches"` // lists/watches of managed kinds without the managed-by selector
	WatchedTwice            []string `json:"watchedTwice"`      // kinds watched both in full and as metadata (two caches of one kind)
	Load1                   string   `json:"loadavg"`           // /proc/loadavg at the end of the run
	CPUProfile              string   `json:"cpuProfile"`
	HeapProfile             string   `json:"heapProfile"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "operator" {
		if err := runOperator(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	// The harness's own client-go logs are noise here; the operator logs to operator-<run>.log.
	logf.SetLogger(logr.Discard())
	clusters := flag.Int("clusters", 1000, "EtcdClusters created at once")
	unrelated := flag.Int("unrelated", 10000, "unrelated ConfigMaps, Secrets and Pods (a third each)")
	namespaces := flag.Int("namespaces", 10, "namespaces the clusters and unrelated objects are spread over")
	runs := flag.Int("runs", 3, "runs, each on a fresh envtest")
	rest := flag.Duration("rest", 20*time.Second, "how long to count writes at rest")
	out := flag.String("out", "bin/bench/envtest", "directory for results.json, profiles and operator logs")
	crds := flag.String("crds", "config/crd/bases", "CRD directories, comma-separated (add controllers/testdata/crds for prometheus-operator's PodMonitor and PrometheusRule: every cluster then gets one of each)")
	concurrency := flag.Int("max-concurrent-reconciles", 4, "the operator's --max-concurrent-reconciles (cmd/main.go's default)")
	flag.Parse()
	maxConcurrentReconciles = *concurrency

	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}
	// Interrupted, the run unwinds so envtest's API server and etcd and the operator are stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []Result
	for i := range *runs {
		fmt.Printf("run %d/%d: %d clusters, %d unrelated objects\n", i+1, *runs, *clusters, *unrelated)
		r, err := run(ctx, i, *clusters, *unrelated, *namespaces, *rest, *out, *crds)
		if err != nil {
			fatal(err)
		}
		results = append(results, r)
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(filepath.Join(*out, "results.json"), b, 0o644); err != nil {
			fatal(err)
		}
		printRun(r)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func run(ctx context.Context, idx, nClusters, nUnrelated, nNS int, rest time.Duration, out, crds string) (res Result, err error) {
	res = Result{Clusters: nClusters, Unrelated: nUnrelated, Namespaces: nNS, RestSeconds: rest.Seconds(),
		MaxConcurrentReconciles: maxConcurrentReconciles, GoMemLimit: operatorMemoryLimit()}

	env := &envtest.Environment{CRDDirectoryPaths: strings.Split(crds, ","), ErrorIfCRDPathMissing: true}
	// envtest's default service range (/24) holds ~250 cluster IPs; every cluster has a client Service.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		return res, fmt.Errorf("envtest (KUBEBUILDER_ASSETS?): %w", err)
	}
	defer func() { _ = env.Stop() }()
	// The harness creates objects in bulk: lift client-side throttling so the API server is the limit.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return res, err
	}

	nss := make([]string, nNS)
	for i := range nss {
		nss[i] = fmt.Sprintf("bench-%d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i]}}); err != nil {
			return res, err
		}
	}

	start := time.Now()
	if err := parallel(nUnrelated, func(i int) error { return c.Create(ctx, unrelatedObject(i, nss[i%nNS])) }); err != nil {
		return res, fmt.Errorf("unrelated objects: %w", err)
	}
	res.LoadSeconds = time.Since(start).Seconds()
	fmt.Printf("  %d unrelated objects in %.1fs\n", nUnrelated, res.LoadSeconds)

	// The operator, in its own process, with the same credentials as the harness.
	user, err := env.AddUser(envtest.User{Name: "etcd-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return res, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return res, err
	}
	kcPath := filepath.Join(out, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return res, err
	}
	op, err := startOperator(kcPath, filepath.Join(out, fmt.Sprintf("operator-%d.log", idx)))
	if err != nil {
		return res, err
	}
	defer op.stop()
	if _, err := op.waitFor(ctx, 2*time.Minute, func(s Stats) bool { return s.Synced }); err != nil {
		return res, fmt.Errorf("operator cache sync: %w", err)
	}
	// Idle: let the start-up garbage go, then read.
	time.Sleep(2 * time.Second) // settle GC after start-up; a fixed pause, not a wait for a condition
	idle, err := op.stats()
	if err != nil {
		return res, err
	}
	res.IdleRSSMiB, res.IdleHeapMiB = mib(idle.RSSKiB*1024), mib(int64(idle.HeapInuse))

	// The harness watches the outcome through its own cache (metadata only for owned kinds).
	watcher, err := newWatcher(ctx, cfg)
	if err != nil {
		return res, err
	}

	res.CPUProfile, _ = filepath.Abs(filepath.Join(out, fmt.Sprintf("cpu-%d.pprof", idx)))
	if err := op.get("/cpu/start?file=" + res.CPUProfile); err != nil {
		return res, err
	}
	before, _ := op.stats()
	start = time.Now()
	if err := parallel(nClusters, func(i int) error { return c.Create(ctx, benchCluster(i, nss[i%nNS])) }); err != nil {
		return res, fmt.Errorf("clusters: %w", err)
	}
	res.CreateSeconds = time.Since(start).Seconds()
	// At least 10 minutes, more for a larger run (the 1,000-cluster run takes about one): a bound on a
	// run that stopped converging, not a target.
	if err := watcher.waitAllReconciled(ctx, nClusters, max(10*time.Minute, time.Duration(nClusters)*300*time.Millisecond)); err != nil {
		return res, err
	}
	res.ReconciledSeconds = time.Since(start).Seconds()
	settled, err := op.waitFor(ctx, 5*time.Minute, func(s Stats) bool { return s.QueueDepth == 0 && s.ActiveWorkers == 0 })
	if err != nil {
		return res, err
	}
	res.SettledSeconds = time.Since(start).Seconds()
	_ = op.get("/cpu/stop")
	res.Reconciles = settled.Reconciles - before.Reconciles
	res.ReconcilesPerSecond = res.Reconciles / res.SettledSeconds
	res.WritesBurst = settled.Writes - before.Writes
	fmt.Printf("  %d clusters created in %.1fs, reconciled in %.1fs, settled in %.1fs (%.0f reconciles, %.0f/s, %d writes)\n",
		nClusters, res.CreateSeconds, res.ReconciledSeconds, res.SettledSeconds, res.Reconciles, res.ReconcilesPerSecond, res.WritesBurst)

	// At rest: nothing changes; the operator must not write.
	if err := op.get("/reset"); err != nil {
		return res, err
	}
	select { // the measurement window itself
	case <-time.After(rest):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	s, err := op.stats()
	if err != nil {
		return res, err
	}
	res.WritesAtRest, res.RestWriteLog = s.Writes, s.WriteLog

	// Steady state: one reconcile per cluster with nothing to change (an annotation triggers it).
	if err := op.get("/reset"); err != nil {
		return res, err
	}
	before, _ = op.stats()
	start = time.Now()
	if err := parallel(nClusters, func(i int) error {
		cl := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: nss[i%nNS], Name: clusterName(i)}}
		return c.Patch(ctx, cl, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"bench/touch":"1"}}}`)))
	}); err != nil {
		return res, err
	}
	s, err = op.waitFor(ctx, 5*time.Minute, func(s Stats) bool {
		return s.Reconciles-before.Reconciles >= float64(nClusters) && s.QueueDepth == 0 && s.ActiveWorkers == 0
	})
	if err != nil {
		return res, err
	}
	res.SteadyReconcilesPS = (s.Reconciles - before.Reconciles) / time.Since(start).Seconds()
	res.SteadyReconciles, res.SteadyWrites, res.SteadyWriteLog = s.Reconciles-before.Reconciles, s.Writes, s.WriteLog

	res.HeapProfile, _ = filepath.Abs(filepath.Join(out, fmt.Sprintf("heap-%d.pprof", idx)))
	if err := op.save("/debug/pprof/heap", res.HeapProfile); err != nil {
		return res, err
	}
	s, err = op.stats()
	if err != nil {
		return res, err
	}
	res.PeakRSSMiB, res.FinalRSSMiB = mib(s.PeakRSSKiB*1024), mib(s.RSSKiB*1024)
	res.FinalRSSFileMiB = mib(s.RSSFileKiB * 1024)
	res.PeakHeapInuseMiB, res.PeakHeapAllocMiB = mib(int64(s.PeakHeapInuse)), mib(int64(s.PeakHeapAlloc))
	res.FinalHeapInuseMiB = mib(int64(s.HeapInuse))
	res.Reads = s.Reads
	asMetadata := map[string]bool{}
	for _, r := range s.Reads {
		if path, ok := strings.CutSuffix(r, metadataReadMark); ok {
			asMetadata[strings.SplitN(path, "?", 2)[0]] = true
		}
	}
	for _, r := range s.Reads {
		if path := strings.SplitN(r, "?", 2)[0]; !strings.HasSuffix(r, metadataReadMark) && asMetadata[path] {
			res.WatchedTwice = append(res.WatchedTwice, path)
		}
		if strings.Contains(r, "/secrets") {
			res.SecretsWatched = true
		}
		for _, kind := range []string{"/secrets", "/configmaps", "/pods", "/services", "/statefulsets", "/persistentvolumeclaims", "/poddisruptionbudgets", "/cronjobs", "/jobs"} {
			if strings.HasSuffix(strings.SplitN(r, "?", 2)[0], kind) && !strings.Contains(r, resources.LabelManagedBy) {
				res.UnfilteredWatches = append(res.UnfilteredWatches, r)
			}
		}
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load1 = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	return res, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func clusterName(i int) string { return fmt.Sprintf("bench-%04d", i) }

// benchCluster is the README's sample cluster (with a backup schedule, so every owned kind is created).
func benchCluster(i int, ns string) *etcdv1beta1.EtcdCluster {
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName(i), Namespace: ns},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Version:        "3.5.9",
			Replicas:       3,
			StorageSize:    resource.MustParse("10Gi"),
			BackupSchedule: "0 2 * * *",
		},
	}
}

// unrelatedObject is the i-th of the unrelated ConfigMaps, Secrets and Pods, each with ~1 KiB of
// payload, so caching them would show in the operator's memory.
func unrelatedObject(i int, ns string) client.Object {
	meta := metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i), Namespace: ns, Labels: map[string]string{"app": "unrelated"}}
	payload := strings.Repeat("x", 1024)
	switch i % 3 {
	case 0:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"payload": payload}}
	case 1:
		return &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"payload": payload}}
	default:
		meta.Annotations = map[string]string{"payload": payload}
		return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}
	}
}

// parallel runs f for 0..n-1 on a few workers, returning the first error.
func parallel(n int, f func(int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	var failed atomic.Bool
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		})
	}
	for i := range n {
		if failed.Load() {
			break // stop feeding; workers drain
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// operator is the child process running the manager.
type operator struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
}

func startOperator(kubeconfig, logPath string) (*operator, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "operator")
	cmd.Stderr = logf
	// The Go runtime settings the manager container has (config/manager: the soft memory limit from the
	// container's memory limit, or BENCH_OPERATOR_MEMORY_LIMIT's; GOGC default), unless this environment
	// sets GOMEMLIMIT, or BENCH_OPERATOR_GOMEMLIMIT for the operator alone (the API server and etcd of
	// envtest keep theirs); WATCH_NAMESPACE empty: all namespaces.
	env := append(os.Environ(), "WATCH_NAMESPACE=", "KUBECONFIG="+kubeconfig,
		fmt.Sprintf("BENCH_MAX_CONCURRENT_RECONCILES=%d", maxConcurrentReconciles))
	if limit := os.Getenv("BENCH_OPERATOR_GOMEMLIMIT"); limit != "" {
		env = append(env, "GOMEMLIMIT="+limit)
	} else if os.Getenv("GOMEMLIMIT") == "" {
		limit, err := managerMemoryLimit(managerManifest)
		if err != nil {
			return nil, err
		}
		env = append(env, fmt.Sprintf("%s=%d", memlimit.EnvContainerLimit, limit.Value()))
	}
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("operator did not start (see %s): %w", logPath, err)
	}
	return &operator{cmd: cmd, addr: strings.TrimSpace(line), log: logf}, nil
}

func (o *operator) stop() {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = o.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = o.cmd.Process.Kill()
		<-done
	}
	_ = o.log.Close()
}

func (o *operator) get(path string) error {
	resp, err := http.Get("http://" + o.addr + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, b)
	}
	return nil
}

func (o *operator) save(path, file string) error {
	resp, err := http.Get("http://" + o.addr + path)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(f, resp.Body)
	return err
}

func (o *operator) stats() (Stats, error) {
	var s Stats
	resp, err := http.Get("http://" + o.addr + "/stats")
	if err != nil {
		return s, err
	}
	defer func() { _ = resp.Body.Close() }()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// waitFor polls the operator's own counters (in memory, no API traffic) until cond holds.
func (o *operator) waitFor(ctx context.Context, timeout time.Duration, cond func(Stats) bool) (Stats, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := o.stats()
		if err == nil && cond(s) {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("timed out after %s (last: %+v, err %v)", timeout, s, err)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watcher is the harness's view of the outcome, fed by watches.
type watcher struct {
	cache cache.Cache
	kinds map[string]schema.GroupVersionKind
}

func newWatcher(ctx context.Context, cfg *rest.Config) (*watcher, error) {
	sel := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	w := &watcher{kinds: map[string]schema.GroupVersionKind{
		"ConfigMap":           corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		"Service":             corev1.SchemeGroupVersion.WithKind("Service"),
		"StatefulSet":         appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		"PodDisruptionBudget": policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
		"CronJob":             batchv1.SchemeGroupVersion.WithKind("CronJob"),
	}}
	opts := cache.Options{Scheme: scheme, DefaultLabelSelector: sel,
		ByObject: map[client.Object]cache.ByObject{&etcdv1beta1.EtcdCluster{}: {Label: labels.Everything()}}}
	var err error
	if w.cache, err = cache.New(cfg, opts); err != nil {
		return nil, err
	}
	go func() { _ = w.cache.Start(ctx) }()
	if _, err := w.cache.GetInformer(ctx, &etcdv1beta1.EtcdCluster{}); err != nil {
		return nil, err
	}
	for _, gvk := range w.kinds {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		if _, err := w.cache.GetInformer(ctx, m); err != nil {
			return nil, err
		}
	}
	if !w.cache.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("harness cache did not sync")
	}
	return w, nil
}

// waitAllReconciled waits until n clusters exist, each with status for its generation, and every owned
// object of every cluster exists (two Services each).
func (w *watcher) waitAllReconciled(ctx context.Context, n int, timeout time.Duration) error {
	want := map[string]int{"ConfigMap": n, "Service": 2 * n, "StatefulSet": n, "PodDisruptionBudget": n, "CronJob": n}
	deadline := time.Now().Add(timeout)
	var missing []string
	for {
		missing = missing[:0]
		clusters := &etcdv1beta1.EtcdClusterList{}
		if err := w.cache.List(ctx, clusters); err != nil {
			return err
		}
		current := 0
		for _, c := range clusters.Items {
			if c.Status.ObservedGeneration == c.Generation {
				current++
			}
		}
		if current < n {
			missing = append(missing, fmt.Sprintf("status %d/%d", current, n))
		}
		for kind, gvk := range w.kinds {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := w.cache.List(ctx, l); err != nil {
				return err
			}
			if len(l.Items) < want[kind] {
				missing = append(missing, fmt.Sprintf("%s %d/%d", kind, len(l.Items), want[kind]))
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			return fmt.Errorf("not reconciled after %s: %v", timeout, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func printRun(r Result) {
	fmt.Printf("  writes at rest (%.0fs): %d; steady-state: %d writes in %.0f reconciles (%.0f/s)\n",
		r.RestSeconds, r.WritesAtRest, r.SteadyWrites, r.SteadyReconciles, r.SteadyReconcilesPS)
	fmt.Printf("  RSS idle %.1f MiB, peak %.1f MiB, final %.1f MiB; heap in use idle %.1f, peak %.1f, final %.1f MiB\n",
		r.IdleRSSMiB, r.PeakRSSMiB, r.FinalRSSMiB, r.IdleHeapMiB, r.PeakHeapInuseMiB, r.FinalHeapInuseMiB)
	fmt.Printf("  secrets watched: %v; managed kinds watched without the managed-by selector: %v; watched both in full and as metadata: %v; load %s; GOMAXPROCS %d\n",
		r.SecretsWatched, r.UnfilteredWatches, r.WatchedTwice, r.Load1, runtime.GOMAXPROCS(0))
}

// managerManifest is the operator's Deployment as kustomize deploys it.
const managerManifest = "config/manager/manager.yaml"

// managerMemoryLimit reads the manager container's memory limit, so the benchmark's operator runs with
// the soft memory limit the deployed one derives from it; BENCH_OPERATOR_MEMORY_LIMIT stands for another
// container limit.
func managerMemoryLimit(path string) (resource.Quantity, error) {
	if v := os.Getenv("BENCH_OPERATOR_MEMORY_LIMIT"); v != "" {
		return resource.ParseQuantity(v)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return resource.Quantity{}, err
	}
	for doc := range strings.SplitSeq(string(b), "\n---") {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal([]byte(doc), d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "manager" {
				return q, nil
			}
		}
	}
	return resource.Quantity{}, fmt.Errorf("%s: no memory limit on the manager container", path)
}

// operatorMemoryLimit is the soft memory limit the operator process runs with (see startOperator).
func operatorMemoryLimit() string {
	for _, v := range []string{os.Getenv("BENCH_OPERATOR_GOMEMLIMIT"), os.Getenv("GOMEMLIMIT")} {
		if v != "" {
			return v
		}
	}
	q, err := managerMemoryLimit(managerManifest)
	if err != nil {
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("%dMiB (%.0f%% of a %s container limit)", int64(float64(q.Value())*memlimit.Fraction)>>20, memlimit.Fraction*100, q.String())
}
