package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// sample is one recorded sample of tests/bench/node: figure name to value.
type sample = map[string]float64

// nodeSamples holds one directory's samples by scenario (its file name without .json); a scenario whose file
// is missing or unreadable has no entry.
type nodeSamples map[string][]sample

// The scenarios tests/bench/node records, one file each.
var nodeScenarios = []string{"available", "scale", "heal", "upgrade", "quorumloss", "nospace", "defrag", "servedload"}

const oneNodeTitle = "On the local node (hack/node: 1 node, local-path volumes, etcd 3.5.35)"

// nodesTitle is the heading of the section of a local cluster of n nodes (hack/node NODES=n, 2 to 9).
func nodesTitle(n int) string {
	word := strconv.Itoa(n)
	if n >= 2 && n <= 9 {
		word = []string{"two", "three", "four", "five", "six", "seven", "eight", "nine"}[n-2]
	}
	return fmt.Sprintf("On %s local nodes (hack/node NODES=%d: %s zones, node-local volumes, etcd 3.5.35)", word, n, word)
}

func readNodeSamples(dir string) nodeSamples {
	s := nodeSamples{}
	for _, name := range nodeScenarios {
		var ss []sample
		if readJSON(filepath.Join(dir, name+".json"), &ss) {
			s[name] = ss
		}
	}
	return s
}

// col summarizes one figure over the samples that keep accepts (all when nil) and have it.
func col(ss []sample, key string, keep func(sample) bool) stat {
	var xs []float64
	for _, s := range ss {
		if v, ok := s[key]; ok && (keep == nil || keep(s)) {
			xs = append(xs, v)
		}
	}
	return summarize(xs)
}

// loads lists the samples' 1-minute load averages.
func loads(ss []sample) string {
	var l []string
	for _, s := range ss {
		l = append(l, strconv.FormatFloat(s["load1"], 'f', 1, 64))
	}
	return strings.Join(l, ", ")
}

// nodeSections writes the section of the one-node scenarios (in/node), then one for each larger local cluster
// measured (`make bench-node` on hack/node NODES=<n> writes to in/node-<n>), and returns the targets: the one
// node's alone, so they keep comparing with the previous report's.
func nodeSections(out io.Writer, in string, befores map[string]earlier) []target {
	one, targets := nodeSection(out, filepath.Join(in, "node"), oneNodeTitle, nil, befores)
	for n := 2; n <= 9; n++ {
		if dir := filepath.Join(in, fmt.Sprintf("node-%d", n)); len(readNodeSamples(dir)) > 0 {
			nodeSection(out, dir, nodesTitle(n), one, befores)
		}
	}
	return targets
}

