package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/pki"
)

// etcdBinDir points ETCD_BIN_DIR at the repository's etcd (`make etcd`) when the test runs without `make test`.
func etcdBinDir(t *testing.T) {
	if os.Getenv("ETCD_BIN_DIR") != "" {
		return
	}
	bins, _ := filepath.Glob("../../../bin/etcd/v3.5.*/etcd")
	if len(bins) == 0 {
		t.Skip("no etcd binary: set ETCD_BIN_DIR or run `make etcd`")
	}
	dir, err := filepath.Abs(filepath.Dir(bins[len(bins)-1]))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCD_BIN_DIR", dir)
}

// TestWorkloads runs every workload for a second against one real etcd member: each serves requests, none
// fails, and the figures are consistent.
func TestWorkloads(t *testing.T) {
	etcdBinDir(t)
	c := etcdtest.StartStatic(t, "loadgen", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Client(t, nil, 0) // a leader

	o := options{endpoints: []string{c.ClientURL(0)}, clients: 4, conns: 2, duration: time.Second, warmup: 200 * time.Millisecond,
		valueSize: 256, keys: 1000, workloads: split("put,get-linearizable,get-serializable,txn"), label: "test", dialTimeout: 10 * time.Second}
	res, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Workloads) != 4 {
		t.Fatalf("workloads: %+v", res.Workloads)
	}
	for _, w := range res.Workloads {
		if w.Requests == 0 || w.Errors != 0 || w.PerSecond <= 0 || w.P50ms <= 0 || w.P50ms > w.P99ms || w.P99ms > w.Maxms {
			t.Errorf("%s: %+v", w.Name, w)
		}
	}
}

// TestCommand runs the built command as the pod does and reads its JSON from stdout.
func TestCommand(t *testing.T) {
	etcdBinDir(t)
	c := etcdtest.StartStatic(t, "loadgen", 1, nil)
	c.Client(t, nil, 0)
	bin := filepath.Join(t.TempDir(), "loadgen")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-endpoints", c.ClientURL(0), "-duration", "1s", "-warmup", "0", "-clients", "4", "-conns", "1",
		"-workloads", "put,txn", "-label", "cmd")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("loadgen: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Label != "cmd" || len(res.Workloads) != 2 || res.Workloads[0].Name != "put" || res.Workloads[1].Name != "txn" {
		t.Fatalf("result: %+v", res)
	}
	for _, w := range res.Workloads {
		if w.Requests == 0 || w.Errors != 0 {
			t.Errorf("%s: %+v", w.Name, w)
		}
	}
	if !bytes.Contains(stderr.Bytes(), []byte("cmd put:")) {
		t.Errorf("stderr has no readable line: %s", stderr.String())
	}
}

// TestTLS runs the generator with a client certificate against a member that requires one, as it runs
// against the operator's clusters with TLS.
func TestTLS(t *testing.T) {
	etcdBinDir(t)
	dir := t.TempDir()
	now := time.Now()
	ca, _, err := pki.NewCA("loadgen-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	issue := func(name string, req pki.Request) (string, string) {
		cert, key, err := ca.Issue(req, now)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", cert), write(name+".key", key)
	}
	files := &etcdtest.TLSFiles{CA: write("ca.crt", ca.CertPEM)}
	member := pki.Request{CommonName: "member", DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: pki.ServerAndClient, Validity: time.Hour}
	files.ServerCert, files.ServerKey = issue("server", member)
	files.PeerCert, files.PeerKey = issue("peer", member)
	clientCert, clientKey := issue("client", pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: time.Hour})

	c := etcdtest.NewForTest(t, "loadgen")
	c.TLS = files
	c.StartNew(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := options{endpoints: []string{c.ClientURL(0)}, cacert: files.CA, cert: clientCert, key: clientKey, clients: 2, conns: 1,
		duration: 500 * time.Millisecond, valueSize: 256, keys: 100, workloads: []string{"put", "get-linearizable"}, dialTimeout: 30 * time.Second}
	res, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Workloads {
		if w.Requests == 0 || w.Errors != 0 {
			t.Errorf("%s: %+v", w.Name, w)
		}
	}
	// Without the client certificate the member refuses the connection: the generator fails, never measures.
	o.cert, o.key, o.dialTimeout = "", "", 3*time.Second
	if _, err := run(ctx, o); err == nil {
		t.Error("a run without the client certificate succeeded")
	}
}

// TestUnknownWorkload: a typo is refused before anything connects.
func TestUnknownWorkload(t *testing.T) {
	_, err := run(context.Background(), options{endpoints: []string{"http://127.0.0.1:1"}, clients: 1, conns: 1, keys: 10, workloads: []string{"puts"}})
	if err == nil {
		t.Fatal("unknown workload accepted")
	}
}
