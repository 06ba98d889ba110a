package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/seedops/etcd-operator/tests/bench/internal/load"
)

// earlier are a variant's figures in the previous report (tests/bench/served/before.json): ratios to plain
// of saturated writes and linearizable reads, and what they were measured as.
type earlier struct {
	PutRatio float64 `json:"putRatio"`
	GetRatio float64 `json:"getRatio"`
	Measured string  `json:"measured"`
}

// readBefore reads the previous report's figures by variant; a missing file is no figures.
func readBefore(path string) (map[string]earlier, error) {
	out := map[string]earlier{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// printTable prints, per variant, each round's figures and the medians, with the ratio to plain taken
// within each round, beside the previous report's ratio.
func printTable(w *strings.Builder, results []runResult, order []string, before map[string]earlier) {
	prev := func(v string, get bool) string {
		b, ok := before[v]
		switch {
		case !ok:
			return "—"
		case get && b.GetRatio > 0:
			return fmt.Sprintf("%.2f", b.GetRatio)
		case !get && b.PutRatio > 0:
			return fmt.Sprintf("%.2f", b.PutRatio)
		}
		return "—"
	}
	byKey := map[string]runResult{}
	rounds := 0
	for _, r := range results {
		byKey[fmt.Sprintf("%s/%d", r.Variant, r.Round)] = r
		rounds = max(rounds, r.Round)
	}
	ratio := func(r runResult, get bool) (float64, bool) {
		base, ok := byKey[fmt.Sprintf("plain/%d", r.Round)]
		if !ok {
			return 0, false
		}
		a, b := r.Put, base.Put
		if get {
			a, b = r.Get, base.Get
		}
		if a == nil || b == nil || b.PerSecond == 0 {
			return 0, false
		}
		return a.PerSecond / b.PerSecond, true
	}

	versions, split := map[string]bool{}, map[string]bool{}
	for _, r := range results {
		versions[r.EtcdVersion] = true
		if r.SplitHTTP {
			split[r.Variant] = true
		}
	}
	fmt.Fprintf(w, "\netcd %s. HTTP endpoints of the client side on a port of their own (--listen-client-http-urls) in: %s.\n",
		strings.Join(slices.Sorted(maps.Keys(versions)), ", "), orNone(slices.Sorted(maps.Keys(split))))
	if len(results) > 0 && results[0].Put != nil && results[0].Put.Rate > 0 {
		fmt.Fprintf(w, "\nRequests paced at %.0f/s in all.\n", results[0].Put.Rate)
	}
	fmt.Fprintln(w, "\n### Puts")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variant | writes/s per round | median writes/s | ratio to plain (per round) | previous report's ratio | p50 ms | p99 ms | members CPU-ms/write | leader CPU-ms/write | loadgen CPU-ms/write | members' syscalls/write | machine busy (others' CPU-s) | conns opened during phase |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, v := range order {
		var per, ratios []string
		var ws, rat, p50, p99, mcpu, lcpu, gcpu, busy, other, sys []float64
		newConns := map[string]int{}
		for round := 1; round <= rounds; round++ {
			r, ok := byKey[fmt.Sprintf("%s/%d", v, round)]
			if !ok || r.Put == nil {
				continue
			}
			per = append(per, fmt.Sprintf("%.0f", r.Put.PerSecond))
			ws = append(ws, r.Put.PerSecond)
			if x, ok := ratio(r, false); ok {
				rat = append(rat, x)
				ratios = append(ratios, fmt.Sprintf("%.2f", x))
			}
			p50 = append(p50, r.Put.P50ms)
			p99 = append(p99, r.Put.P99ms)
			mcpu = append(mcpu, r.Put.MemberCPUms)
			lcpu = append(lcpu, r.Put.LeaderCPUms)
			gcpu = append(gcpu, r.Put.LoadCPUms)
			busy = append(busy, r.Put.MachineBusy*100)
			other = append(other, r.Put.OtherCPUs)
			sys = append(sys, r.Put.MemberSyscalls)
			for k, n := range r.Put.NewConns {
				newConns[k] += n
			}
		}
		if len(ws) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s (median %.2f) | %s | %.2f | %.2f | %.3f | %.3f | %.3f | %.1f | %.0f%% (%.1f) | %s |\n",
			v, strings.Join(per, ", "), median(ws), strings.Join(ratios, ", "), median(rat), prev(v, false), median(p50), median(p99),
			median(mcpu), median(lcpu), median(gcpu), median(sys), median(busy), median(other), conns(newConns))
	}

	fmt.Fprintln(w, "\n### Linearizable gets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| variant | reads/s per round | median reads/s | ratio to plain (per round) | previous report's ratio | p50 ms | p99 ms | members CPU-ms/read | loadgen CPU-ms/read |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, v := range order {
		var per, ratios []string
		var rs, rat, p50, p99, mcpu, gcpu []float64
		for round := 1; round <= rounds; round++ {
			r, ok := byKey[fmt.Sprintf("%s/%d", v, round)]
			if !ok || r.Get == nil {
				continue
			}
			per = append(per, fmt.Sprintf("%.0f", r.Get.PerSecond))
			rs = append(rs, r.Get.PerSecond)
			if x, ok := ratio(r, true); ok {
				rat = append(rat, x)
				ratios = append(ratios, fmt.Sprintf("%.2f", x))
			}
			p50 = append(p50, r.Get.P50ms)
			p99 = append(p99, r.Get.P99ms)
			mcpu = append(mcpu, r.Get.MemberCPUms)
			gcpu = append(gcpu, r.Get.LoadCPUms)
		}
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s (median %.2f) | %s | %.2f | %.2f | %.3f | %.3f |\n", v, strings.Join(per, ", "),
			median(rs), strings.Join(ratios, ", "), median(rat), prev(v, true), median(p50), median(p99), median(mcpu), median(gcpu))
	}

	var prevLines []string
	for _, v := range order {
		if b, ok := before[v]; ok && b.Measured != "" {
			prevLines = append(prevLines, fmt.Sprintf("- %s: %s", v, b.Measured))
		}
	}
	if len(prevLines) > 0 {
		fmt.Fprintf(w, "\nPrevious report's figures:\n\n%s\n", strings.Join(prevLines, "\n"))
	}

	fmt.Fprintln(w, "\n### Negotiated TLS")
	fmt.Fprintln(w)
	seen := map[string]bool{}
	for _, r := range results {
		for _, side := range []struct{ name, desc string }{{"client port", r.ClientTLS}, {"peer port", r.PeerTLS}} {
			line := fmt.Sprintf("- %s, %s: %s", r.Variant, side.name, side.desc)
			if side.desc != "" && !seen[line] {
				seen[line] = true
				fmt.Fprintln(w, line)
			}
		}
	}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func conns(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func median(xs []float64) float64 { return load.Median(xs) }
