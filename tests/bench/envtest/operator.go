package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	rpprof "runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/seedops/etcd-operator/controllers"
	"github.com/seedops/etcd-operator/internal/memlimit"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Stats is what the operator process reports to the harness.
type Stats struct {
	Synced     bool  `json:"synced"`
	RSSKiB     int64 `json:"rssKiB"`
	PeakRSSKiB int64 `json:"peakRSSKiB"` // VmHWM: the kernel's high-water mark
	// RSSFileKiB is the file-backed part of RSS (the binary's mapped pages): memory GOMEMLIMIT does not
	// govern, so the peak RSS is bounded by the limit plus this.
	RSSFileKiB    int64    `json:"rssFileKiB"`
	HeapInuse     uint64   `json:"heapInuse"`
	PeakHeapInuse uint64   `json:"peakHeapInuse"` // sampled every 100 ms
	HeapAlloc     uint64   `json:"heapAlloc"`
	PeakHeapAlloc uint64   `json:"peakHeapAlloc"`
	NumGC         uint32   `json:"numGC"`
	Writes        int64    `json:"writes"`
	WriteLog      []string `json:"writeLog,omitempty"`
	Reconciles    float64  `json:"reconciles"` // EtcdCluster controller, every result
	ReconcileErrs float64  `json:"reconcileErrors"`
	QueueDepth    float64  `json:"queueDepth"`
	ActiveWorkers float64  `json:"activeWorkers"`
	// Reads lists every distinct list or watch the operator sent, with its label selector: the proof
	// of what it caches.
	Reads []string `json:"reads"`
}

// operatorProc is the operator side: the manager built as cmd/main.go builds it, on a connection that
// counts writes, plus a localhost endpoint for stats and pprof. It runs in its own process so its RSS
// is the operator's alone.
type operatorProc struct {
	synced    atomic.Bool
	mu        sync.Mutex
	writes    int64
	writeLog  []string
	reads     map[string]bool
	peakInuse uint64
	peakAlloc uint64
	cpuFile   *os.File
}

func runOperator() error {
	// Production logging (info, JSON) to stderr, which the harness sends to a file: as in the image.
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
	// As cmd/main.go: the soft memory limit from the container's limit the harness passes on.
	if _, err := memlimit.Apply(os.Getenv); err != nil {
		return err
	}

	// As ctrl.GetConfigOrDie in cmd/main.go (KUBECONFIG from the harness): client-side throttling off.
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	p := &operatorProc{reads: map[string]bool{}}
	cfg.Wrap(p.wrap)

	// From here on: cmd/main.go, minus flags, probes, metrics serving and leader election.
	options := resources.DefaultOptions()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(os.Getenv("WATCH_NAMESPACE")),
	})
	if err != nil {
		return err
	}
	if err := controllers.Setup(mgr, controllers.Config{Options: options, HealAfter: 3 * time.Minute, HealthInterval: 30 * time.Second,
		MaxConcurrentReconciles: envInt("BENCH_MAX_CONCURRENT_RECONCILES", 4)}); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(p.stats())
	})
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.writes, p.writeLog = 0, nil
		p.mu.Unlock()
	})
	mux.HandleFunc("/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			err = rpprof.StartCPUProfile(f)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.cpuFile = f
	})
	mux.HandleFunc("/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		rpprof.StopCPUProfile()
		if p.cpuFile != nil {
			_ = p.cpuFile.Close()
		}
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	go func() { _ = http.Serve(ln, mux) }()
	// The harness reads the stats address from the first line of stdout.
	fmt.Println(ln.Addr().String())

	ctx := ctrl.SetupSignalHandler()
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			p.synced.Store(true)
		}
	}()
	go p.sampleHeap(ctx)
	return mgr.Start(ctx)
}

// wrap counts mutating requests (anything but GET) and records the distinct lists and watches.
// metadataReadMark ends a recorded read made for metadata only (a metadata informer's list and watch).
const metadataReadMark = " (metadata)"

func (p *operatorProc) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		p.mu.Lock()
		if req.Method != http.MethodGet {
			p.writes++
			if len(p.writeLog) < 50 {
				p.writeLog = append(p.writeLog, req.Method+" "+req.URL.Path)
			}
		} else if q := req.URL.Query(); q.Get("watch") == "true" || q.Has("resourceVersion") || q.Has("limit") {
			key := req.URL.Path + "?labelSelector=" + q.Get("labelSelector")
			if strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
				key += metadataReadMark
			}
			p.reads[key] = true
		}
		p.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// sampleHeap tracks the heap's peak between GCs, which a single read at the end would miss.
func (p *operatorProc) sampleHeap(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var ms runtime.MemStats
	for {
		runtime.ReadMemStats(&ms)
		p.mu.Lock()
		p.peakInuse = max(p.peakInuse, ms.HeapInuse)
		p.peakAlloc = max(p.peakAlloc, ms.HeapAlloc)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *operatorProc) stats() Stats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, hwm, file := procStatus()
	p.mu.Lock()
	s := Stats{
		Synced: p.synced.Load(), RSSKiB: rss, PeakRSSKiB: hwm, RSSFileKiB: file,
		HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, NumGC: ms.NumGC,
		PeakHeapInuse: max(p.peakInuse, ms.HeapInuse), PeakHeapAlloc: max(p.peakAlloc, ms.HeapAlloc),
		Writes: p.writes, WriteLog: append([]string(nil), p.writeLog...),
	}
	for r := range p.reads {
		s.Reads = append(s.Reads, r)
	}
	p.mu.Unlock()
	sort.Strings(s.Reads)

	// controller-runtime's own metrics: the reconcile counter, queue depth and busy workers.
	families, _ := metrics.Registry.Gather()
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			ours := false
			result := ""
			for _, l := range m.GetLabel() {
				if l.GetValue() == "etcdcluster" && (l.GetName() == "controller" || l.GetName() == "name") {
					ours = true
				}
				if l.GetName() == "result" {
					result = l.GetValue()
				}
			}
			if !ours {
				continue
			}
			switch mf.GetName() {
			case "controller_runtime_reconcile_total":
				s.Reconciles += m.GetCounter().GetValue()
				if result == "error" {
					s.ReconcileErrs += m.GetCounter().GetValue()
				}
			case "workqueue_depth":
				s.QueueDepth += m.GetGauge().GetValue()
			case "controller_runtime_active_workers":
				s.ActiveWorkers += m.GetGauge().GetValue()
			}
		}
	}
	return s
}

// procStatus returns VmRSS, VmHWM and RssFile in KiB.
func procStatus() (rss, hwm, file int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		case "RssFile:":
			file = v
		}
	}
	return rss, hwm, file
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}
