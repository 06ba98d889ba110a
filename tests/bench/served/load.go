package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seedops/etcd-operator/tests/bench/internal/load"
)

// phase is one measured phase of a run (puts, or gets).
type phase struct {
	Ops     int
	Errors  int
	Seconds float64
	// PerSecond is Ops/Seconds; the latencies are of the successful requests.
	PerSecond                  float64
	P50ms, P90ms, P99ms, Maxms float64
	// MemberCPUs is the CPU time (user+system) of the three members over the phase; LeaderCPUs the
	// leader's part; LoadCPUs the load generator's; OtherCPUs what else the machine ran meanwhile.
	MemberCPUs, LeaderCPUs, LoadCPUs, OtherCPUs float64
	// MachineBusy is the share of the machine's cores that were busy.
	MachineBusy float64
	// MemberCPUms, LeaderCPUms and LoadCPUms are CPU milliseconds per request.
	MemberCPUms, LeaderCPUms, LoadCPUms float64
	// MemberSyscalls is the members' read and write system calls per request.
	MemberSyscalls float64
	// NewConns counts the connections opened to the members during the phase by kind of port (client,
	// peer, http), including those closed before its end: with TLS, each is a full handshake.
	NewConns map[string]int
	// Conns counts the connections at the phase's end (any state but closed for a minute), by kind.
	Conns map[string]int
	// Rate is the offered rate (requests/s) when paced, 0 when every client sends as fast as it can.
	Rate float64
}

// runResult is one variant's run in one round.
type runResult struct {
	Variant string
	Round   int
	Leader  int
	// EtcdVersion is the members' version; SplitHTTP whether they served the HTTP endpoints of the client
	// side on a port of their own.
	EtcdVersion string
	SplitHTTP   bool
	// ClientTLS and PeerTLS describe the negotiated connection (version, suite, key exchange, ALPN).
	ClientTLS, PeerTLS string
	Put                *phase
	Get                *phase
	Profiles           map[string]string
}

// measure runs one variant once on a new cluster.
func measure(ctx context.Context, o options, certs *certificates, v variant, round int) (runResult, error) {
	res := runResult{Variant: v.Name, Round: round, Profiles: map[string]string{}}
	dir := filepath.Join(o.out, "data", fmt.Sprintf("%s-r%d", v.Name, round))
	_ = os.RemoveAll(dir)
	c, err := startCluster(ctx, o, certs, v, dir, fmt.Sprintf("%s/%s/%d/%d", clusterName, v.Name, round, time.Now().UnixNano()))
	if err != nil {
		return res, err
	}
	defer func() { c.stop(); _ = os.RemoveAll(dir) }()
	res.EtcdVersion, res.SplitHTTP = c.version, c.split

	if v.ClientTLS {
		res.ClientTLS = describeTLS(c.ports[0].client, certs.client.Clone(), []string{"h2"})
	}
	if v.PeerTLS {
		res.PeerTLS = describePeerTLS(c, certs)
	}

	clis := make([]*clientv3.Client, o.conns)
	for i := range clis {
		if clis[i], err = c.dial(certs, c.clientURLs()); err != nil {
			return res, err
		}
		defer func(cli *clientv3.Client) { _ = cli.Close() }(clis[i])
	}
	if res.Leader, err = c.leader(ctx, clis[0]); err != nil {
		return res, err
	}
	value := make([]byte, o.valueSize)
	_, _ = rand.Read(value)
	put := func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
		_, err := cli.Put(ctx, load.Key(rng.IntN(o.keys)), string(value))
		return err
	}
	get := func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
		_, err := cli.Get(ctx, load.Key(rng.IntN(o.keys)))
		return err
	}

	load.Drive(ctx, clis, o.clients, o.warmup, o.rate, put) // warm-up: connections, page cache, allocator
	var stopProfiles func()
	if round == o.profileRound {
		stopProfiles = startProfiles(o, c, certs, v.Name, round, res.Profiles)
	}
	res.Put = measurePhase(ctx, c, res.Leader, clis, o.clients, o.duration, o.rate, put)
	if stopProfiles != nil {
		stopProfiles()
	}
	if o.getDuration > 0 {
		res.Get = measurePhase(ctx, c, res.Leader, clis, o.clients, o.getDuration, o.rate, get)
	}
	return res, nil
}

