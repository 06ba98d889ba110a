package membergate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/pki"
)

// These tests run real etcd servers (ETCD_BIN_DIR, set by `make test`) standing in for member pods.

func startCluster(t *testing.T, name string, n int, files *etcdtest.TLSFiles) *etcdtest.Cluster {
	t.Helper()
	c := etcdtest.NewForTest(t, name)
	c.TLS = files
	c.StartNew(t, n)
	return c
}

func ordinals(n int) []int { return etcdtest.Ordinals(n) }

// client connects to the given members and waits until they serve a linearizable read.
func client(t *testing.T, c *etcdtest.Cluster, tlsConfig *tls.Config, ords ...int) *clientv3.Client {
	t.Helper()
	return c.Client(t, tlsConfig, ords...)
}

func memberID(t *testing.T, cli *clientv3.Client, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("no member %s in %v", name, resp.Members)
	return 0
}

// env is member i's etcd configuration as the pod would have it, with the kubelet's expansions done.
func env(c *etcdtest.Cluster, i int, state string, ords []int) map[string]string {
	e := map[string]string{
		"ETCD_DATA_DIR":                    c.DataDir(i),
		"ETCD_NAME":                        c.MemberName(i),
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": c.PeerURL(i),
		"ETCD_INITIAL_CLUSTER":             c.InitialCluster(ords),
		"ETCD_INITIAL_CLUSTER_STATE":       state,
	}
	if c.TLS != nil {
		e["ETCD_PEER_CERT_FILE"], e["ETCD_PEER_KEY_FILE"], e["ETCD_PEER_TRUSTED_CA_FILE"] = c.TLS.PeerCert, c.TLS.PeerKey, c.TLS.CA
	}
	return e
}

// gateConfig reads the configuration through ConfigFromEnv, as the init container does, and records the
// gate's log.
func gateConfig(t *testing.T, e map[string]string) (Config, *observer.ObservedLogs) {
	t.Helper()
	cfg, err := ConfigFromEnv(func(k string) string { return e[k] })
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	cfg.Log = zap.New(core)
	cfg.Interval, cfg.RequestTimeout = 100*time.Millisecond, time.Second
	return cfg, logs
}

// waitingFor is the last thing the gate logged it waits for.
func waitingFor(logs *observer.ObservedLogs) string {
	entries := logs.FilterMessage("waiting before etcd may start").All()
	if len(entries) == 0 {
		return ""
	}
	return entries[len(entries)-1].ContextMap()["for"].(string)
}

// checkWithin runs the gate with a deadline: a gate that is still waiting when it passes returns
// context.DeadlineExceeded.
func checkWithin(cfg Config, d time.Duration) (Decision, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return Check(ctx, cfg)
}

