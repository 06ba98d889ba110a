// Command loadgen drives an etcd cluster with clientv3 load, one workload after another, and prints one JSON
// object (Result) on stdout and readable lines on stderr. It is the load generator of the node's served-load
// benchmark (tests/bench/node, TestServedLoad), run in a pod next to the members (image loadgen:bench,
// hack/node/images.sh with LOADGEN_IMAGE=1), and runs anywhere else as well:
//
//	go run ./tests/bench/loadgen -endpoints http://127.0.0.1:2379 -duration 5s
//	loadgen -endpoints https://op-client:2379 -cacert ca.crt -cert tls.crt -key tls.key -workloads put,txn
//
// Workloads: put (a 256-byte value to a random key), get-linearizable, get-serializable, and txn (a small
// transaction: compare a random key's mod revision, a comparison that always holds, then put it and another key). Each runs for
// -duration after -warmup of the same requests; clients goroutines share conns clientv3 clients, each
// connected to every endpoint.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/tests/bench/internal/load"
)

// Result is what loadgen prints on stdout.
type Result struct {
	Label     string     `json:"label,omitempty"`
	Endpoints []string   `json:"endpoints"`
	Clients   int        `json:"clients"`
	Conns     int        `json:"conns"`
	ValueSize int        `json:"valueSize"`
	Keys      int        `json:"keys"`
	Workloads []Workload `json:"workloads"`
}

// Workload is one workload's measured phase.
type Workload struct {
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
	// FirstError is the first failed request's error, if any.
	FirstError string `json:"firstError,omitempty"`
	load.Percentiles
}

type options struct {
	endpoints         []string
	cacert, cert, key string
	clients, conns    int
	duration, warmup  time.Duration
	valueSize, keys   int
	workloads         []string
	label             string
	dialTimeout       time.Duration
}

func main() {
	var o options
	var endpoints, workloads string
	flag.StringVar(&endpoints, "endpoints", "http://127.0.0.1:2379", "comma-separated client URLs")
	flag.StringVar(&o.cacert, "cacert", "", "CA bundle to verify the members' certificates (TLS)")
	flag.StringVar(&o.cert, "cert", "", "client certificate (TLS)")
	flag.StringVar(&o.key, "key", "", "client certificate's key (TLS)")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients (goroutines issuing one request at a time)")
	flag.IntVar(&o.conns, "conns", 4, "clientv3 clients the goroutines share (each connects to every endpoint)")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "measured phase per workload")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured requests before each workload's phase")
	flag.IntVar(&o.valueSize, "value-size", 256, "bytes per value")
	flag.IntVar(&o.keys, "keys", 10000, "key space")
	flag.StringVar(&workloads, "workloads", "put,get-linearizable,get-serializable,txn", "comma-separated workloads, run in this order")
	flag.StringVar(&o.label, "label", "", "label copied into the result")
	flag.DurationVar(&o.dialTimeout, "dial-timeout", 10*time.Second, "time to connect before giving up")
	flag.Parse()
	o.endpoints = split(endpoints)
	o.workloads = split(workloads)
	res, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// ops are the workloads by name, over a key space of keys and values of value.
func ops(keys int, value string) map[string]load.Op {
	return map[string]load.Op{
		"put": func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
			_, err := cli.Put(ctx, load.Key(rng.IntN(keys)), value)
			return err
		},
		"get-linearizable": func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
			_, err := cli.Get(ctx, load.Key(rng.IntN(keys)))
			return err
		},
		"get-serializable": func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
			_, err := cli.Get(ctx, load.Key(rng.IntN(keys)), clientv3.WithSerializable())
			return err
		},
		// A small transaction: compare a key's mod revision (0 when it does not exist yet: the put workload
		// usually ran before), then put two keys. Whether the comparison holds, it is one write to raft.
		"txn": func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
			i := rng.IntN(keys)
			j := (i + 1 + rng.IntN(keys-1)) % keys // another key: etcd refuses a txn putting one key twice
			k := load.Key(i)
			_, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(k), "<", int64(1)<<62)).
				Then(clientv3.OpPut(k, value), clientv3.OpPut(load.Key(j), value)).
				Commit()
			return err
		},
	}
}

func run(ctx context.Context, o options) (*Result, error) {
	if len(o.endpoints) == 0 || o.clients < 1 || o.conns < 1 || o.keys < 2 {
		return nil, fmt.Errorf("need endpoints, at least one client and one connection, and two keys")
	}
	value := make([]byte, o.valueSize)
	_, _ = rand.Read(value)
	for i := range value {
		value[i] = 'a' + value[i]%26
	}
	byName := ops(o.keys, string(value))
	for _, w := range o.workloads {
		if byName[w] == nil {
			return nil, fmt.Errorf("unknown workload %q (put, get-linearizable, get-serializable, txn)", w)
		}
	}
	cfg, err := clientConfig(o)
	if err != nil {
		return nil, err
	}
	clis := make([]*clientv3.Client, o.conns)
	for i := range clis {
		if clis[i], err = clientv3.New(cfg); err != nil {
			return nil, fmt.Errorf("connect to %v: %w", o.endpoints, err)
		}
		defer func(c *clientv3.Client) { _ = c.Close() }(clis[i])
	}
	// Every endpoint answers before anything is measured (a member not yet reachable would count as errors).
	for _, ep := range o.endpoints {
		sctx, cancel := context.WithTimeout(ctx, o.dialTimeout)
		_, err := clis[0].Status(sctx, ep)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", ep, err)
		}
	}
	res := &Result{Label: o.label, Endpoints: o.endpoints, Clients: o.clients, Conns: o.conns, ValueSize: o.valueSize, Keys: o.keys}
	for _, name := range o.workloads {
		op := byName[name]
		if o.warmup > 0 {
			load.Drive(ctx, clis, o.clients, o.warmup, 0, op)
		}
		var first string
		var once sync.Once
		counted := func(ctx context.Context, cli *clientv3.Client, rng *mrand.Rand) error {
			err := op(ctx, cli, rng)
			if err != nil {
				once.Do(func() { first = err.Error() })
			}
			return err
		}
		n, errs, lat, elapsed := load.Drive(ctx, clis, o.clients, o.duration, 0, counted)
		w := Workload{Name: name, Requests: n, Errors: errs, Seconds: elapsed.Seconds(), PerSecond: float64(n) / elapsed.Seconds(),
			FirstError: first, Percentiles: load.Summarize(lat)}
		fmt.Fprintf(os.Stderr, "%s %s: %d requests (%d errors) in %.1f s: %.0f/s, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			o.label, name, w.Requests, w.Errors, w.Seconds, w.PerSecond, w.P50ms, w.P90ms, w.P99ms, w.Maxms)
		res.Workloads = append(res.Workloads, w)
	}
	return res, nil
}

// clientConfig is the clientv3 configuration: TLS when any of the files is given.
func clientConfig(o options) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: o.endpoints, DialTimeout: o.dialTimeout, Logger: zap.NewNop()}
	if o.cacert == "" && o.cert == "" && o.key == "" {
		return cfg, nil
	}
	info := transport.TLSInfo{TrustedCAFile: o.cacert, CertFile: o.cert, KeyFile: o.key}
	tc, err := info.ClientConfig()
	if err != nil {
		return cfg, fmt.Errorf("TLS files: %w", err)
	}
	tc.MinVersion = tls.VersionTLS12
	cfg.TLS = tc
	return cfg, nil
}
