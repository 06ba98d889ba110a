package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// nodeFixture writes synthetic samples of the scenarios the report reads under dir, every duration times
// f: a directory at f=1.1 is 10 % slower than one at f=1.
func nodeFixture(t *testing.T, dir string, f float64, servedLoad bool) {
	t.Helper()
	var avail []sample
	for _, n := range []float64{1, 3, 5} {
		for run := range 3 {
			op, bare := (10*n+float64(run))*f, 9*n
			s := sample{"members": n, "operator": op, "bare": bare, "ratio": op / bare, "load1": 1}
			if n == 3 {
				s["operatorNoTLS"] = 25 * f
			}
			avail = append(avail, s)
		}
	}
	up, down := 28*f, 10*f
	scenarios := map[string][]sample{
		"available": avail,
		"scale": {{"podStart": 12, "up": up, "upStep": up / 2, "down": down, "downStep": down / 2, "upRatio": up / 2 / 12,
			"downRatio": down / 2 / 12, "upNoTLS": 26 * f, "load1": 1}},
		"heal": {{"barePodRestart": 8, "podStart": 12, "podDeleted": 20 * f, "podAndPVCDeleted": 30 * f,
			"podAndPVCDeletedRatio": 30 * f / 12, "bareVolumeLoss": 25, "podAndPVCDeletedBareRatio": 30 * f / 25, "load1": 1}},
		"upgrade": {{"barePodRestart": 9, "total": 45 * f, "perMember": 15 * f, "ratio": 15 * f / 9, "load1": 1}},
	}
	if servedLoad {
		scenarios["servedload"] = []sample{{"target": 0, "mode": 0, "workload": 0, "perSecond": 3000 / f, "p50ms": 4, "p99ms": 15 * f,
			"maxShare": 0.5, "leaderShare": 0.3, "load1": 1}}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, ss := range scenarios {
		b, err := json.Marshal(ss)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodeSections(t *testing.T) {
	const threeTitle = "## On three local nodes (hack/node NODES=3: three zones, node-local volumes, etcd 3.5.35)"
	oneTargets := []string{"AVAILABLE 1 <= 1.25X BARE", "AVAILABLE 3 (TLS) <= 1.05X BARE", "AVAILABLE 5 <= 1.25X BARE",
		"SCALE 3-5 <= 1.3X ONE POD START", "SCALE DOWN STEP <= 1.5X POD", "HEAL POD < 60 S", "HEAL POD+PVC <= 1.2X ONE POD START"}
	for _, tc := range []struct {
		name string
		// which directories hold samples, and which of them the served load.
		one, three, oneServed, threeServed bool
		want, wantNot                      []string
		targets                            []string
	}{{
		name: "one node only",
		one:  true, oneServed: true,
		want: []string{"## " + oneNodeTitle, "The baseline is the practical limit", "| 3 | 31.0 (30.0–32.0, n=3) | 27.0 (27.0–27.0, n=3) |",
			"### Served load from a pod on the node, 3 members", "| leader share | previous report | load |"},
		wantNot: []string{"three local nodes", "Against one node", "/ one node"},
		targets: oneTargets,
	}, {
		name: "three nodes beside one",
		one:  true, three: true, oneServed: true, threeServed: true,
		want: []string{"## " + oneNodeTitle, threeTitle,
			"Against one node (median here / median on one node): 1 member: operator 1.10×, bare 1.00×; 3 members: operator 1.10×, bare 1.00×; " +
				"5 members: operator 1.10×, bare 1.00×; 3 members with TLS off 1.10×.",
			"Against one node (median here / median on one node): 3→5 1.10×; 5→3 1.10×; one pod start 1.00×; 3→5 with TLS off 1.10×.",
			"Against one node (median here / median on one node): member pod deleted 1.10×; pod and volume claim deleted 1.10×; bare pod restart 1.00×.",
			"Against one node (median here / median on one node): total 1.10×; bare pod restart 1.00×.",
			"### Served load from a pod on one of the nodes, 3 members",
			"| req/s / one node | p99 / one node | previous report | load |", "| 0.91× | 1.10× |"},
		targets: oneTargets,
	}, {
		name: "served load on three nodes only",
		one:  true, three: true, threeServed: true,
		want:    []string{threeTitle, "### Served load from a pod on one of the nodes", "| leader share | previous report | load |"},
		wantNot: []string{"### Served load from a pod on the node,", "/ one node |"},
		targets: oneTargets,
	}, {
		name:  "three nodes only",
		three: true,
		want:  []string{"## " + oneNodeTitle, "Time to Available: not measured in this report.", threeTitle, "| 3 | 34.1 (33.0–35.2, n=3) |"},
		// Nothing to compare with, and the targets come from one node alone.
		wantNot: []string{"Against one node"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := t.TempDir()
			if tc.one {
				nodeFixture(t, filepath.Join(in, "node"), 1, tc.oneServed)
			}
			if tc.three {
				nodeFixture(t, filepath.Join(in, "node-3"), 1.1, tc.threeServed)
			}
			var out strings.Builder
			targets := nodeSections(&out, in, nil)
			md := out.String()
			for _, s := range tc.want {
				if !strings.Contains(md, s) {
					t.Errorf("missing %q in:\n%s", s, md)
				}
			}
			for _, s := range tc.wantNot {
				if strings.Contains(md, s) {
					t.Errorf("unexpected %q in:\n%s", s, md)
				}
			}
			if tc.three && strings.Index(md, threeTitle) < strings.Index(md, "## "+oneNodeTitle) {
				t.Errorf("the three-node section comes before the one-node section")
			}
			var names []string
			for _, tg := range targets {
				names = append(names, tg.name)
			}
			if !slices.Equal(names, tc.targets) {
				t.Errorf("targets %q, want %q", names, tc.targets)
			}
		})
	}
}

// The one-node section reads as it did before other node counts were reported: its heading, its baseline
// paragraph, and its tables with no comparison.
func TestNodeSectionOneNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	nodeFixture(t, dir, 1, false)
	var out strings.Builder
	samples, _ := nodeSection(&out, dir, oneNodeTitle, nil, nil)
	got := out.String()
	want := "## On the local node (hack/node: 1 node, local-path volumes, etcd 3.5.35)\n\n" +
		"The baseline is the practical limit: the same ConfigMap, Services and StatefulSet the operator would\n" +
		"create (its own builders: same image, probes, 1 GiB volumes, Parallel start, static initial cluster),\n" +
		"applied by hand without the operator. \"Available\": the cluster's status Available and Running for the\n" +
		"current generation with every member pod ready and etcd's member list, as status reports it, exactly the\n" +
		"spec's members, each a healthy voter; the baseline: every member pod Ready (etcd `/health`).\n\n" +
		"### Time to Available (s)\n\n| members | operator | bare StatefulSet | ratio | load (1 min) |\n|---|---|---|---|---|\n" +
		"| 1 | 11.0 (10.0–12.0, n=3) | 9.0 (9.0–9.0, n=3) | 1.22× (1.11–1.33) | 1.0, 1.0, 1.0 |\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got:\n%s\nwant it to begin with:\n%s", got, want)
	}
	if len(samples) != 4 {
		t.Errorf("read %d scenarios, want 4 (available, scale, heal, upgrade)", len(samples))
	}
}

func TestNodesTitle(t *testing.T) {
	if got, want := nodesTitle(3), "On three local nodes (hack/node NODES=3: three zones, node-local volumes, etcd 3.5.35)"; got != want {
		t.Errorf("nodesTitle(3) = %q, want %q", got, want)
	}
}