// measurePhase drives the load for d and accounts for the CPU it took.
func measurePhase(ctx context.Context, c *cluster, leader int, clis []*clientv3.Client, clients int, d time.Duration,
	rate float64, op load.Op) *phase {
	ports := c.serverPorts()
	connsBefore := connections(ports)
	before := snapshotCPU(c.pids())
	ops, errs, lat, elapsed := load.Drive(ctx, clis, clients, d, rate, op)
	after := snapshotCPU(c.pids())
	connsAfter := connections(ports)

	p := &phase{Ops: ops, Errors: errs, Seconds: elapsed.Seconds(), NewConns: map[string]int{}, Conns: map[string]int{}, Rate: rate}
	p.PerSecond = float64(ops) / p.Seconds
	pct := load.Summarize(lat)
	p.P50ms, p.P90ms, p.P99ms, p.Maxms = pct.P50ms, pct.P90ms, pct.P99ms, pct.Maxms
	var syscalls uint64
	for i := range min(len(before.procs), len(after.procs)) {
		p.MemberCPUs += after.procs[i] - before.procs[i]
		syscalls += after.syscalls[i] - before.syscalls[i]
	}
	if leader >= 0 && leader < min(len(before.procs), len(after.procs)) {
		p.LeaderCPUs = after.procs[leader] - before.procs[leader]
	}
	p.LoadCPUs = after.self - before.self
	busy := float64(after.busy-before.busy) / clockTicks
	p.MachineBusy = float64(after.busy-before.busy) / float64(after.total-before.total)
	p.OtherCPUs = busy - p.MemberCPUs - p.LoadCPUs
	if ops > 0 {
		p.MemberCPUms = p.MemberCPUs * 1000 / float64(ops)
		p.LeaderCPUms = p.LeaderCPUs * 1000 / float64(ops)
		p.LoadCPUms = p.LoadCPUs * 1000 / float64(ops)
		p.MemberSyscalls = float64(syscalls) / float64(ops)
	}
	for id, kind := range connsAfter {
		p.Conns[kind]++
		if _, ok := connsBefore[id]; !ok {
			p.NewConns[kind]++
		}
	}
	return p
}

// startProfiles takes CPU profiles of every member (etcd's /debug/pprof) and of this process for the
// next phase, into the pending directory (keepProfiles moves those of the run that counts); the returned
// function waits for them.
func startProfiles(o options, c *cluster, certs *certificates, name string, round int, files map[string]string) func() {
	dir := filepath.Join(o.out, "profiles", "pending")
	_ = os.RemoveAll(dir)
	_ = os.MkdirAll(dir, 0o755)
	secs := max(1, int(o.duration.Seconds())-1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	tr := &http.Transport{}
	if c.v.ClientTLS {
		tr.TLSClientConfig = certs.client.Clone()
	}
	hc := &http.Client{Transport: tr, Timeout: time.Duration(secs+30) * time.Second}
	for i := range members {
		wg.Go(func() {
			path := filepath.Join(dir, fmt.Sprintf("%s_r%d_m%d.pprof", name, round, i))
			if err := fetch(hc, c.httpURL(i)+"/debug/pprof/profile?seconds="+itoa(secs), path); err != nil {
				log.Printf("  profile of member %d: %v", i, err)
				return
			}
			mu.Lock()
			files[fmt.Sprintf("m%d", i)] = path
			mu.Unlock()
		})
	}
	self := filepath.Join(dir, fmt.Sprintf("%s_r%d_loadgen.pprof", name, round))
	f, err := os.Create(self)
	if err == nil && pprof.StartCPUProfile(f) == nil {
		files["loadgen"] = self
	}
	return func() {
		if err == nil {
			pprof.StopCPUProfile()
			_ = f.Close()
		}
		wg.Wait()
		tr.CloseIdleConnections()
	}
}

// keepProfiles moves a run's profiles from the pending directory to the profiles directory, where -analyze
// reads them, and records their new names.
func keepProfiles(o options, files map[string]string) error {
	for k, path := range files {
		kept := filepath.Join(o.out, "profiles", filepath.Base(path))
		if err := os.Rename(path, kept); err != nil {
			return err
		}
		files[k] = kept
	}
	_ = os.Remove(filepath.Join(o.out, "profiles", "pending")) // only when empty
	return nil
}

func fetch(hc *http.Client, u, path string) error {
	resp, err := hc.Get(u)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// describeTLS handshakes with the server at port as a client would and describes the connection.
func describeTLS(port int, cfg *tls.Config, alpn []string) string {
	cfg.NextProtos = alpn
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port), cfg)
	if err != nil {
		return "handshake failed: " + err.Error()
	}
	defer func() { _ = conn.Close() }()
	s := conn.ConnectionState()
	proto := s.NegotiatedProtocol
	if proto == "" {
		proto = "none"
	}
	return fmt.Sprintf("%s %s, key exchange %s, ALPN %s, resumed %v", tls.VersionName(s.Version),
		tls.CipherSuiteName(s.CipherSuite), s.CurveID, proto, s.DidResume)
}

// describePeerTLS handshakes with member 0's peer port with the peer certificate, offering no ALPN (as
// etcd's peer transport, an http.Transport with its own TLS configuration, does).
func describePeerTLS(c *cluster, certs *certificates) string {
	pair, err := tls.LoadX509KeyPair(certs.PeerCert, certs.PeerKey)
	if err != nil {
		return err.Error()
	}
	cfg := certs.client.Clone()
	cfg.Certificates = []tls.Certificate{pair}
	return describeTLS(c.ports[0].peer, cfg, nil)
}
