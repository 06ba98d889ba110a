package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/memlimit"
)

// continuousKind is the folder of a cluster's continuous backup under its store prefix.
const continuousKind = "continuous"

// defaultRetentionInterval is how often the agent prunes chains when no new chain asks for it sooner.
const defaultRetentionInterval = time.Minute

// runContinuousBackupMode is `manager continuous-backup`: the long-running agent of one cluster's
// continuous backup. It needs no Kubernetes API access; the operator reads its /status.
func runContinuousBackupMode(args []string) int {
	fs := flag.NewFlagSet("continuous-backup", flag.ContinueOnError)
	var cfg continuousBackupConfig
	var dest destinationFlags
	var listen, caFile, certFile, keyFile string
	fs.StringVar(&cfg.Cluster, "cluster", "", "EtcdCluster name.")
	fs.StringVar(&cfg.Namespace, "namespace", "", "EtcdCluster namespace.")
	fs.StringVar(&cfg.ClusterUID, "cluster-uid", "", "EtcdCluster UID, recorded in every object so that a restore never mixes clusters.")
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "etcd client URL to capture from.")
	fs.StringVar(&caFile, "cacert", "", "CA certificate verifying a TLS endpoint (with --cert and --key).")
	fs.StringVar(&certFile, "cert", "", "Client certificate for a TLS endpoint (re-read on every new connection).")
	fs.StringVar(&keyFile, "key", "", "Client certificate's private key.")
	fs.StringVar(&cfg.StagingDir, "staging-dir", os.TempDir(), "Where snapshots and segments are written before they are stored (room for one full snapshot).")
	fs.DurationVar(&cfg.SegmentInterval, "segment-interval", continuous.DefaultFlushInterval, "How often captured changes are stored: at most this much recent history is lost if the agent dies.")
	fs.DurationVar(&cfg.FullSnapshotInterval, "full-snapshot-interval", continuous.DefaultChainInterval, "How often a new chain (a full snapshot) begins: it bounds a restore's replay.")
	fs.DurationVar(&cfg.RetainFor, "retain-for", 7*24*time.Hour, "Keep every point of this long restorable; older chains are pruned, the newest always kept (0 keeps all).")
	fs.Int64Var(&cfg.MaxBytes, "max-bytes", 0, "Prune the oldest chains while all of them hold more bytes than this (0: no size bound).")
	fs.StringVar(&listen, "listen", ":8080", "Address of the /status, /healthz and /metrics endpoints.")
	dest.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Cluster == "" || cfg.Namespace == "" || cfg.ClusterUID == "" || cfg.Endpoint == "" {
		return fail(errors.New("--cluster, --namespace, --cluster-uid and --endpoint are required"))
	}
	if cfg.SegmentInterval <= 0 || cfg.FullSnapshotInterval <= 0 || cfg.RetainFor < 0 || cfg.MaxBytes < 0 {
		return fail(errors.New("--segment-interval and --full-snapshot-interval must be positive, --retain-for and --max-bytes not negative"))
	}
	if caFile != "" || certFile != "" || keyFile != "" {
		endpoint, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return fail(fmt.Errorf("--endpoint: %w", err))
		}
		tlsConfig, err := reloadingClientTLS(caFile, certFile, keyFile, endpoint.Hostname())
		if err != nil {
			return fail(fmt.Errorf("--cacert, --cert and --key: %w", err))
		}
		cfg.TLS = tlsConfig
	}
	store, prefix, err := dest.store()
	if err != nil {
		return fail(err)
	}
	cfg.Store, cfg.Prefix = store, backup.ClusterPrefix(prefix, cfg.Namespace, cfg.Cluster, continuousKind)
	if err := useTempDir(cfg.StagingDir); err != nil {
		return fail(fmt.Errorf("--staging-dir: %w", err))
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(err)
	}
	lg := newLogger()
	defer func() { _ = lg.Sync() }()
	cfg.Logger = lg
	said, err := memlimit.Apply(os.Getenv)
	if err != nil {
		_ = ln.Close()
		return fail(err)
	}
	lg.Info(said)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runContinuousBackup(ctx, cfg, ln); err != nil {
		return fail(err)
	}
	return 0
}

// useTempDir creates dir and makes it the process's temporary directory: the continuous backup library
// reads manifests and segments through temporary files, which then land on the volume the pod provides
// (its root file system may be read-only).
func useTempDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Setenv("TMPDIR", dir)
}

