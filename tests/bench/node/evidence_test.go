//go:build bench

package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/tests/framework"
)

// slowFactor: a run this many times slower than its baseline keeps its evidence, because its namespace
// (and with it every pod log and event) is deleted when the trial ends.
const slowFactor = 3.0

// keepEvidenceIfSlow saves, for a trial that took more than slowFactor times its baseline, what explains
// it: every member pod's log (the current and the previous container of each container, init containers
// included), the namespace's events, the pods as the API server shows them, and the operator's log over
// the trial. It goes to $BENCH_OUT/evidence/<scenario>-<namespace>/ and is named in the test log.
func keepEvidenceIfSlow(t *testing.T, scenario, ns string, took, baseline float64, since time.Time) {
	t.Helper()
	if baseline <= 0 || took <= slowFactor*baseline {
		return
	}
	dir := filepath.Join(outDir, "evidence", scenario+"-"+ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("evidence: %v", err)
		return
	}
	window := time.Since(since).Round(time.Second) + time.Minute
	save := func(file string, args ...string) {
		out, err := exec.Command(kubectl(), args...).CombinedOutput()
		if err != nil {
			out = append(out, fmt.Sprintf("\n(kubectl %s: %v)\n", strings.Join(args, " "), err)...)
		}
		if err := os.WriteFile(filepath.Join(dir, file), out, 0o644); err != nil {
			t.Logf("evidence: %v", err)
		}
	}
	save("events.txt", "get", "events", "-n", ns, "--sort-by=.lastTimestamp", "-o", "wide")
	save("pods.yaml", "get", "pods", "-n", ns, "-o", "yaml")
	save("operator.log", "logs", "-n", operatorNS, "deployment/"+operatorName, "--since="+window.String(), "--timestamps")
	pods, err := memberPods(ns, "op")
	if err != nil {
		t.Logf("evidence: %v", err)
	}
	for _, p := range pods {
		save(p.Name+".log", "logs", "-n", ns, p.Name, "--all-containers", "--prefix", "--timestamps")
		save(p.Name+".previous.log", "logs", "-n", ns, p.Name, "--all-containers", "--prefix", "--timestamps", "--previous")
	}
	t.Logf("%s took %.1f s, %.1f× its baseline of %.1f s: pod logs, events and the operator's log kept in %s",
		scenario, took, took/baseline, baseline, dir)
}

// kubectl is the node's kubectl (make bench-node passes KUBECTL).
func kubectl() string { return framework.Env("KUBECTL", "kubectl") }