// TestEmptyMemberWaitsForItsPlannedJoin is the loss seen in CI: member 1's pod and volume are recreated
// while member 1 is still in the member list. Starting etcd then would take member 1's ID with none of
// its data; the gate holds it back until the operator has replaced the member, and then etcd joins as
// the new one.
func TestEmptyMemberWaitsForItsPlannedJoin(t *testing.T) {
	c := startCluster(t, "gate-wait", 3, nil)
	cli := client(t, c, nil, 0, 2)
	old := memberID(t, cli, c.MemberName(1))
	c.Stop(1)
	if err := c.Wipe(1); err != nil {
		t.Fatal(err)
	}

	cfg, logs := gateConfig(t, env(c, 1, "existing", ordinals(3)))
	d, err := checkWithin(cfg, 3*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the old member 1 is still listed: the gate must wait, got %+v, %v", d, err)
	}
	if w := waitingFor(logs); !strings.Contains(w, fmt.Sprintf("member %x", old)) || !strings.Contains(w, "has started") {
		t.Fatalf("the gate waits for %q; want it to name the started member %x", w, old)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.MemberRemove(ctx, old); err != nil {
		t.Fatal(err)
	}
	// A gate that is already waiting sees the join once it is planned, and not before.
	cfg, logs = gateConfig(t, env(c, 1, "existing", ordinals(3)))
	type result struct {
		d   Decision
		err error
	}
	done := make(chan result, 1)
	go func() { d, err := Check(ctx, cfg); done <- result{d, err} }()
	for !strings.Contains(waitingFor(logs), "no member has peer URL") {
		select {
		case r := <-done:
			t.Fatalf("the member was removed but not added back: the gate must wait, got %+v, %v", r.d, r.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// etcd refuses a membership change until every member has been connected for a few seconds (as it
	// does for the operator, which retries such refusals).
	added, err := cli.MemberAddAsLearner(ctx, []string{c.PeerURL(1)})
	for etcd.IsTransientRefusal(err) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		added, err = cli.MemberAddAsLearner(ctx, []string{c.PeerURL(1)})
	}
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.d.Start || !strings.Contains(r.d.Reason, fmt.Sprintf("member %x", added.Member.ID)) {
		t.Fatalf("the learner %x is added: the gate must let etcd start, got %+v, %v", added.Member.ID, r.d, r.err)
	}

	// And etcd, started on the gate's word, joins as the learner the operator added.
	if err := c.Start(1, c.InitialCluster(ordinals(3)), "existing"); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var joined bool
		for _, m := range resp.Members {
			joined = joined || m.ID == added.Member.ID && m.Name == c.MemberName(1)
		}
		if joined {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the learner never started: %v\n%s", resp.Members, c.Log(1))
		case <-time.After(200 * time.Millisecond):
		}
	}
	md, ok, err := ReadWALMetadata(WALDir(c.DataDir(1)))
	if err != nil || !ok || md.MemberID != added.Member.ID {
		t.Fatalf("member 1's WAL is of %x (ok %v, err %v), want the learner %x", md.MemberID, ok, err, added.Member.ID)
	}
}

// TestDataDirectories judges member data against a running cluster, and without one.
func TestDataDirectories(t *testing.T) {
	c := startCluster(t, "gate-data", 3, nil)
	cli := client(t, c, nil, 0, 1, 2)
	ids := map[int]uint64{}
	for i := range 3 {
		ids[i] = memberID(t, cli, c.MemberName(i))
	}

	t.Run("a current member's data", func(t *testing.T) {
		c.Stop(0)
		defer func() {
			if err := c.Start(0, c.InitialCluster(ordinals(3)), "new"); err != nil {
				t.Fatal(err)
			}
		}()
		// State existing or new makes no difference once there is data: etcd ignores it too.
		for _, state := range []string{"existing", "new"} {
			cfg, _ := gateConfig(t, env(c, 0, state, ordinals(3)))
			d, err := checkWithin(cfg, 20*time.Second)
			if err != nil || !d.Start || !strings.Contains(d.Reason, fmt.Sprintf("member %x, which peer", ids[0])) {
				t.Fatalf("state %s: got %+v, %v; want start on the listed member %x", state, d, err, ids[0])
			}
		}
	})

	t.Run("data of a removed member", func(t *testing.T) {
		c.Stop(2)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.MemberRemove(ctx, ids[2]); err != nil {
			t.Fatal(err)
		}
		cfg, _ := gateConfig(t, env(c, 2, "existing", ordinals(3)))
		d, err := checkWithin(cfg, 20*time.Second)
		if err != nil || d.Start {
			t.Fatalf("member %x was removed: the gate must refuse its data, got %+v, %v", ids[2], d, err)
		}
		if msg := d.Message(); !strings.HasPrefix(msg, RefusalMarker) || !strings.Contains(msg, fmt.Sprintf("%x", ids[2])) || strings.Contains(msg, "\n") {
			t.Fatalf("refusal message %q: want one line starting with %q naming member %x", msg, RefusalMarker, ids[2])
		}
	})

	t.Run("data of a member while another is forced to start alone", func(t *testing.T) {
		// Member 1's data, judged while the configuration forces member 0 (a quorum-loss recovery): started,
		// etcd would read the same instruction and force a cluster of its own. Its peers list it, so without
		// the instruction the gate would let it start.
		e := env(c, 1, "existing", ordinals(3))
		c.Stop(1)
		defer func() {
			if err := c.Start(1, c.InitialCluster(ordinals(3)), "existing"); err != nil {
				t.Fatal(err)
			}
		}()
		e[EnvForceNewClusterMember], e[EnvForceNewClusterOldPod], e[EnvPodUID] = c.MemberName(0), "old-pod", "new-pod"
		cfg, _ := gateConfig(t, e)
		d, err := checkWithin(cfg, 20*time.Second)
		if err != nil || d.Start || d.Force || !d.Hold || !strings.HasPrefix(d.Message(), HoldMarker) {
			t.Fatalf("got %+v, %v; want a hold", d, err)
		}
		e[EnvForceNewClusterMember] = c.MemberName(1)
		cfg, _ = gateConfig(t, e)
		if d, err := checkWithin(cfg, 20*time.Second); err != nil || !d.Start || !d.Force {
			t.Fatalf("the member forced to start alone: got %+v, %v; want a forced start", d, err)
		}
		// Its pod from before the instruction may have passed its gate already: it never forces.
		e[EnvPodUID] = "old-pod"
		cfg, _ = gateConfig(t, e)
		if d, err := checkWithin(cfg, 20*time.Second); err != nil || d.Start || d.Force || !d.Hold {
			t.Fatalf("the forced member's old pod: got %+v, %v; want a hold", d, err)
		}
	})

	t.Run("data of another cluster", func(t *testing.T) {
		other := startCluster(t, "gate-other", 1, nil)
		client(t, other, nil, 0)
		other.Stop(0)
		e := env(c, 0, "existing", ordinals(3)) // asks this cluster's peers...
		e["ETCD_DATA_DIR"] = other.DataDir(0)   // ...about the other cluster's member
		e["ETCD_NAME"], e["ETCD_INITIAL_ADVERTISE_PEER_URLS"] = other.MemberName(0), other.PeerURL(0)
		cfg, _ := gateConfig(t, e)
		d, err := checkWithin(cfg, 20*time.Second)
		if err != nil || d.Start || !strings.Contains(d.Reason, "is in cluster") {
			t.Fatalf("another cluster's data: got %+v, %v; want a refusal naming the cluster", d, err)
		}
	})

	t.Run("data during a restore from a backup", func(t *testing.T) {
		// The lost cluster's data (any other member's) starts, for the restore step to move it aside: the
		// peers that answer are the restored cluster, and their verdict would condemn it.
		other := startCluster(t, "gate-lost", 1, nil)
		client(t, other, nil, 0)
		other.Stop(0)
		e := env(c, 0, "existing", ordinals(3))
		e["ETCD_DATA_DIR"] = other.DataDir(0)
		e["ETCD_NAME"], e["ETCD_INITIAL_ADVERTISE_PEER_URLS"] = other.MemberName(0), other.PeerURL(0)
		e[EnvRestoreRecovery], e[EnvRestoreToken] = "restore-1", "gate-lost/restore-1"
		e["ETCD_INITIAL_CLUSTER_TOKEN"] = "gate-lost" // read by the kubelet before the recovery: not what the restore uses
		cfg, _ := gateConfig(t, e)
		d, err := checkWithin(cfg, 20*time.Second)
		if err != nil || !d.Start || !strings.Contains(d.Reason, "of the lost cluster: recovery restore-1 restores a backup") {
			t.Fatalf("the lost cluster's data during a restore: got %+v, %v; want start, for the restore step", d, err)
		}
		// Data the restore wrote (its member ID is the one the token gives the member) is judged as ever:
		// removed member 2's data, under the token that made it, is refused.
		e = env(c, 2, "existing", ordinals(3))
		e[EnvRestoreRecovery], e[EnvRestoreToken] = "restore-1", c.Name
		cfg, _ = gateConfig(t, e)
		if d, err := checkWithin(cfg, 20*time.Second); err != nil || d.Start || !strings.Contains(d.Reason, "does not list") {
			t.Fatalf("restored data of a removed member: got %+v, %v; want a refusal", d, err)
		}
		// An empty directory starts at once (the restore fills it): with state existing, a pod without
		// the restore step would wait for its member to be added.
		e = env(c, 2, "existing", ordinals(3))
		e["ETCD_DATA_DIR"] = t.TempDir()
		e[EnvRestoreRecovery], e[EnvRestoreToken] = "restore-1", c.Name
		cfg, _ = gateConfig(t, e)
		if d, err := checkWithin(cfg, 5*time.Second); err != nil || !d.Start || !strings.Contains(d.Reason, "recovery restore-1 restores a backup into it") {
			t.Fatalf("empty directory during a restore: got %+v, %v; want start", d, err)
		}
	})

	t.Run("no peer answers", func(t *testing.T) {
		// The whole cluster restarts: every member needs its own data, and nobody can say otherwise.
		c.Close()
		cfg, _ := gateConfig(t, env(c, 0, "existing", ordinals(3)))
		d, err := checkWithin(cfg, 20*time.Second)
		if err != nil || !d.Start || !strings.Contains(d.Reason, "no peer answered") {
			t.Fatalf("got %+v, %v; want start", d, err)
		}
		// Even the removed member's data starts: without an answer there is no evidence against it,
		// and a member with a WAL never takes another member's identity.
		cfg, _ = gateConfig(t, env(c, 2, "existing", ordinals(3)))
		if d, err := checkWithin(cfg, 20*time.Second); err != nil || !d.Start {
			t.Fatalf("got %+v, %v; want start", d, err)
		}
	})
}

// TestLateBootstrapMemberJoinsAsItself: members 0 and 1 of a 3-member initial cluster form it (a
// quorum) while member 2's pod is still being scheduled; the operator then switches new members to state
// existing. Member 2 is in the member list under its name from the initial cluster, but it has never run:
// its empty data directory is exactly right, and the gate must let it start at once (it once waited
// until the operator replaced the member for not starting, minutes later).
func TestLateBootstrapMemberJoinsAsItself(t *testing.T) {
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.New("gate-late", filepath.Join(t.TempDir(), "gate-late"), bin)
	t.Cleanup(c.Close)
	for i := range 2 {
		if err := c.Start(i, c.InitialCluster(ordinals(3)), "new"); err != nil {
			t.Fatal(err)
		}
	}
	cli := client(t, c, nil, 0, 1)
	want := memberID(t, cli, c.MemberName(2)) // listed under its name, never started

	cfg, _ := gateConfig(t, env(c, 2, "existing", ordinals(3)))
	d, err := checkWithin(cfg, 10*time.Second)
	if err != nil || !d.Start {
		t.Fatalf("got %+v, %v; want etcd to start as the bootstrap member that never ran", d, err)
	}
	if err := c.Start(2, c.InitialCluster(ordinals(3)), "existing"); err != nil {
		t.Fatal(err)
	}
	if got := memberID(t, client(t, c, nil, 2), c.MemberName(2)); got != want {
		t.Fatalf("member 2 runs as %x, want the bootstrap member %x", got, want)
	}
}

func TestBootstrapStartsAtOnce(t *testing.T) {
	// Nothing listens at these peers: a bootstrapping member must not need them.
	e := map[string]string{
		"ETCD_DATA_DIR":                    t.TempDir(),
		"ETCD_NAME":                        "m-0",
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": "http://127.0.0.1:1",
		"ETCD_INITIAL_CLUSTER":             "m-0=http://127.0.0.1:1,m-1=http://127.0.0.1:2,m-2=http://127.0.0.1:3",
		"ETCD_INITIAL_CLUSTER_STATE":       "new",
	}
	cfg, _ := gateConfig(t, e)
	d, err := checkWithin(cfg, 500*time.Millisecond)
	if err != nil || !d.Start {
		t.Fatalf("got %+v, %v; want start", d, err)
	}
	// The same empty member with state existing waits: nobody has planned its join.
	e["ETCD_INITIAL_CLUSTER_STATE"] = "existing"
	cfg, logs := gateConfig(t, e)
	if d, err := checkWithin(cfg, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %+v, %v; want the gate to wait", d, err)
	}
	if w := waitingFor(logs); !strings.Contains(w, "no peer answered") {
		t.Fatalf("the gate waits for %q", w)
	}
}

// TestLateBootstrapOnlyForMembersThatNeverStarted: once the cluster formed without some of its initial
// members, state "new" lets only those bootstrap; another member with an empty directory lost its data and
// is held, whether or not a peer answers (nothing listens at these peers).
func TestLateBootstrapOnlyForMembersThatNeverStarted(t *testing.T) {
	e := map[string]string{
		"ETCD_DATA_DIR":                    t.TempDir(),
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": "http://127.0.0.1:1",
		"ETCD_INITIAL_CLUSTER":             "m-0=http://127.0.0.1:1,m-1=http://127.0.0.1:2,m-2=http://127.0.0.1:3",
		"ETCD_INITIAL_CLUSTER_STATE":       "new",
		EnvLateBootstrap:                   "m-2",
	}
	e["ETCD_NAME"] = "m-2"
	cfg, _ := gateConfig(t, e)
	if d, err := checkWithin(cfg, 500*time.Millisecond); err != nil || !d.Start {
		t.Fatalf("m-2 never started: got %+v, %v; want start", d, err)
	}
	e["ETCD_NAME"] = "m-0"
	cfg, _ = gateConfig(t, e)
	d, err := checkWithin(cfg, 500*time.Millisecond)
	if err != nil || d.Start || !d.Hold || !strings.HasPrefix(d.Message(), HoldMarker) || !strings.Contains(d.Reason, "m-0") {
		t.Fatalf("m-0 ran before and its directory is empty: got %+v, %v; want a hold naming it", d, err)
	}
}

// TestPeersOverTLS asks the peers with the member's peer certificate, and trusts only the peer CA.
func TestPeersOverTLS(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	ca, _, err := pki.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(pki.Request{CommonName: "member", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: pki.ServerAndClient, Validity: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	files := &etcdtest.TLSFiles{CA: write("ca.crt", ca.CertPEM), ServerCert: write("tls.crt", cert), ServerKey: write("tls.key", key),
		PeerCert: write("tls.crt", cert), PeerKey: write("tls.key", key)}
	c := startCluster(t, "gate-tls", 3, files)
	clientTLS, err := PeerTLSConfig(files.PeerCert, files.PeerKey, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t, c, clientTLS, 0, 1)
	removed := memberID(t, cli, c.MemberName(2))
	c.Stop(2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.MemberRemove(ctx, removed); err != nil {
		t.Fatal(err)
	}

	cfg, _ := gateConfig(t, env(c, 2, "existing", ordinals(3)))
	if cfg.TLS == nil {
		t.Fatal("https peers, but no TLS configuration")
	}
	d, err := checkWithin(cfg, 20*time.Second)
	if err != nil || d.Start || !strings.HasPrefix(d.Message(), RefusalMarker) {
		t.Fatalf("over TLS: got %+v, %v; want the removed member's data refused", d, err)
	}

	// A gate that trusts another CA gets no answer from these peers (and so has no evidence).
	stranger, _, err := pki.NewCA("stranger", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	e := env(c, 2, "existing", ordinals(3))
	e["ETCD_PEER_TRUSTED_CA_FILE"] = write("stranger.crt", stranger.CertPEM)
	cfg, logs := gateConfig(t, e)
	d, err = checkWithin(cfg, 20*time.Second)
	if err != nil || !d.Start || !strings.Contains(d.Reason, "no peer answered") {
		t.Fatalf("with another CA: got %+v, %v; want no answer", d, err)
	}
	if entries := logs.FilterMessage("no peer answered; the data is the member's own").All(); len(entries) == 0 ||
		!strings.Contains(fmt.Sprint(entries[0].ContextMap()["error"]), "certificate") {
		t.Fatalf("the peers must have been refused for their certificate: %v", logs.All())
	}

	// A missing peer certificate fails the gate at once rather than looking like silent peers.
	e = env(c, 2, "existing", ordinals(3))
	e["ETCD_PEER_KEY_FILE"] = filepath.Join(dir, "missing.key")
	if _, err := ConfigFromEnv(func(k string) string { return e[k] }); err == nil {
		t.Fatal("a missing peer key was accepted")
	}
}