// reloadingClientTLS is etcd.ClientTLSConfigFromFiles whose client certificate and trusted CAs are read again
// on every new connection: the operator renews the certificate in its Secret, a CA change of a cluster whose
// certificates come from cert-manager changes the CAs in ca.crt (the trust bundle), and the kubelet updates
// the mounted files under a long-running agent. The server's certificate must name serverName (the endpoint's
// host, a name or an IP address, as the standard verification would require).
func reloadingClientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg, err := etcd.ClientTLSConfigFromFiles(caFile, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	current, roots := cfg.Certificates[0], cfg.RootCAs
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		// A pair caught mid-update does not load: the last good one is still valid then.
		if pair, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
			current = pair
		}
		c := current
		return &c, nil
	}
	// The server's certificate is verified by VerifyConnection, against the CAs of caFile as it is now (the
	// last that parsed): the standard verification would keep the CAs read at start.
	cfg.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		mu.Lock()
		if pem, err := os.ReadFile(caFile); err == nil {
			if pool := x509.NewCertPool(); pool.AppendCertsFromPEM(pem) {
				roots = pool
			}
		}
		pool := roots
		mu.Unlock()
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: pool, DNSName: serverName, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
	return cfg, nil
}

// continuousBackupConfig is one cluster's continuous backup agent.
type continuousBackupConfig struct {
	Cluster, Namespace, ClusterUID string
	// Endpoint is the etcd client URL; TLS authenticates to a cluster serving TLS (nil: plain HTTP).
	Endpoint string
	TLS      *tls.Config
	Store    backup.Store
	// Prefix is the full key prefix of the cluster's chains (backup.ClusterPrefix of kind continuous).
	Prefix               string
	StagingDir           string
	SegmentInterval      time.Duration
	FullSnapshotInterval time.Duration
	// RetainFor and MaxBytes are the retention policy (0: no bound).
	RetainFor time.Duration
	MaxBytes  int64
	// RetentionInterval is how often retention runs besides after each new chain (defaultRetentionInterval).
	RetentionInterval time.Duration
	Logger            *zap.Logger
}

// agent is the state the capture's events and the retention runs leave, for /status and /metrics.
type agent struct {
	cfg      continuousBackupConfig
	location string
	lg       *zap.Logger
	// retain asks the retention loop for a run (a new chain began).
	retain chan struct{}

	mu sync.Mutex
	// hasChain: a chain exists (started or resumed); captureErr is the capture's failure since its last
	// success, retentionErr the last retention run's.
	hasChain                 bool
	captureErr, retentionErr string
	// newest only grows: the capture's status and the catalog each see part of what is stored.
	newestRevision        int64
	newestTime            time.Time
	oldestRevision        int64
	oldestTime            time.Time
	gaps                  []continuous.Gap
	chains                int
	catalogRead           bool
	segments, bytes       uint64
	chainsStarted, gapsIn uint64
	// history is the capture's current history (continuous.Manifest.History), once a chain was started or
	// resumed: a new one (the cluster was restored from a snapshot) ends what the earlier one covered.
	history      string
	historyKnown bool
	// rotating is the chain this capture started by rotation while it still extends the previous chain up to
	// the new one's base (nil otherwise). Meanwhile the store holds the new chain but not yet the previous
	// chain's last revisions, so the catalog shows a gap this capture is about to close: it is not reported.
	// Once the previous chain's last segment is stored, the catalog is read again. A capture that fails, or a
	// restarted agent, keeps no such promise, and every gap in the store is reported.
	rotating *continuous.Manifest
}