// nodeSection writes the section of the node scenarios recorded in dir under the heading title, and returns
// the samples read and the targets they measure. one is the one-node section's samples, nil when this is
// that section: other sections add, under each table, their medians over the one-node medians, so what the
// number of nodes changes reads off directly. befores gives the served load's previous figures.
func nodeSection(out io.Writer, dir, title string, one nodeSamples, befores map[string]earlier) (nodeSamples, []target) {
	var targets []target
	w := func(format string, a ...any) { _, _ = fmt.Fprintf(out, format, a...) }
	s := readNodeSamples(dir)
	avail, haveAvail := s["available"]
	scale, haveScale := s["scale"]
	heal, haveHeal := s["heal"]
	upgrade, haveUpgrade := s["upgrade"]
	quorumLoss, haveQuorumLoss := s["quorumloss"]
	noSpace, haveNoSpace := s["nospace"]
	defrag, haveDefrag := s["defrag"]
	servedLoad, haveServedLoad := s["servedload"]
	// vsOne is label with this section's median of key over the one-node section's ("" unless both have it).
	vsOne := func(label, scenario, key string, keep func(sample) bool) string {
		if one == nil {
			return ""
		}
		this, base := col(s[scenario], key, keep), col(one[scenario], key, keep)
		if this.n == 0 || base.n == 0 || base.med == 0 {
			return ""
		}
		return fmt.Sprintf("%s %.2f×", label, this.med/base.med)
	}
	againstOne := func(parts ...string) {
		if known := knownParts("; ", parts...); known != "" {
			w("Against one node (median here / median on one node): %s.\n\n", known)
		}
	}

	w("## %s\n\n", title)
	if one == nil {
		w("The baseline is the practical limit: the same ConfigMap, Services and StatefulSet the operator would\n")
		w("create (its own builders: same image, probes, 1 GiB volumes, Parallel start, static initial cluster),\n")
		w("applied by hand without the operator. \"Available\": the cluster's status Available and Running for the\n")
		w("current generation with every member pod ready and etcd's member list, as status reports it, exactly the\n")
		w("spec's members, each a healthy voter; the baseline: every member pod Ready (etcd `/health`).\n\n")
	} else {
		w("The scenarios and baselines of the one-node section, on a cluster whose every node is a zone of its own\n")
		w("(hack/node/nodes.sh): members, the operator's and the bare StatefulSet's alike (same builders), spread over the\n")
		w("zones, each with its volume on its own node. Where the one-node section has a figure too, a line under the\n")
		w("table gives the median here over the median there.\n\n")
	}
	if haveAvail {
		w("### Time to Available (s)\n\n| members | operator | bare StatefulSet | ratio | load (1 min) |\n|---|---|---|---|---|\n")
		var vs []string
		for _, n := range []float64{1, 3, 5} {
			is := func(s sample) bool { return s["members"] == n }
			var sub []sample
			for _, s := range avail {
				if is(s) {
					sub = append(sub, s)
				}
			}
			r := col(avail, "ratio", is)
			w("| %.0f | %s | %s | %s | %s |\n", n, col(avail, "operator", is), col(avail, "bare", is), r.ratio(), loads(sub))
			if both := knownParts(", ", vsOne("operator", "available", "operator", is), vsOne("bare", "available", "bare", is)); both != "" {
				members := fmt.Sprintf("%.0f members", n)
				if n == 1 {
					members = "1 member"
				}
				vs = append(vs, members+": "+both)
			}
			switch {
			case r.n > 0 && n == 3:
				// The goal for the common size is tight: the operator's own work (certificates, status,
				// membership checks) may add 5 % to what the pods themselves take.
				targets = append(targets, target{name: "AVAILABLE 3 (TLS) <= 1.05X BARE", measured: fmt.Sprintf("%.2f×", r.med),
					value: r.med, limit: 1.05, ok: r.med <= 1.05, known: true})
			case r.n > 0:
				targets = append(targets, target{name: fmt.Sprintf("AVAILABLE %.0f <= 1.25X BARE", n), measured: fmt.Sprintf("%.2f×", r.med),
					value: r.med, limit: 1.25, ok: r.med <= 1.25, known: true})
			}
		}
		if plain := col(avail, "operatorNoTLS", nil); plain.n > 0 {
			w("\n3 members with TLS off (same runs): %s to Available.\n", plain)
		}
		w("\n")
		againstOne(append(vs, vsOne("3 members with TLS off", "available", "operatorNoTLS", nil))...)
	} else {
		w("Time to Available: not measured in this report.\n\n")
	}
	if haveScale {
		for _, s := range scale {
			s["upTotalRatio"] = s["up"] / s["podStart"]
		}
		up, down, total := col(scale, "upRatio", nil), col(scale, "downRatio", nil), col(scale, "upTotalRatio", nil)
		w("### Scale 3→5 and 5→3 (s)\n\n| step | operator, whole step | per member | one pod start (bare 1-member StatefulSet, new volume) | whole step / one pod start | per member / one pod start | load |\n|---|---|---|---|---|---|---|\n")
		w("| 3→5 | %s | %s | %s | %s | %s | %s |\n", col(scale, "up", nil), col(scale, "upStep", nil), col(scale, "podStart", nil), total.ratio(), up.ratio(), loads(scale))
		w("| 5→3 | %s | %s | %s | — | %s | %s |\n\n", col(scale, "down", nil), col(scale, "downStep", nil), col(scale, "podStart", nil), down.ratio(), loads(scale))
		if plain := col(scale, "upNoTLS", nil); plain.n > 0 {
			w("3→5 of a cluster with TLS off (same runs): %s.\n\n", plain)
		}
		next := col(scale, "upNextRatio", nil)
		if next.n > 0 {
			w("3→5 on etcd 3.6, whose members accept two learners at once (same runs, TLS on): %s, %s one pod start.\n\n", col(scale, "upNext", nil), next.ratio())
			targets = append(targets, target{name: "SCALE 3-5 ON ETCD 3.6 <= 1.3X ONE POD START", measured: fmt.Sprintf("%.2f×", next.med), value: next.med, limit: 1.3, ok: next.med <= 1.3, known: true})
		}
		againstOne(vsOne("3→5", "scale", "up", nil), vsOne("5→3", "scale", "down", nil), vsOne("one pod start", "scale", "podStart", nil),
			vsOne("3→5 with TLS off", "scale", "upNoTLS", nil), vsOne("3→5 on etcd 3.6", "scale", "upNext", nil))
		targets = append(targets,
			target{name: "SCALE 3-5 <= 1.3X ONE POD START", measured: fmt.Sprintf("%.2f×", total.med), value: total.med, limit: 1.3, ok: total.med <= 1.3, known: true},
			target{name: "SCALE DOWN STEP <= 1.5X POD", measured: fmt.Sprintf("%.2f×", down.med), value: down.med, limit: 1.5, ok: down.med <= 1.5, known: true})
	}
	if haveHeal {
		p, v := col(heal, "podDeleted", nil), col(heal, "podAndPVCDeleted", nil)
		w("### Heal, 3 members: time until Available again with the lost member replaced (s)\n\n| loss | operator | bare pod restart (same run) | load |\n|---|---|---|---|\n")
		w("| member pod deleted | %s | %s | %s |\n", p, col(heal, "barePodRestart", nil), loads(heal))
		w("| member pod and volume claim deleted | %s | — | %s |\n\n", v, loads(heal))
		vr := col(heal, "podAndPVCDeletedRatio", nil)
		if vr.n > 0 {
			w("A lost volume means a new member on a new volume: one pod start (bare 1-member StatefulSet, new volume) %s in the same runs; heal / pod start %s.\n",
				col(heal, "podStart", nil), vr.ratio())
			if br := col(heal, "podAndPVCDeletedBareRatio", nil); br.n > 0 {
				w("The physical floor is longer than one pod start: the StatefulSet makes the successor pod only once the old one is gone. A bare\n")
				w("1-member StatefulSet whose claim and pod are deleted the same way has its successor Ready after %s; heal / that floor %s.\n",
					col(heal, "bareVolumeLoss", nil), br.ratio())
			}
			w("\n")
		}
		againstOne(vsOne("member pod deleted", "heal", "podDeleted", nil), vsOne("pod and volume claim deleted", "heal", "podAndPVCDeleted", nil),
			vsOne("bare pod restart", "heal", "barePodRestart", nil))
		targets = append(targets,
			target{name: "HEAL POD < 60 S", measured: fmt.Sprintf("%.1f s", p.med), value: p.med, limit: 60, ok: p.med < 60, known: true},
			target{name: "HEAL POD+PVC <= 1.2X ONE POD START", measured: fmt.Sprintf("%.2f× (%.1f s)", vr.med, v.med), value: vr.med, limit: 1.2, ok: vr.med <= 1.2, known: vr.n > 0})
	}
	if haveQuorumLoss {
		w("### Quorum loss, 3 members: two members' pods and claims deleted at once, `recovery.after: 30s` (s)\n\n")
		w("| recovery.quorumLoss | until Available again | of which after the window | bare pod restart (same run) |\n|---|---|---|---|\n")
		var vs []string
		for _, strategy := range []struct {
			name       string
			fromBackup float64
		}{{"FromSurvivor", 0}, {"FromBackup (every member restores an on-demand backup)", 1}} {
			keep := func(s sample) bool { return s["fromBackup"] == strategy.fromBackup }
			w("| %s | %s | %s | %s |\n", strategy.name, col(quorumLoss, "available", keep), col(quorumLoss, "afterWindow", keep), col(quorumLoss, "barePodRestart", keep))
			vs = append(vs, vsOne(strings.Fields(strategy.name)[0], "quorumloss", "available", keep))
		}
		w("\nLoad: %s\n\n", loads(quorumLoss))
		againstOne(vs...)
	}
	if haveNoSpace {
		w("### Space quota reached, 3 members, 64Mi volumes (25.6 MiB quota) (s)\n\n")
		w("| NOSPACE raised until a write succeeds again (compaction, a defragmentation per member, alarm disarmed) | load |\n|---|---|\n")
		w("| %s | %s |\n\n", col(noSpace, "writable", nil), loads(noSpace))
		againstOne(vsOne("until writable", "nospace", "writable", nil))
	}
	if haveDefrag {
		w("### Automatic defragmentation, 3 members, under a writer\n\n")
		w("Each member's file holds %s MiB of data and as much in free pages; counted from the compaction that frees them.\n\n",
			col(defrag, "dataMiB", nil))
		w("| file (MiB) | first member shrunk (s) | all shrunk (s) | per further member (s) | writer's longest wait (s) | writes failed | writes acknowledged | load |\n|---|---|---|---|---|---|---|---|\n")
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n\n", col(defrag, "fileMiB", nil), col(defrag, "firstShrunk", nil), col(defrag, "allShrunk", nil),
			col(defrag, "perMember", nil), col(defrag, "writerLongestWait", nil), col(defrag, "writerFailed", nil), col(defrag, "writerAcked", nil), loads(defrag))
		againstOne(vsOne("all shrunk", "defrag", "allShrunk", nil), vsOne("writer's longest wait", "defrag", "writerLongestWait", nil))
	}
	if haveUpgrade {
		r := col(upgrade, "ratio", nil)
		w("### Rolling upgrade 3.5.34 → 3.5.35, 3 members (s)\n\n| total | per member | bare pod restart (same run) | ratio | load |\n|---|---|---|---|---|\n")
		w("| %s | %s | %s | %s | %s |\n\n", col(upgrade, "total", nil), col(upgrade, "perMember", nil), col(upgrade, "barePodRestart", nil), r.ratio(), loads(upgrade))
		againstOne(vsOne("total", "upgrade", "total", nil), vsOne("bare pod restart", "upgrade", "barePodRestart", nil))
	}

	if haveServedLoad {
		// The codes of tests/bench/node's servedload samples ("target", "mode", "workload").
		targetNames := []string{"bare StatefulSet, no TLS, own Service", "operator, TLS off", "operator, TLS"}
		beforeNames := []string{"bare", "operator-plain", "operator-tls"}
		modes := []string{"service", "members"}
		workloads := []string{"put", "get-linearizable", "get-serializable", "txn"}
		where := "on the node"
		if one != nil {
			where = "on one of the nodes"
		}
		// Beside one node's served load, two more columns: req/s and p99 here over there.
		_, vsOneNode := one["servedload"]
		w("### Served load from a pod %s, 3 members (`make bench-node BENCH_NODE_RUN=ServedLoad`)\n\n", where)
		w("A load generator in a pod (tests/bench/loadgen: 16 clients over 4 clientv3 clients, 256-byte values, 10,000 keys)\n")
		w("drives each cluster through its client Service (\"service\") or with every member's stable DNS name as an endpoint\n")
		w("(\"members\"). Ratios are to the bare StatefulSet without TLS, with a client Service written as etcd's documentation\n")
		w("writes one, in the same round. \"max share\" is the largest share of the workload's gRPC calls one member served\n")
		w("(the gets' Range calls counted together), \"leader share\" the leader's: with a Service, how its connections spread.\n\n")
		if vsOneNode {
			w("| target | endpoints | workload | req/s | p50 ms | p99 ms | req/s / bare | p99 / bare | max share | leader share | req/s / one node | p99 / one node | previous report | load |\n")
			w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		} else {
			w("| target | endpoints | workload | req/s | p50 ms | p99 ms | req/s / bare | p99 / bare | max share | leader share | previous report | load |\n")
			w("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		}
		for tg, tname := range targetNames {
			for m, mode := range modes {
				for wl, wname := range workloads {
					keep := func(s sample) bool {
						return s["target"] == float64(tg) && s["mode"] == float64(m) && s["workload"] == float64(wl)
					}
					var sub []sample
					for _, s := range servedLoad {
						if keep(s) {
							sub = append(sub, s)
						}
					}
					if len(sub) == 0 {
						continue
					}
					ratio := func(k string) string {
						if tg == 0 {
							return "1"
						}
						return col(servedLoad, k, keep).ratio()
					}
					prev := "—"
					if b, ok := befores[fmt.Sprintf("SERVED LOAD %s %s %s", beforeNames[tg], mode, wname)]; ok {
						prev = b.Measured
					}
					vsOneCols := ""
					if vsOneNode {
						oneCol := func(k string) string {
							return timesText(col(servedLoad, k, keep).med, col(one["servedload"], k, keep).med)
						}
						vsOneCols = fmt.Sprintf(" %s | %s |", oneCol("perSecond"), oneCol("p99ms"))
					}
					w("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |%s %s | %s |\n", tname, mode, wname, col(servedLoad, "perSecond", keep),
						col(servedLoad, "p50ms", keep), col(servedLoad, "p99ms", keep), ratio("perSecondRatio"), ratio("p99Ratio"),
						col(servedLoad, "maxShare", keep).med, col(servedLoad, "leaderShare", keep).med, vsOneCols, prev, loads(sub))
				}
			}
		}
		w("\nPrevious figures come from tests/bench/before.json, keyed \"SERVED LOAD <bare|operator-plain|operator-tls> <service|members> <workload>\".\n\n")
	}
	return s, targets
}

// knownParts joins the parts that are not empty.
func knownParts(sep string, parts ...string) string {
	var known []string
	for _, p := range parts {
		if p != "" {
			known = append(known, p)
		}
	}
	return strings.Join(known, sep)
}
