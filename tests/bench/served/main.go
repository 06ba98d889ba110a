// Command served measures what TLS costs a three-member etcd cluster configured as the operator configures
// its members, outside Kubernetes: it starts real clusters on localhost in several variants (plain, the
// operator's TLS, the operator's TLS before etcd's HTTP endpoints left the client port, TLS on one side only,
// and other settings), drives each with the same clientv3 load (puts of 256-byte values, then linearizable
// gets), and reports throughput, latency and the CPU the members spend per request, with CPU profiles of
// every member and of the load generator, beside the previous report's ratios (-before).
//
// Run it from the repository root (the etcd binary is built by `make etcd`; `make bench-served` runs it):
//
//	go run ./tests/bench/served -rounds 5 -duration 10s -max-others 0.15 -out /tmp/served
//	go run ./tests/bench/served -variants plain,tls,tls-shared -rate 2500 -out /tmp/served-paced
//	go run ./tests/bench/served -analyze /tmp/served           # the profile breakdown of an earlier run
//	go run ./tests/bench/served -handshakes 2000 -variants ''  # CPU of one TLS handshake, in process
//	go run ./tests/bench/served -list                          # the variants
//
// Variants run one after another in every round, in an order that rotates each round, each on a new cluster,
// so a ratio to plain is taken within one round: the machine's other load shifts between rounds, much less
// within one. With -max-others, a run during which other processes took more CPU than that is repeated.
// CPU per request is the members' own CPU time (utime+stime of the three etcd processes, from /proc) over the
// phase, divided by the requests served in it; the load generator's CPU is reported apart. With -rate the
// requests are paced, so variants are compared at the same load (etcd batches less at lower rates, so CPU per
// request depends on the rate).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type options struct {
	etcdBin      string
	variants     []string
	rounds       int
	warmup       time.Duration
	duration     time.Duration
	getDuration  time.Duration
	clients      int
	conns        int
	valueSize    int
	keys         int
	out          string
	profileRound int
	quota        int64
	rate         float64
	// maxOthers is the most CPU (in cores, averaged over the put phase) the machine's other processes may
	// take for a run to count; a run above it is repeated up to retries times, after the machine has been
	// quiet (below maxOthers) for two seconds.
	maxOthers float64
	retries   int
	// before holds each variant's figures in the previous report, printed beside this run's.
	before string
}

func main() {
	var o options
	var variants string
	var analyze string
	var handshakes int
	var list bool
	flag.StringVar(&o.etcdBin, "etcd", "bin/etcd/v3.5.35/etcd", "etcd binary")
	flag.StringVar(&variants, "variants", "plain,tls,tls-shared,client-tls,peer-tls", "comma-separated variants to run (see -list)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; every variant runs once per round")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "puts before the measured phase")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "measured put phase")
	flag.DurationVar(&o.getDuration, "get-duration", 5*time.Second, "measured linearizable get phase (0 skips it)")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients (goroutines issuing one request at a time)")
	flag.IntVar(&o.conns, "conns", 4, "clientv3 clients the goroutines share (each connects to all three members)")
	flag.IntVar(&o.valueSize, "value-size", 256, "bytes per value")
	flag.IntVar(&o.keys, "keys", 10000, "key space")
	flag.StringVar(&o.out, "out", "/tmp/served-bench", "directory for results.json, profiles and the members' data")
	flag.IntVar(&o.profileRound, "profile-round", 1, "round whose put phase is CPU-profiled (0: none)")
	flag.Int64Var(&o.quota, "quota", 1<<30*40/100, "ETCD_QUOTA_BACKEND_BYTES (the operator's for a 1 GiB volume)")
	flag.Float64Var(&o.rate, "rate", 0, "pace the requests at this many per second in all (0: as fast as the clients go); CPU per request is then compared at equal load")
	flag.Float64Var(&o.maxOthers, "max-others", 0, "repeat a run when other processes took more than this many cores during its put phase (0: keep every run)")
	flag.IntVar(&o.retries, "retries", 4, "repeats of a run with -max-others before the quietest attempt is kept")
	flag.StringVar(&analyze, "analyze", "", "only print the profile breakdown of the profiles in this directory")
	flag.IntVar(&handshakes, "handshakes", 0, "also measure the CPU of this many TLS handshakes with the operator's certificates")
	flag.BoolVar(&list, "list", false, "list the variants and exit")
	flag.StringVar(&o.before, "before", "tests/bench/served/before.json", "each variant's figures in the previous report (none when the file is missing)")
	flag.Parse()
	log.SetFlags(log.Ltime)

	if list {
		for _, v := range allVariants {
			fmt.Printf("%-20s %s\n", v.Name, v.Desc)
		}
		return
	}
	if analyze != "" {
		if err := printed(func(w *strings.Builder) error { return analyzeDir(w, analyze) }); err != nil {
			log.Fatal(err)
		}
		return
	}
	for v := range strings.SplitSeq(variants, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if variantNamed(v) == nil {
			log.Fatalf("unknown variant %q (see -list)", v)
		}
		o.variants = append(o.variants, v)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		log.Fatal(err)
	}
	if handshakes > 0 {
		if err := printed(func(w *strings.Builder) error { return measureHandshakes(w, handshakes) }); err != nil {
			log.Fatal(err)
		}
	}
	if len(o.variants) == 0 {
		return
	}
	if _, err := os.Stat(o.etcdBin); err != nil {
		log.Fatalf("etcd binary: %v (run from the repository root after `make etcd`, or pass -etcd)", err)
	}
	if err := run(context.Background(), o); err != nil {
		log.Fatal(err)
	}
}

