package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/pki"
)

// These tests run real etcd servers (ETCD_BIN_DIR, set by `make test`).

const (
	cbNamespace = "team-a"
	cbCluster   = "source"
	cbUID       = "5b0e7c2a-source-uid"
)

func quietTestLogger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// eventually polls cond for up to 30 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentRun is the continuous backup agent running in the background, as its Deployment runs it.
type agentRun struct {
	url  string
	stop func() error
}

func startAgent(t *testing.T, cfg continuousBackupConfig) *agentRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runContinuousBackup(ctx, cfg, ln) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(60 * time.Second):
				runErr = errors.New("the agent did not stop within 60 s of its signal")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return &agentRun{url: "http://" + ln.Addr().String(), stop: stop}
}

func (a *agentRun) get(t testing.TB, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(a.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func (a *agentRun) status(t testing.TB) continuous.Report {
	t.Helper()
	code, body := a.get(t, "/status")
	if code != http.StatusOK {
		t.Fatalf("/status: %d %s", code, body)
	}
	s, err := continuous.ReadReport(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/status: %v: %s", err, body)
	}
	return *s
}

func agentConfig(t *testing.T, endpoint string, store backup.Store) continuousBackupConfig {
	return continuousBackupConfig{
		Cluster: cbCluster, Namespace: cbNamespace, ClusterUID: cbUID, Endpoint: endpoint, Store: store,
		Prefix: backup.ClusterPrefix("", cbNamespace, cbCluster, continuousKind), StagingDir: t.TempDir(),
		SegmentInterval: 200 * time.Millisecond, FullSnapshotInterval: time.Hour, RetainFor: time.Hour,
		RetentionInterval: 200 * time.Millisecond, Logger: quietTestLogger(t),
	}
}

func checkErr[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestContinuousBackupAndPITR runs the agent against a real etcd under writes, reads its /status and
// /metrics, then restores a middle revision with pitr and proves the stored snapshot equal to the source at
// that revision; a retried pitr reports the stored snapshot without replaying, and targets it cannot
// restore are refused with the restorable range, storing nothing.
func TestContinuousBackupAndPITR(t *testing.T) {
	src := etcdtest.StartStatic(t, "source", 1, nil)
	cli := src.Client(t, nil, 0)
	ctx := context.Background()
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store"), Claim: "backups"}
	cfg := agentConfig(t, src.ClientURL(0), store)
	agent := startAgent(t, cfg)

	eventually(t, "/healthz once the first chain exists", func() bool {
		code, _ := agent.get(t, "/healthz")
		return code == http.StatusOK
	})
	var revs []int64
	for i := range 40 {
		revs = append(revs, checkErr[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/k/%02d", i%15), fmt.Sprint("v", i))).Header.Revision)
	}
	revs = append(revs, checkErr[*clientv3.DeleteResponse](t)(cli.Delete(ctx, "/k/03")).Header.Revision)
	for i := range 10 {
		revs = append(revs, checkErr[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/m/%d", i), "x")).Header.Revision)
	}
	last := revs[len(revs)-1]
	mid := revs[len(revs)/2]

	var st continuous.Report
	eventually(t, fmt.Sprintf("/status to reach revision %d", last), func() bool {
		st = agent.status(t)
		return st.NewestRevision >= last
	})
	if !st.Capturing || st.ClusterUID != cbUID || st.Location != store.Location(cfg.Prefix) || st.LastError != "" {
		t.Fatalf("/status: %+v", st)
	}
	if st.NewestRevision != last || st.OldestRevision <= 0 || st.OldestRevision >= revs[0] || st.OldestTime.IsZero() ||
		st.NewestTime.Before(st.OldestTime) || time.Since(st.NewestTime) > time.Minute {
		t.Fatalf("/status range %d (%s) .. %d (%s), the writes were %d..%d", st.OldestRevision, st.OldestTime, st.NewestRevision, st.NewestTime, revs[0], last)
	}
	eventually(t, "the catalog to count the chain", func() bool {
		st = agent.status(t)
		return st.Chains == 1
	})
	code, body := agent.get(t, "/status")
	t.Logf("/status (%d): %s", code, body)
	if st.Gaps == nil || len(st.Gaps) != 0 {
		t.Fatalf("/status gaps: %v", st.Gaps)
	}

	code, body = agent.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	labels := fmt.Sprintf(`{cluster=%q,namespace=%q}`, cbCluster, cbNamespace)
	for _, want := range []string{
		fmt.Sprintf("etcd_operator_continuous_backup_newest_revision%s %d\n", labels, last),
		fmt.Sprintf("etcd_operator_continuous_backup_oldest_revision%s %d\n", labels, st.OldestRevision),
		"etcd_operator_continuous_backup_gaps" + labels + " 0\n",
		"etcd_operator_continuous_backup_chains_started_total" + labels + " 1\n",
		"etcd_operator_continuous_backup_gaps_recorded_total" + labels + " 0\n",
		"etcd_operator_continuous_backup_capturing" + labels + " 1\n",
		"etcd_operator_continuous_backup_newest_timestamp_seconds" + labels + " ",
		"etcd_operator_continuous_backup_oldest_timestamp_seconds" + labels + " ",
		"etcd_operator_continuous_backup_segments_written_total" + labels + " ",
		"etcd_operator_continuous_backup_bytes_written_total" + labels + " ",
		"etcd_operator_continuous_backup_recovery_point_seconds" + labels + " ",
		"process_cpu_seconds_total" + labels + " ",
		"process_resident_memory_bytes" + labels + " ",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if err := agent.stop(); err != nil {
		t.Fatalf("agent: %v", err)
	}

	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	pitrCfg := func(target continuous.Target, outKey string) pitrConfig {
		return pitrConfig{Store: store, Prefix: cfg.Prefix, ClusterUID: cbUID, Target: target, OutKey: outKey,
			EtcdBinary: bin, WorkDir: t.TempDir(), Logger: quietTestLogger(t)}
	}
	outKey := "team-a/restored/at-middle.db"
	var first *pitrResult

	t.Run("PITRToAMiddleRevision", func(t *testing.T) {
		res, err := pointInTimeRestore(ctx, pitrCfg(continuous.Target{Revision: mid}, outKey))
		if err != nil {
			t.Fatal(err)
		}
		first = res
		t.Logf("restored: %s", checkErr[[]byte](t)(json.Marshal(res)))
		if res.Key != outKey || res.Location != store.Location(outKey) || res.Revision != mid || res.SourceClusterUID != cbUID ||
			res.Chain == "" || res.Time.IsZero() || res.ReplayedRevisions <= 0 || res.HashKV == nil || res.CompactRevision == nil || res.AlreadyStored {
			t.Fatalf("pitr reported %+v", res)
		}
		file := filepath.Join(t.TempDir(), "out.db")
		if err := store.Get(ctx, outKey, file); err != nil {
			t.Fatal(err)
		}
		if info := checkErr[backup.Info](t)(backup.Verify(zap.NewNop(), file)); info.Revision != mid {
			t.Fatalf("the stored snapshot holds revision %d, want %d", info.Revision, mid)
		}
		if h := checkErr[*clientv3.HashKVResponse](t)(cli.HashKV(ctx, src.ClientURL(0), mid)); h.Hash != *res.HashKV {
			t.Fatalf("pitr reports hash %d, the source's at revision %d is %d", *res.HashKV, mid, h.Hash)
		}

		// The stored snapshot restores (as `manager restore` does) to exactly the source's keys at mid.
		r := etcdtest.New("restored", filepath.Join(t.TempDir(), "restored"), bin)
		t.Cleanup(r.Close)
		_, err = backup.Restore(ctx, zap.NewNop(), store, backup.RestoreConfig{Key: outKey, DataDir: r.DataDir(0), Name: r.MemberName(0),
			PeerURL: r.PeerURL(0), InitialCluster: r.InitialCluster([]int{0}), InitialClusterToken: "restored"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(0, r.InitialCluster([]int{0}), "new"); err != nil {
			t.Fatal(err)
		}
		rcli := r.Client(t, nil, 0)
		want := checkErr[*clientv3.GetResponse](t)(cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(mid)))
		got := checkErr[*clientv3.GetResponse](t)(rcli.Get(ctx, "", clientv3.WithPrefix()))
		if got.Header.Revision != mid || len(got.Kvs) != len(want.Kvs) {
			t.Fatalf("restored: revision %d with %d keys; the source at revision %d had %d keys", got.Header.Revision, len(got.Kvs), mid, len(want.Kvs))
		}
		for i := range want.Kvs {
			if !proto.Equal(want.Kvs[i], got.Kvs[i]) {
				t.Fatalf("restored %v, the source had %v", got.Kvs[i], want.Kvs[i])
			}
		}
	})

	t.Run("PITRRetriedReportsTheStoredSnapshot", func(t *testing.T) {
		if first == nil {
			t.Skip("no first restore")
		}
		// No etcd binary and no UID: a replay would fail, and the only UID under the prefix is the source's.
		c := pitrCfg(continuous.Target{Revision: mid}, outKey)
		c.EtcdBinary, c.ClusterUID = filepath.Join(t.TempDir(), "no-etcd"), ""
		res, err := pointInTimeRestore(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("retried: %s", checkErr[[]byte](t)(json.Marshal(res)))
		if !res.AlreadyStored || res.Revision != mid || res.Key != outKey || res.Location != first.Location || res.SourceClusterUID != cbUID ||
			res.Chain != first.Chain || !res.Time.Equal(first.Time) || res.ReplayedRevisions != 0 || res.HashKV != nil {
			t.Fatalf("retried pitr reported %+v, the first %+v", res, first)
		}
		// Another target under the same key is not this restore's result: refused, the snapshot kept.
		c.Target = continuous.Target{Revision: mid + 1}
		if _, err := pointInTimeRestore(ctx, c); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("already holds a snapshot of revision %d", mid)) {
			t.Fatalf("another target under the stored key: %v", err)
		}
	})

	t.Run("PITRBeyondTheNewestRevisionIsRefused", func(t *testing.T) {
		key := "team-a/restored/beyond.db"
		_, err := pointInTimeRestore(ctx, pitrCfg(continuous.Target{Revision: last + 10}, key))
		if !errors.Is(err, continuous.ErrNotRestorable) {
			t.Fatalf("pitr to revision %d beyond the newest %d: %v", last+10, last, err)
		}
		t.Logf("refused: %v", err)
		if want := fmt.Sprintf("restorable: revisions %d..%d", st.OldestRevision, last); !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not state the restorable range (%q): %v", want, err)
		}
		if objs := checkErr[[]backup.Object](t)(store.List(ctx, key)); len(objs) != 0 {
			t.Fatalf("a refused restore stored %v", objs)
		}
	})

	t.Run("PITRWithSeveralClusterUIDsNeedsOne", func(t *testing.T) {
		// A cluster of the same name, deleted and created again, left its own chain under the prefix.
		other := filepath.Join(store.Root, cfg.Prefix, "00000000000000000001-0badc0de", "manifest.json")
		if err := os.MkdirAll(filepath.Dir(other), 0o700); err != nil {
			t.Fatal(err)
		}
		manifest := `{"format":1,"clusterUID":"0ld-uid","chainID":"00000000000000000001-0badc0de","baseRevision":1}`
		if err := os.WriteFile(other, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		c := pitrCfg(continuous.Target{Revision: mid}, "team-a/restored/ambiguous.db")
		c.ClusterUID = ""
		_, err := pointInTimeRestore(ctx, c)
		if err == nil || !strings.Contains(err.Error(), "0ld-uid, "+cbUID) || !strings.Contains(err.Error(), "--cluster-uid") {
			t.Fatalf("pitr without a UID among two clusters' chains: %v", err)
		}
	})
}

// TestContinuousBackupPrunesOldChains: with chains begun every half second and a retention of one second,
// the agent prunes old chains as it goes, and /status's oldest revision moves up with them.
func TestContinuousBackupPrunesOldChains(t *testing.T) {
	src := etcdtest.StartStatic(t, "source", 1, nil)
	cli := src.Client(t, nil, 0)
	ctx := context.Background()
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store"), Claim: "backups"}
	cfg := agentConfig(t, src.ClientURL(0), store)
	cfg.FullSnapshotInterval, cfg.RetainFor = 500*time.Millisecond, time.Second
	agent := startAgent(t, cfg)
	eventually(t, "the first chain", func() bool { return agent.status(t).Chains >= 1 })
	firstOldest := agent.status(t).OldestRevision

	wctx, stopWriter := context.WithCancel(ctx)
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := 0; wctx.Err() == nil; i++ {
			if _, err := cli.Put(wctx, fmt.Sprintf("/w/%02d", i%20), fmt.Sprint(i)); err != nil && wctx.Err() == nil {
				t.Error(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { stopWriter(); <-writer }()

	var st continuous.Report
	var metrics []byte
	eventually(t, "old chains to be pruned", func() bool {
		st = agent.status(t)
		_, metrics = agent.get(t, "/metrics")
		return st.OldestRevision > firstOldest && bytes.Contains(metrics, []byte("chains_started_total"))
	})
	started := 0
	for line := range strings.Lines(string(metrics)) {
		if strings.HasPrefix(line, "etcd_operator_continuous_backup_chains_started_total{") {
			_, _ = fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &started)
		}
	}
	if st.Chains >= started || st.Chains < 1 || len(st.Gaps) != 0 || !st.Capturing {
		t.Fatalf("%d chains started, %d kept; status %+v", started, st.Chains, st)
	}
}

// clientTLSFiles is a directory of the files the agent's client certificate is mounted as (ca.crt, tls.crt,
// tls.key), with the CAs and certificates a test writes into it.
type clientTLSFiles struct {
	t   *testing.T
	dir string
	now time.Time
}

func newClientTLSFiles(t *testing.T) *clientTLSFiles {
	return &clientTLSFiles{t: t, dir: t.TempDir(), now: time.Now()}
}

// newCA is a CA of the given name, valid for an hour.
func (f *clientTLSFiles) newCA(name string) *pki.CA {
	ca, _, err := pki.NewCA(name, time.Hour, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	return ca
}

// write writes data as the file name and returns its path.
func (f *clientTLSFiles) write(name string, data []byte) string {
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// issue is a certificate of ca for req and its key.
func (f *clientTLSFiles) issue(ca *pki.CA, req pki.Request) ([]byte, []byte) {
	cert, key, err := ca.Issue(req, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	return cert, key
}

// mountClient writes a client certificate of ca for root, and its key, as tls.crt and tls.key, and returns
// the certificate.
func (f *clientTLSFiles) mountClient(ca *pki.CA) []byte {
	cert, key := f.issue(ca, pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: time.Hour})
	f.write("tls.crt", cert)
	f.write("tls.key", key)
	return cert
}

// config is the agent's client configuration over the files, for a server of the given name.
func (f *clientTLSFiles) config(serverName string) *tls.Config {
	cfg, err := reloadingClientTLS(filepath.Join(f.dir, "ca.crt"), filepath.Join(f.dir, "tls.crt"), filepath.Join(f.dir, "tls.key"), serverName)
	if err != nil {
		f.t.Fatal(err)
	}
	return cfg
}

// TestContinuousBackupReloadsClientCertificate: the agent presents the certificate in the mounted files
// at each new connection, so a renewal reaches it without a restart, and a pair caught mid-update keeps
// the last good one.
func TestContinuousBackupReloadsClientCertificate(t *testing.T) {
	files := newClientTLSFiles(t)
	ca := files.newCA("test CA")
	files.write("ca.crt", ca.CertPEM)
	presented := func(cfg func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) []byte {
		c, err := cfg(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	first := files.mountClient(ca)
	cfg := files.config("localhost")
	der := func(certPEM []byte) []byte { return checkErr[*x509.Certificate](t)(pki.ParseCertificate(certPEM)).Raw }
	if got := presented(cfg.GetClientCertificate); !bytes.Equal(got, der(first)) {
		t.Fatal("the first connection does not present the mounted certificate")
	}
	renewed := files.mountClient(ca)
	if got := presented(cfg.GetClientCertificate); !bytes.Equal(got, der(renewed)) {
		t.Fatal("a new connection does not present the renewed certificate")
	}
	files.write("tls.key", []byte("half-written"))
	if got := presented(cfg.GetClientCertificate); !bytes.Equal(got, der(renewed)) {
		t.Fatal("an unreadable pair replaced the last good certificate")
	}
}

// TestReloadingClientTLSTrustsTheCAsMountedNow: the agent verifies each new connection against ca.crt as it is
// then, so a CA change of a cluster whose certificates come from cert-manager (ca.crt: old CA, then both, then
// the new one alone) reaches a long-running agent.
func TestReloadingClientTLSTrustsTheCAsMountedNow(t *testing.T) {
	files := newClientTLSFiles(t)
	oldCA, newCA := files.newCA("old"), files.newCA("new")
	files.mountClient(oldCA)
	files.write("ca.crt", oldCA.CertPEM)
	cfg := files.config("etcd.example")
	server := func(ca *pki.CA) tls.ConnectionState {
		certPEM, _ := files.issue(ca, pki.Request{CommonName: "server", DNSNames: []string{"etcd.example"}, Usage: pki.ServerAndClient,
			Validity: time.Hour})
		return tls.ConnectionState{ServerName: "etcd.example", PeerCertificates: []*x509.Certificate{
			checkErr[*x509.Certificate](t)(pki.ParseCertificate(certPEM))}}
	}
	for _, step := range []struct {
		caFile          []byte
		wantOld, wantNw bool
	}{
		{oldCA.CertPEM, true, false},
		{append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...), true, true},
		{[]byte("half-written"), true, true}, // the last bundle that parsed
		{newCA.CertPEM, false, true},
	} {
		files.write("ca.crt", step.caFile)
		for _, tc := range []struct {
			ca   *pki.CA
			want bool
		}{{oldCA, step.wantOld}, {newCA, step.wantNw}} {
			if err := cfg.VerifyConnection(server(tc.ca)); (err == nil) != tc.want {
				t.Errorf("ca.crt %.20q: a server certificate of CA %s verifies: %v, want %t", step.caFile, tc.ca.Cert.Subject.CommonName, err, tc.want)
			}
		}
	}
	if files.config("other.example").VerifyConnection(server(newCA)) == nil {
		t.Error("a certificate for another name verifies")
	}
	if cfg.VerifyConnection(tls.ConnectionState{ServerName: "etcd.example"}) == nil {
		t.Error("a server without a certificate verifies")
	}
}

// TestReloadingClientTLSFollowsACAChangeOnRealEtcd: through etcd's client (gRPC) to a real member over TLS, a
// new connection trusts the CAs of ca.crt as it is then: the member's certificate from a new CA verifies once
// ca.crt holds that CA, and no longer once it does not.
func TestReloadingClientTLSFollowsACAChangeOnRealEtcd(t *testing.T) {
	files := newClientTLSFiles(t)
	oldCA, newCA := files.newCA("old"), files.newCA("new")
	both := append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...)
	member := pki.Request{CommonName: "member", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAndClient, Validity: time.Hour}
	cert, key := files.issue(oldCA, member)
	memberCert, memberKey := files.write("member.crt", cert), files.write("member.key", key)
	c := etcdtest.NewForTest(t, "agent-tls")
	// The member trusts both CAs, as members do once they restarted with the trust bundle.
	c.TLS = &etcdtest.TLSFiles{CA: files.write("member-ca.crt", both), ServerCert: memberCert, ServerKey: memberKey,
		PeerCert: memberCert, PeerKey: memberKey}
	c.StartNew(t, 1)

	files.mountClient(oldCA)
	files.write("ca.crt", oldCA.CertPEM)
	cfg := files.config("127.0.0.1")
	c.Client(t, cfg, 0) // waits for a read over the agent's configuration
	read := func() error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL(0)}, DialTimeout: 3 * time.Second, TLS: cfg, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err = cli.Get(ctx, "health")
		return err
	}

	cert, key = files.issue(newCA, member)
	files.write("member.crt", cert) // etcd reads its certificate on every handshake
	files.write("member.key", key)
	if err := read(); err == nil {
		t.Fatal("a member certificate of a CA ca.crt lacks verifies")
	}
	files.write("ca.crt", both)
	if err := read(); err != nil {
		t.Fatalf("ca.crt holds the member certificate's CA: %v", err)
	}
	files.write("ca.crt", newCA.CertPEM)
	if err := read(); err != nil {
		t.Fatalf("ca.crt holds the new CA alone: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL(0)}, DialTimeout: 3 * time.Second, TLS: files.config("127.0.0.2"),
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "health"); err == nil {
		t.Error("a member certificate for another address verifies")
	}
}

// TestInstallSelf: install-self copies the running binary, executable, into the shared directory, again
// over an earlier copy (an init container restarted).
func TestInstallSelf(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		path, err := installSelf(dir)
		if err != nil {
			t.Fatal(err)
		}
		if path != filepath.Join(dir, entryName) {
			t.Fatalf("installed as %s", path)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the installed binary differs from the running one")
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Fatalf("installed binary: %v, mode %v", err, fi.Mode())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the binary alone", len(entries))
	}
}

// TestStatusReportContract: what the agent serves at /status is what the operator reads (continuous.ReadReport,
// as observeContinuousBackup decodes it), with the wire names an operator of another release decodes too
// (the agent and the operator are rolled separately).
func TestStatusReportContract(t *testing.T) {
	oldest, newest := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	detected := time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)
	a := &agent{cfg: continuousBackupConfig{Cluster: cbCluster, Namespace: cbNamespace, ClusterUID: cbUID},
		location: "pvc://claim/team-a/source/continuous/", hasChain: true, retentionErr: "prune: access denied",
		oldestRevision: 10, oldestTime: oldest, newestRevision: 500, newestTime: newest, chains: 2, catalogRead: true,
		gaps: []continuous.Gap{{From: 200, To: 260, Reason: "compacted before it was captured", DetectedAt: detected}}}
	srv := httptest.NewServer(a.handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/status: %d %v", resp.StatusCode, err)
	}

	got, err := continuous.ReadReport(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := continuous.Report{ClusterUID: cbUID, Location: "pvc://claim/team-a/source/continuous/", Capturing: true,
		OldestRevision: 10, OldestTime: oldest, NewestRevision: 500, NewestTime: newest.UTC(), Chains: 2, LastError: "prune: access denied",
		Gaps: []continuous.ReportGap{{FromRevision: 200, ToRevision: 260, Reason: "compacted before it was captured", Time: detected}}}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Fatalf("the operator reads (-want +got):\n%s\nfrom %s", diff, body)
	}

	var wire map[string]any
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"clusterUID", "location", "capturing", "oldestRevision", "oldestTime", "newestRevision", "newestTime", "gaps", "chains", "lastError"} {
		if _, ok := wire[k]; !ok {
			t.Errorf("/status lacks %q: %s", k, body)
		}
	}
	gap, _ := wire["gaps"].([]any)
	if len(gap) != 1 {
		t.Fatalf("/status gaps: %s", body)
	}
	for _, k := range []string{"fromRevision", "toRevision", "reason", "time"} {
		if _, ok := gap[0].(map[string]any)[k]; !ok {
			t.Errorf("/status gap lacks %q: %s", k, body)
		}
	}
}

// TestAgentMetricNames: the agent serves exactly the metrics continuous.MetricNames lists, which the
// documentation and the query checks are held to.
func TestAgentMetricNames(t *testing.T) {
	descs := make(chan *prometheus.Desc, 64)
	newAgentCollector(&agent{}).Describe(descs)
	close(descs)
	var got []string
	for d := range descs {
		name, _, _ := strings.Cut(strings.TrimPrefix(d.String(), `Desc{fqName: "`), `"`)
		got = append(got, name)
	}
	slices.Sort(got)
	want := continuous.MetricNames()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the agent describes %q, continuous.MetricNames lists %q", got, want)
	}
}

// TestAgentForgetsAnEarlierHistory: once the capture begins a new history (the cluster was restored from a
// snapshot), the report claims none of what the earlier history covered, and a catalog read before the new
// history began does not bring it back.
func TestAgentForgetsAnEarlierHistory(t *testing.T) {
	a := &agent{cfg: continuousBackupConfig{Cluster: cbCluster, Namespace: cbNamespace, ClusterUID: cbUID}, retain: make(chan struct{}, 1)}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	started := func(m continuous.Manifest, stored int64, at time.Time) {
		a.observe(continuous.Event{Kind: continuous.ChainStarted, Manifest: &m, Status: continuous.Status{ChainID: m.ChainID,
			BaseRevision: m.BaseRevision, BaseTime: m.TakenAt, StoredRevision: stored, StoredTime: at}})
	}
	first := continuous.Manifest{ChainID: "00000000000000000010-aaaaaaaa", BaseRevision: 10, TakenAt: t0, History: "00000000000000000010-aaaaaaaa"}
	started(first, 10, t0)
	a.observe(continuous.Event{Kind: continuous.SegmentWritten, Status: continuous.Status{ChainID: first.ChainID, BaseRevision: 10, BaseTime: t0,
		StoredRevision: 500, StoredTime: t0.Add(time.Hour)}})
	if s := a.status(); s.OldestRevision != 10 || s.NewestRevision != 500 {
		t.Fatalf("first history: %+v", s)
	}

	second := continuous.Manifest{ChainID: "00000000000000000080-bbbbbbbb", BaseRevision: 80, TakenAt: t0.Add(2 * time.Hour),
		History: "00000000000000000080-bbbbbbbb", Reason: continuous.ReasonHistoryRestarted,
		Gap: &continuous.Gap{From: 1, To: 79, Reason: "the cluster's history restarted"}}
	started(second, 80, second.TakenAt)
	a.observe(continuous.Event{Kind: continuous.GapRecorded, Gap: second.Gap})
	if s := a.status(); s.OldestRevision != 80 || s.NewestRevision != 80 || !s.NewestTime.Equal(second.TakenAt) || len(s.Gaps) != 0 || a.gapsIn != 1 {
		t.Fatalf("after the history restarted: %+v (gaps recorded %d); want only the new chain's coverage", s, a.gapsIn)
	}
}