// runContinuousBackup captures the cluster into cfg.Store until ctx ends, prunes old chains, and serves
// /status, /healthz and /metrics on ln. It returns once what the capture buffered is stored.
func runContinuousBackup(ctx context.Context, cfg continuousBackupConfig, ln net.Listener) error {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = defaultRetentionInterval
	}
	lg := cfg.Logger.With(zap.String("cluster", cfg.Namespace+"/"+cfg.Cluster))
	a := &agent{cfg: cfg, location: cfg.Store.Location(cfg.Prefix), lg: lg, retain: make(chan struct{}, 1)}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{cfg.Endpoint}, TLS: cfg.TLS, DialTimeout: 10 * time.Second,
		// The watch is one long stream: keepalives notice a connection to a member that vanished.
		DialKeepAliveTime: 30 * time.Second, DialKeepAliveTimeout: 10 * time.Second,
		Logger: lg.Named("etcd-client"),
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer func() { _ = cli.Close() }()
	capturer, err := continuous.New(continuous.Config{
		Client: cli, Store: cfg.Store, Prefix: cfg.Prefix, ClusterUID: cfg.ClusterUID, StagingDir: cfg.StagingDir,
		Logger: lg, FlushInterval: cfg.SegmentInterval, ChainInterval: cfg.FullSnapshotInterval, OnEvent: a.observe,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}

	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	lg.Info("continuous backup starting", zap.String("endpoint", cfg.Endpoint), zap.String("location", a.location),
		zap.String("listen", ln.Addr().String()), zap.Duration("segment-interval", cfg.SegmentInterval),
		zap.Duration("full-snapshot-interval", cfg.FullSnapshotInterval), zap.Duration("retain-for", cfg.RetainFor),
		zap.Int64("max-bytes", cfg.MaxBytes))

	rctx, stopRetention := context.WithCancel(ctx)
	retained := make(chan struct{})
	go func() { defer close(retained); a.retentionLoop(rctx) }()

	runErr := capturer.Run(ctx)
	stopRetention()
	<-retained
	// /status keeps answering while the capture stores what it buffered; only then does the server stop.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		lg.Warn("status server failed", zap.Error(err))
	}
	lg.Info("continuous backup stopped", zap.Int64("newest-revision", a.status().NewestRevision))
	return runErr
}

// observe records a capture event; it runs in the capture loop and must not block.
func (a *agent) observe(e continuous.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	stored := func() {
		a.newestRevision = max(a.newestRevision, e.Status.StoredRevision)
		if e.Status.StoredTime.After(a.newestTime) {
			a.newestTime = e.Status.StoredTime
		}
		if a.oldestRevision == 0 && e.Status.BaseRevision > 0 {
			a.oldestRevision, a.oldestTime = e.Status.BaseRevision, e.Status.BaseTime
		}
	}
	if m := e.Manifest; m != nil && (e.Kind == continuous.ChainStarted || e.Kind == continuous.ChainResumed) {
		if a.historyKnown && m.History != a.history {
			// The earlier history's revisions name other states: none of its coverage is claimed.
			a.newestRevision, a.newestTime, a.oldestRevision, a.oldestTime, a.gaps = 0, time.Time{}, 0, time.Time{}, nil
		}
		a.history, a.historyKnown = m.History, true
	}
	retainNow := func() {
		select {
		case a.retain <- struct{}{}:
		default:
		}
	}
	switch e.Kind {
	case continuous.ChainStarted:
		a.hasChain, a.captureErr = true, ""
		a.chainsStarted++
		a.rotating = nil
		if m := e.Manifest; m != nil && m.Reason == continuous.ReasonRotation && m.PreviousChain != "" && m.Gap == nil {
			a.rotating = m
		}
		if e.Manifest != nil {
			a.bytes += uint64(max(e.Manifest.SnapshotBytes, 0))
		}
		stored()
		// Retention and the catalog catch up at once: a new chain may make old ones prunable, and one
		// after lost history brings a gap.
		retainNow()
	case continuous.ChainResumed:
		a.hasChain, a.captureErr, a.rotating = true, "", nil
		stored()
	case continuous.SegmentWritten:
		a.captureErr = ""
		a.segments++
		a.bytes += uint64(max(e.SegmentBytes, 0))
		stored()
		if r, h := a.rotating, e.Segment; r != nil && h != nil && (h.ChainID == r.ChainID || h.ChainID == r.PreviousChain && h.LastRevision >= r.BaseRevision) {
			// The previous chain reached the new one's base: the catalog has no gap between them now.
			a.rotating = nil
			retainNow()
		}
	case continuous.GapRecorded:
		a.gapsIn++
	case continuous.CaptureFailed:
		a.rotating = nil
		if e.Err != nil {
			a.captureErr = e.Err.Error()
		}
	}
}

