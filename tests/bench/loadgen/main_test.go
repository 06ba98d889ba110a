package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcdtest"
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

// TestUnknownWorkload: a typo is refused before anything connects.
func TestUnknownWorkload(t *testing.T) {
	_, err := run(context.Background(), options{endpoints: []string{"http://127.0.0.1:1"}, clients: 1, conns: 1, keys: 10, workloads: []string{"puts"}})
	if err == nil {
		t.Fatal("unknown workload accepted")
	}
}
