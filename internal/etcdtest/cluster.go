// Package etcdtest runs real etcd servers as local processes that stand in for the member pods of an
// EtcdCluster: member <name>-<i> listens on local ports, and its data directory plays the role of its
// volume. Tests use it to drive the membership logic against real etcd, never a fake.
package etcdtest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/testproc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd binary built by `make etcd` (ETCD_BIN_DIR, set by `make test`).
func Binary() (string, error) { return binaryIn("ETCD_BIN_DIR") }

// NextBinary returns the newest etcd the project runs, built by `make etcd-next` (ETCD_NEXT_BIN_DIR, set
// by `make test`), for what only that version has.
func NextBinary() (string, error) { return binaryIn("ETCD_NEXT_BIN_DIR") }

func binaryIn(variable string) (string, error) {
	dir := os.Getenv(variable)
	if dir == "" {
		return "", errors.New(variable + " is not set: run the tests with `make test`")
	}
	bin := filepath.Join(dir, "etcd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("etcd binary: %w", err)
	}
	return bin, nil
}

// Cluster is a set of local etcd member processes.
type Cluster struct {
	Name string
	Dir  string
	// Bin is the etcd binary new processes start from (tests swap it to upgrade).
	Bin string

	// TLS, when set before the first member starts, makes every member serve clients and peers over TLS
	// with client certificate authentication, from these files (which tests may rewrite to rotate).
	TLS *TLSFiles

	// Env is extra ETCD_* configuration every member starts with (as a pod's environment).
	Env map[string]string
	// Args are extra flags every member starts with, after the harness's own (a later flag wins).
	Args []string

	mu    sync.Mutex
	ports map[int][2]int // ordinal -> peer, client
	procs map[int]*testproc.Process
}

// TLSFiles are the certificate files every member uses.
type TLSFiles struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey string
}

func (c *Cluster) scheme() string {
	if c.TLS != nil {
		return "https"
	}
	return "http"
}

// StartStatic starts a new cluster of n members bootstrapped from a static member list, with env as extra
// configuration of every member, and stops it when the test ends.
func StartStatic(t testing.TB, name string, n int, env map[string]string) *Cluster {
	t.Helper()
	c := NewForTest(t, name)
	c.Env = env
	c.StartNew(t, n)
	return c
}

// NewForTest is New in the test's temporary directory, with the built etcd; the cluster is stopped when the
// test ends. Set its configuration (Env, Args, TLS), then start it.
func NewForTest(t testing.TB, name string) *Cluster {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := New(name, filepath.Join(t.TempDir(), name), bin)
	t.Cleanup(c.Close)
	return c
}

// StartNew starts members 0..n-1 as a new cluster bootstrapped from a static member list.
func (c *Cluster) StartNew(t testing.TB, n int) {
	t.Helper()
	ords := Ordinals(n)
	for _, i := range ords {
		if err := c.Start(i, c.InitialCluster(ords), "new"); err != nil {
			t.Fatal(err)
		}
	}
}

// Ordinals returns 0..n-1.
func Ordinals(n int) []int {
	ords := make([]int, n)
	for i := range ords {
		ords[i] = i
	}
	return ords
}

// New prepares an empty cluster; nothing runs until Start.
func New(name, dir, bin string) *Cluster {
	return &Cluster{Name: name, Dir: dir, Bin: bin, ports: map[int][2]int{}, procs: map[int]*testproc.Process{}}
}

// MemberName is the name of ordinal i, as a pod would be named.
func (c *Cluster) MemberName(i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }

func (c *Cluster) portsOf(i int) [2]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.ports[i]
	if !ok {
		p = [2]int{testproc.Port(), testproc.Port()}
		c.ports[i] = p
	}
	return p
}

// PeerURL of ordinal i.
func (c *Cluster) PeerURL(i int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", c.scheme(), c.portsOf(i)[0])
}

// ClientURL of ordinal i.
func (c *Cluster) ClientURL(i int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", c.scheme(), c.portsOf(i)[1])
}

// DataDir of ordinal i: its "volume".
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.Dir, fmt.Sprintf("member-%d", i)) }