// withoutRotationGap is gaps without the one the rotation in flight (a.rotating) is closing: the revisions
// after what the previous chain has stored, up to the new chain's base. a.mu is held.
func (a *agent) withoutRotationGap(gaps []continuous.Gap) []continuous.Gap {
	r := a.rotating
	if r == nil {
		return gaps
	}
	return slices.DeleteFunc(gaps, func(g continuous.Gap) bool { return g.To == r.BaseRevision-1 })
}

func (a *agent) retentionLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.RetentionInterval)
	defer t.Stop()
	for {
		a.applyRetention(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.retain:
		}
	}
}

// applyRetention prunes what the policy no longer keeps and reads the catalog again for the restorable
// range and the gaps left in it.
func (a *agent) applyRetention(ctx context.Context) {
	cat, err := continuous.ReadCatalog(ctx, a.cfg.Store, a.cfg.Prefix, a.cfg.ClusterUID)
	if err != nil {
		a.retentionFailed(ctx, fmt.Errorf("read the catalog: %w", err))
		return
	}
	plan := continuous.PlanRetention(cat, continuous.RetentionPolicy{MaxAge: a.cfg.RetainFor, MaxBytes: a.cfg.MaxBytes}, time.Now())
	var applyErr error
	if len(plan.Delete) > 0 {
		_, applyErr = continuous.ApplyRetention(ctx, a.cfg.Store, plan)
		for _, d := range plan.Delete {
			a.lg.Info("pruned chain", zap.String("chain", d.ChainID), zap.String("reason", d.Reason), zap.Int64("bytes", d.Bytes))
		}
		if cat, err = continuous.ReadCatalog(ctx, a.cfg.Store, a.cfg.Prefix, a.cfg.ClusterUID); err != nil {
			a.retentionFailed(ctx, fmt.Errorf("read the catalog: %w", err))
			return
		}
	}
	if applyErr != nil {
		a.retentionFailed(ctx, applyErr)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if applyErr == nil {
		a.retentionErr = ""
	}
	if a.historyKnown && cat.History != a.history {
		return // read before the capture began its current history: the run its new chain asks for reads it
	}
	a.catalogRead = true
	a.chains = len(cat.Chains)
	a.gaps = a.withoutRotationGap(cat.Gaps())
	if rs := cat.Ranges(); len(rs) > 0 {
		a.oldestRevision, a.oldestTime = rs[0].First, rs[0].FirstTime
		last := rs[len(rs)-1]
		a.newestRevision = max(a.newestRevision, last.Last)
		if last.LastTime.After(a.newestTime) {
			a.newestTime = last.LastTime
		}
	}
}

func (a *agent) retentionFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // stopping: not a failure of the store
	}
	a.lg.Warn("continuous backup retention failed", zap.Error(err))
	a.mu.Lock()
	a.retentionErr = err.Error()
	a.mu.Unlock()
}