// run measures every variant o.rounds times and prints the table.
func run(ctx context.Context, o options) error {
	certs, err := newCertificates(filepath.Join(o.out, "pki"))
	if err != nil {
		return err
	}
	resultsFile := filepath.Join(o.out, "results.json")
	var results []runResult
	for round := 1; round <= o.rounds; round++ {
		order := slices.Clone(o.variants)
		// Rotate the order each round so no variant always runs first (on a cold page cache) or last.
		k := (round - 1) % len(order)
		order = append(order[k:], order[:k]...)
		for _, name := range order {
			v := variantNamed(name)
			log.Printf("round %d: %s", round, name)
			r, err := measureQuietly(ctx, o, certs, *v, round)
			if err != nil {
				log.Printf("  %s, round %d failed: %v", name, round, err)
				continue
			}
			log.Printf("  puts %.0f/s p50 %.2f ms p99 %.2f ms, members %.3f CPU-ms/put, loadgen %.3f CPU-ms/put, machine busy %.0f%%",
				r.Put.PerSecond, r.Put.P50ms, r.Put.P99ms, r.Put.MemberCPUms, r.Put.LoadCPUms, r.Put.MachineBusy*100)
			if r.Get != nil {
				log.Printf("  gets %.0f/s p50 %.2f ms p99 %.2f ms, members %.3f CPU-ms/get",
					r.Get.PerSecond, r.Get.P50ms, r.Get.P99ms, r.Get.MemberCPUms)
			}
			results = append(results, r)
			if err := writeJSON(resultsFile, results); err != nil {
				return err
			}
		}
	}
	before, err := readBefore(o.before)
	if err != nil {
		return err
	}
	// table.md is what `make bench-report` shows; report.md adds the profiles' breakdown.
	var table strings.Builder
	printTable(&table, results, o.variants, before)
	if err := os.WriteFile(filepath.Join(o.out, "table.md"), []byte(table.String()), 0o644); err != nil {
		return err
	}
	report := table.String()
	if o.profileRound > 0 {
		var profiles strings.Builder
		if err := analyzeDir(&profiles, o.out); err != nil {
			return err
		}
		report += "\n" + profiles.String()
	}
	fmt.Print(report)
	return os.WriteFile(filepath.Join(o.out, "report.md"), []byte(report), 0o644)
}

// printed runs f on a buffer and prints what it wrote, also when f fails.
func printed(f func(w *strings.Builder) error) error {
	var w strings.Builder
	err := f(&w)
	fmt.Print(w.String())
	return err
}

// measureQuietly is measure, repeated while other processes took more than o.maxOthers cores during the
// put phase; it keeps the quietest attempt.
func measureQuietly(ctx context.Context, o options, certs *certificates, v variant, round int) (runResult, error) {
	var best runResult
	found := false
	for attempt := 0; attempt <= o.retries; attempt++ {
		if o.maxOthers > 0 {
			waitQuiet(o.maxOthers, 3*time.Minute)
		}
		r, err := measure(ctx, o, certs, v, round)
		if err != nil {
			return r, err
		}
		others := r.Put.OtherCPUs / r.Put.Seconds
		if !found || others < best.Put.OtherCPUs/best.Put.Seconds {
			best, found = r, true
			// This attempt's profiles replace an earlier one's (a later, quieter attempt replaces these).
			if err := keepProfiles(o, r.Profiles); err != nil {
				return r, err
			}
		}
		if o.maxOthers <= 0 || others <= o.maxOthers {
			break
		}
		log.Printf("  others took %.2f cores (puts %.0f/s): again", others, r.Put.PerSecond)
	}
	return best, nil
}

// waitQuiet waits, at most timeout, until the machine's busy cores over two seconds are below limit.
func waitQuiet(limit float64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b0, t0 := machineCPU()
		time.Sleep(2 * time.Second)
		b1, t1 := machineCPU()
		if float64(b1-b0)/float64(t1-t0)*float64(runtime.NumCPU()) <= limit {
			return
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