// Start runs member i with the given initial cluster ("name=peerURL,...") and state ("new"/"existing"),
// as a pod would start with the operator's configuration. It returns at once; a member that exits is
// reported by Running.
func (c *Cluster) Start(i int, initialCluster, state string) error {
	return c.StartWithEnv(i, initialCluster, state, nil)
}

// StartWithEnv is Start with further ETCD_* configuration for this start only (a pod's environment from a
// configuration that changes between starts).
func (c *Cluster) StartWithEnv(i int, initialCluster, state string, env map[string]string) error {
	c.mu.Lock()
	if p, ok := c.procs[i]; ok && p.Alive() {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	args := []string{
		"--name", c.MemberName(i),
		"--data-dir", c.DataDir(i),
		"--listen-peer-urls", c.PeerURL(i),
		"--initial-advertise-peer-urls", c.PeerURL(i),
		"--listen-client-urls", c.ClientURL(i),
		"--advertise-client-urls", c.ClientURL(i),
		"--initial-cluster", initialCluster,
		"--initial-cluster-state", state,
		"--initial-cluster-token", c.Name,
		"--logger", "zap", "--log-level", "warn",
	}
	if t := c.TLS; t != nil {
		args = append(args, "--cert-file", t.ServerCert, "--key-file", t.ServerKey, "--trusted-ca-file", t.CA,
			"--client-cert-auth", "--peer-cert-file", t.PeerCert, "--peer-key-file", t.PeerKey,
			"--peer-trusted-ca-file", t.CA, "--peer-client-cert-auth")
	}
	cmd := exec.Command(c.Bin, append(args, c.Args...)...)
	cmd.Env = os.Environ()
	for _, e := range []map[string]string{c.Env, env} {
		for k, v := range e {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	p, err := testproc.Start(cmd, c.logFile(i))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	return nil
}

// PID of member i's process, or 0.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.procs[i]; ok && p.Alive() {
		return p.PID()
	}
	return 0
}

// Running reports whether member i's process is alive.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[i]
	return ok && p.Alive()
}

// Stop terminates member i (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	p, ok := c.procs[i]
	delete(c.procs, i)
	c.mu.Unlock()
	if !ok {
		return
	}
	p.Stop()
}

// Wipe deletes member i's data, as deleting its volume would.
func (c *Cluster) Wipe(i int) error { return os.RemoveAll(c.DataDir(i)) }

// HasData reports whether member i has a data directory.
func (c *Cluster) HasData(i int) bool {
	_, err := os.Stat(c.DataDir(i))
	return err == nil
}

// Ordinals returns the ordinals with a running process.
func (c *Cluster) Ordinals() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, p := range c.procs {
		if p.Alive() {
			out = append(out, i)
		}
	}
	return out
}

func (c *Cluster) logFile(i int) string { return filepath.Join(c.Dir, fmt.Sprintf("member-%d.log", i)) }

// FullLog returns member i's whole log.
func (c *Cluster) FullLog(i int) string {
	b, _ := os.ReadFile(c.logFile(i))
	return string(b)
}

// Log returns the end of member i's log, for failure messages.
func (c *Cluster) Log(i int) string {
	lines := strings.Split(strings.TrimSpace(c.FullLog(i)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Close stops every member.
func (c *Cluster) Close() {
	c.mu.Lock()
	var ords []int
	for i := range c.procs {
		ords = append(ords, i)
	}
	c.mu.Unlock()
	for _, i := range ords {
		c.Stop(i)
	}
}

// InitialCluster renders "name=peerURL,..." for the given ordinals.
func (c *Cluster) InitialCluster(ordinals []int) string {
	parts := make([]string, 0, len(ordinals))
	for _, i := range ordinals {
		parts = append(parts, c.MemberName(i)+"="+c.PeerURL(i))
	}
	return strings.Join(parts, ",")
}

// Client connects to the given members (over TLS when tlsConfig is set) and waits until they serve a
// linearizable read, which needs a leader; the client is closed when the test ends.
func (c *Cluster) Client(t testing.TB, tlsConfig *tls.Config, ords ...int) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, i := range ords {
		eps = append(eps, c.ClientURL(i))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "health")
		rcancel()
		if err == nil {
			return cli
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster %s never served a read: %v\n%s", c.Name, err, c.Log(ords[0]))
		}
	}
}