func (a *agent) status() continuous.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := continuous.Report{
		ClusterUID: a.cfg.ClusterUID, Location: a.location, Capturing: a.hasChain && a.captureErr == "",
		OldestRevision: a.oldestRevision, OldestTime: utc(a.oldestTime),
		NewestRevision: a.newestRevision, NewestTime: utc(a.newestTime),
		Gaps: []continuous.ReportGap{}, Chains: a.chains, LastError: a.captureErr,
	}
	if s.LastError == "" {
		s.LastError = a.retentionErr
	}
	for _, g := range a.gaps {
		s.Gaps = append(s.Gaps, continuous.ReportGap{FromRevision: g.From, ToRevision: g.To, Reason: g.Reason, Time: utc(g.DetectedAt)})
	}
	return s
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func (a *agent) handler() http.Handler {
	reg := prometheus.NewRegistry()
	// The process and Go runtime metrics say what the agent costs (CPU seconds, resident memory) beside what
	// it captured.
	reg.MustRegister(newAgentCollector(a))
	prometheus.WrapRegistererWith(prometheus.Labels{"namespace": a.cfg.Namespace, "cluster": a.cfg.Cluster}, reg).
		MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.status())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		ok := a.hasChain
		a.mu.Unlock()
		if !ok {
			http.Error(w, "no chain yet: the first full snapshot is being taken", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// agentCollector renders the agent's state at each scrape. Gauges of a value not known yet (no chain, no
// catalog read) have no series rather than a misleading zero.
type agentCollector struct {
	a *agent

	newestRevision, newestTime, oldestRevision, oldestTime, gaps, recoveryPoint, capturing *prometheus.Desc
	segments, bytes, chainsStarted, gapsRecorded                                           *prometheus.Desc
}

func newAgentCollector(a *agent) *agentCollector {
	labels := prometheus.Labels{"cluster": a.cfg.Cluster, "namespace": a.cfg.Namespace}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(continuous.MetricsPrefix+name, help, nil, labels)
	}
	return &agentCollector{a: a,
		newestRevision: d("newest_revision", "Newest restorable revision."),
		newestTime:     d("newest_timestamp_seconds", "Unix time of the newest stored write or checkpoint: the recovery point."),
		oldestRevision: d("oldest_revision", "Oldest restorable revision of the retained chains."),
		oldestTime:     d("oldest_timestamp_seconds", "Unix time of the oldest restorable revision of the retained chains."),
		gaps:           d("gaps", "Runs of revisions inside the retained range that no chain restores."),
		recoveryPoint:  d("recovery_point_seconds", "Seconds since the newest stored write or checkpoint: the history a loss now would cost."),
		capturing:      d("capturing", "1 while a chain exists and the capture's last step succeeded, else 0."),
		segments:       d("segments_written_total", "Segments stored (checkpoints included)."),
		bytes:          d("bytes_written_total", "Bytes stored: segments and full snapshots."),
		chainsStarted:  d("chains_started_total", "Chains begun (each with a full snapshot)."),
		gapsRecorded:   d("gaps_recorded_total", "Gaps recorded: history compacted before it was captured, or the cluster's history restarted (restored from a snapshot)."),
	}
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.newestRevision, c.newestTime, c.oldestRevision, c.oldestTime, c.gaps, c.recoveryPoint,
		c.capturing, c.segments, c.bytes, c.chainsStarted, c.gapsRecorded} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.mu.Lock()
	defer a.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if a.newestRevision > 0 {
		gauge(c.newestRevision, float64(a.newestRevision))
	}
	if !a.newestTime.IsZero() {
		gauge(c.newestTime, unixSeconds(a.newestTime))
		gauge(c.recoveryPoint, time.Since(a.newestTime).Seconds())
	}
	if a.oldestRevision > 0 {
		gauge(c.oldestRevision, float64(a.oldestRevision))
	}
	if !a.oldestTime.IsZero() {
		gauge(c.oldestTime, unixSeconds(a.oldestTime))
	}
	if a.catalogRead {
		gauge(c.gaps, float64(len(a.gaps)))
	}
	capturing := 0.0
	if a.hasChain && a.captureErr == "" {
		capturing = 1
	}
	gauge(c.capturing, capturing)
	counter(c.segments, a.segments)
	counter(c.bytes, a.bytes)
	counter(c.chainsStarted, a.chainsStarted)
	counter(c.gapsRecorded, a.gapsIn)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// runPITRMode is `manager pitr`: restore a cluster's continuous backup to a point and store the resulting
// etcd snapshot, which `manager restore` then restores onto a new cluster's members. It runs in the
// cluster's etcd image (the operator binary copied in by install-self), since the replay runs that etcd.
func runPITRMode(args []string) int {
	fs := flag.NewFlagSet("pitr", flag.ContinueOnError)
	var cfg pitrConfig
	var dest destinationFlags
	var cluster, namespace, at, keyPrefix string
	var timeout time.Duration
	fs.StringVar(&cluster, "cluster", "", "Name of the EtcdCluster whose continuous backup is restored.")
	fs.StringVar(&namespace, "namespace", "", "Its namespace.")
	fs.StringVar(&keyPrefix, "prefix", "", "Full key prefix of the continuous backup (as its location shows), instead of the one --cluster and --namespace make.")
	fs.StringVar(&cfg.ClusterUID, "cluster-uid", "", "Its UID (default: the only cluster UID with chains under its prefix).")
	fs.Int64Var(&cfg.Target.Revision, "revision", 0, "Revision to restore (default: the newest restorable).")
	fs.StringVar(&at, "time", "", "Restore the state at this time (RFC 3339) instead of a revision.")
	fs.StringVar(&cfg.OutKey, "out-key", "", "Full key under which the restored snapshot is stored, in the same store (--s3-prefix is not prepended: it is what `restore --key` takes).")
	fs.StringVar(&cfg.EtcdBinary, "etcd", "/usr/local/bin/etcd", "etcd binary of the temporary member that replays the changes.")
	fs.StringVar(&cfg.WorkDir, "work-dir", os.TempDir(), "Room for the chain's snapshot and segments, the replayed database and the output snapshot.")
	fs.DurationVar(&timeout, "timeout", 60*time.Minute, "Give up after this long.")
	dest.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (keyPrefix == "" && (cluster == "" || namespace == "")) || cfg.OutKey == "" {
		return fail(errors.New("--out-key, and --prefix or --cluster and --namespace, are required"))
	}
	if cfg.Target.Revision < 0 {
		return fail(errors.New("--revision must be positive"))
	}
	if at != "" {
		if cfg.Target.Revision > 0 {
			return fail(errors.New("choose one target: --revision or --time"))
		}
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return fail(fmt.Errorf("--time: %w", err))
		}
		cfg.Target.Time = t
	}
	store, prefix, err := dest.store()
	if err != nil {
		return fail(err)
	}
	cfg.Store, cfg.Prefix = store, backup.ClusterPrefix(prefix, namespace, cluster, continuousKind)
	if keyPrefix != "" {
		// A location's key is already full (it carries the destination's prefix), like `restore --key`.
		cfg.Prefix = strings.TrimSuffix(keyPrefix, "/") + "/"
	}
	if err := useTempDir(cfg.WorkDir); err != nil {
		return fail(fmt.Errorf("--work-dir: %w", err))
	}
	lg := newLogger()
	defer func() { _ = lg.Sync() }()
	cfg.Logger = lg
	ctx, cancel := signalContext(timeout)
	defer cancel()
	res, err := pointInTimeRestore(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	report(res)
	return 0
}

// pitrConfig is one point-in-time restore.
type pitrConfig struct {
	Store backup.Store
	// Prefix is the source cluster's continuous backup prefix.
	Prefix string
	// ClusterUID is the source cluster's UID ("": the only one with chains under Prefix).
	ClusterUID string
	Target     continuous.Target
	// OutKey is the output snapshot's full key in Store.
	OutKey     string
	EtcdBinary string
	WorkDir    string
	Logger     *zap.Logger
}

// pitrResult is what `manager pitr` reports.
type pitrResult struct {
	Key      string `json:"key"`
	Location string `json:"location"`
	Revision int64  `json:"revision"`
	// Time is when the capture received Revision (the chain's snapshot time for its base revision).
	Time             time.Time `json:"time,omitzero"`
	SourceClusterUID string    `json:"sourceClusterUID"`
	Chain            string    `json:"chain,omitempty"`
	// ReplayedRevisions counts the revisions this run replayed onto the chain's snapshot.
	ReplayedRevisions int64 `json:"replayedRevisions"`
	// HashKV and CompactRevision are etcd's HashKV at Revision on the restored state: equal to the source's
	// when it reports the same compact revision. Only a run that replayed knows them.
	HashKV          *uint32 `json:"hashKV,omitempty"`
	CompactRevision *int64  `json:"compactRevision,omitempty"`
	// AlreadyStored: OutKey already held a verified snapshot of the target (an earlier attempt stored it),
	// reported without replaying again.
	AlreadyStored bool `json:"alreadyStored,omitempty"`
}

// pointInTimeRestore replays the source's continuous backup to cfg.Target and stores the verified output
// snapshot under cfg.OutKey. A snapshot of the target already there is reported as it is, so that a retried
// Job does not fail (or replay) after an earlier attempt stored its result. Errors about the target or
// damaged objects are the library's, which state the restorable ranges.
func pointInTimeRestore(ctx context.Context, cfg pitrConfig) (*pitrResult, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
		cfg.Logger = lg
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, err
	}
	uid := cfg.ClusterUID
	if uid == "" {
		var err error
		if uid, err = soleClusterUID(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if res, err := storedResult(ctx, cfg, uid); res != nil || err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "pitr-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	out := filepath.Join(dir, "snapshot.db")
	lg.Info("restoring", zap.String("source", cfg.Store.Location(cfg.Prefix)), zap.String("cluster-uid", uid),
		zap.Stringer("target", cfg.Target), zap.String("to", cfg.Store.Location(cfg.OutKey)))
	r, err := continuous.RestoreTo(ctx, continuous.RestoreConfig{
		Store: cfg.Store, Prefix: cfg.Prefix, ClusterUID: uid, Target: cfg.Target, EtcdBinary: cfg.EtcdBinary,
		WorkDir: cfg.WorkDir, OutputSnapshot: out, Logger: lg,
	})
	if err != nil {
		return nil, err
	}
	meta := map[string]string{
		"etcd-revision":      strconv.FormatInt(r.Revision, 10),
		"etcd-hash":          strconv.FormatUint(uint64(r.Snapshot.Hash), 10),
		"sha256":             r.Snapshot.SHA256,
		"source-cluster-uid": uid,
		"source-chain":       r.ChainID,
	}
	if err := cfg.Store.Put(ctx, cfg.OutKey, out, meta); err != nil {
		return nil, err
	}
	return &pitrResult{Key: cfg.OutKey, Location: cfg.Store.Location(cfg.OutKey), Revision: r.Revision, Time: utc(r.Time),
		SourceClusterUID: uid, Chain: r.ChainID, ReplayedRevisions: r.Revisions, HashKV: &r.Hash, CompactRevision: &r.CompactRevision}, nil
}

// soleClusterUID is the cluster UID of the chains under the prefix, when there is exactly one: a cluster
// deleted and created again under the same name leaves chains of two UIDs, and the choice is the caller's.
func soleClusterUID(ctx context.Context, cfg pitrConfig) (string, error) {
	objects, err := cfg.Store.List(ctx, cfg.Prefix)
	if err != nil {
		return "", err
	}
	uids := map[string]bool{}
	for _, o := range objects {
		id, name, ok := strings.Cut(strings.TrimPrefix(o.Key, cfg.Prefix), "/")
		if !ok || id == "" || name != "manifest.json" {
			continue
		}
		var m continuous.Manifest
		if err := readJSON(ctx, cfg.Store, o.Key, cfg.WorkDir, &m); err != nil {
			cfg.Logger.Warn("unreadable chain manifest", zap.String("key", o.Key), zap.Error(err))
			continue
		}
		if m.ClusterUID != "" {
			uids[m.ClusterUID] = true
		}
	}
	var list []string
	for u := range uids {
		list = append(list, u)
	}
	sort.Strings(list)
	switch len(list) {
	case 0:
		return "", fmt.Errorf("no continuous backup under %s", cfg.Store.Location(cfg.Prefix))
	case 1:
		return list[0], nil
	}
	return "", fmt.Errorf("continuous backups of several clusters under %s (UIDs %s): choose one with --cluster-uid",
		cfg.Store.Location(cfg.Prefix), strings.Join(list, ", "))
}

func readJSON(ctx context.Context, store backup.Store, key, dir string, v any) error {
	f, err := os.CreateTemp(dir, "object-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_ = f.Close()
	defer func() { _ = os.Remove(name) }()
	if err := store.Get(ctx, key, name); err != nil {
		return err
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// storedResult reports the snapshot already under cfg.OutKey when it verifies and holds the target (nil
// when there is none, or a damaged one the run replaces). One of another revision is refused, never
// replaced: it is not this restore's.
func storedResult(ctx context.Context, cfg pitrConfig, uid string) (*pitrResult, error) {
	objects, err := cfg.Store.List(ctx, cfg.OutKey)
	if err != nil {
		return nil, err
	}
	found := false
	for _, o := range objects {
		found = found || o.Key == cfg.OutKey
	}
	if !found {
		return nil, nil
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "pitr-stored-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "snapshot.db")
	if err := cfg.Store.Get(ctx, cfg.OutKey, file); err != nil {
		return nil, err
	}
	location := cfg.Store.Location(cfg.OutKey)
	info, err := backup.Verify(cfg.Logger, file)
	if err != nil {
		cfg.Logger.Warn("the stored output does not verify: restoring again", zap.String("location", location), zap.Error(err))
		return nil, nil
	}
	rev, err := snapshotRevision(file, info)
	if err != nil {
		return nil, err
	}
	res := &pitrResult{Key: cfg.OutKey, Location: location, Revision: rev, SourceClusterUID: uid, AlreadyStored: true}
	refuse := func(want string) error {
		return fmt.Errorf("%s already holds a snapshot of revision %d, not of %s: choose another --out-key", location, rev, want)
	}
	switch {
	case cfg.Target.Revision > 0:
		if rev != cfg.Target.Revision {
			return nil, refuse(cfg.Target.String())
		}
		res.Chain, res.Time = revisionTime(ctx, cfg, uid, rev, dir)
	case !cfg.Target.Time.IsZero():
		// Only the segments tell which revision a time is: resolve it as the restore did, without replaying.
		p, err := continuous.PrepareRestore(ctx, continuous.RestoreConfig{Store: cfg.Store, Prefix: cfg.Prefix, ClusterUID: uid,
			Target: cfg.Target, WorkDir: dir, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		p.Close()
		if p.Revision != rev {
			return nil, refuse(fmt.Sprintf("%s (revision %d)", cfg.Target, p.Revision))
		}
		res.Chain, res.Time = p.ChainID, utc(p.Time)
	default:
		// The newest revision moves on while the source is captured: what an earlier attempt stored was
		// the newest then.
		res.Chain, res.Time = revisionTime(ctx, cfg, uid, rev, dir)
	}
	cfg.Logger.Info("already stored", zap.String("location", location), zap.Int64("revision", rev))
	return res, nil
}

// revisionTime is the chain that restores rev and the time the capture received it, from the catalog and
// the one segment holding rev ("" and zero when the source no longer restores it: the report then goes
// without them).
func revisionTime(ctx context.Context, cfg pitrConfig, uid string, rev int64, dir string) (string, time.Time) {
	cat, err := continuous.ReadCatalog(ctx, cfg.Store, cfg.Prefix, uid)
	if err != nil {
		return "", time.Time{}
	}
	// As a restore chooses: the covering chain with the latest base replays the least.
	var best *continuous.Chain
	for _, c := range cat.Chains {
		if r := c.Range(); c.SnapshotKey != "" && rev >= r.First && rev <= r.Last {
			best = c
		}
	}
	if best == nil {
		return "", time.Time{}
	}
	if rev == best.Manifest.BaseRevision {
		return best.ID, utc(best.Manifest.TakenAt)
	}
	for _, ref := range best.Segments {
		if rev < ref.First || rev > ref.Last {
			continue
		}
		file := filepath.Join(dir, "segment")
		if err := cfg.Store.Get(ctx, ref.Key, file); err != nil {
			return best.ID, time.Time{}
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return best.ID, time.Time{}
		}
		seg, _, err := continuous.DecodeSegment(data)
		if err != nil {
			return best.ID, time.Time{}
		}
		for _, r := range seg.Revisions {
			if r.Revision == rev {
				return best.ID, utc(r.Time)
			}
		}
	}
	return best.ID, time.Time{}
}

// snapshotRevision is the revision etcd resumes at from a verified snapshot. backup.Verify reports the
// newest revision in the key bucket, which falls short when compaction removed the newest revision's
// tombstone or the bucket is empty; etcd also takes the compaction revisions its meta bucket records (as
// the continuous package does for its own snapshots).
func snapshotRevision(path string, info backup.Info) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.Close() }()
	rev := max(info.Revision, 1)
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return nil
		}
		for _, k := range []string{"finishedCompactRev", "scheduledCompactRev"} {
			// etcd's revision encoding: the main revision in 8 bytes big-endian, then the sub-revision.
			if b := meta.Get([]byte(k)); len(b) >= 8 {
				rev = max(rev, int64(binary.BigEndian.Uint64(b[:8])))
			}
		}
		return nil
	})
	return rev, err
}

// runInstallSelf is `manager install-self --dir DIR`: an init container in the operator's image copies the
// binary into a volume it shares with a container of another image (etcd's, which has no shell), which then
// runs it, as the point-in-time restore Job's does.
func runInstallSelf(args []string) int {
	fs := flag.NewFlagSet("install-self", flag.ContinueOnError)
	var dir string
	fs.StringVar(&dir, "dir", "", "Directory (a shared volume) to copy this binary into, as "+entryName+".")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if dir == "" {
		return fail(errors.New("--dir is required"))
	}
	path, err := installSelf(dir)
	if err != nil {
		return fail(err)
	}
	report(map[string]string{"installed": path})
	return 0
}

func installSelf(dir string) (string, error) {
	if err := installEntry(dir); err != nil {
		return "", fmt.Errorf("install into %s: %w", dir, err)
	}
	return filepath.Join(dir, entryName), nil
}
