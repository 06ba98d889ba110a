//go:build bench

package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	dir := evidenceDir(scenario, ns)
	saveEvidence(t, dir, ns, "", since)
	t.Logf("%s took %.1f s, %.1f× its baseline of %.1f s: pod logs, events and the operator's log kept in %s",
		scenario, took, took/baseline, baseline, dir)
}

// watchForSlowness saves the same evidence, under the prefix "while-slow-", as soon as a trial has run
// slowFactor times its baseline without finishing: by the end the operator may have replaced a stuck
// member, and the log of the pod that was stuck is gone with it. The returned stop ends the watch (it may
// be called more than once, e.g. also deferred for a trial that fails).
func watchForSlowness(t *testing.T, scenario, ns string, baseline float64, since time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if baseline <= 0 {
			return
		}
		select {
		case <-done:
		case <-time.After(time.Duration(slowFactor * baseline * float64(time.Second))):
			saveEvidence(t, evidenceDir(scenario, ns), ns, "while-slow-", since)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}

func evidenceDir(scenario, ns string) string {
	return filepath.Join(outDir, "evidence", scenario+"-"+ns)
}

// saveEvidence writes the namespace's events and pods, the operator's log since since and every member
// pod's logs (current and previous containers) into dir, each file name prefixed with prefix.
func saveEvidence(t *testing.T, dir, ns, prefix string, since time.Time) {
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
		if err := os.WriteFile(filepath.Join(dir, prefix+file), out, 0o644); err != nil {
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
}

// kubectl is the node's kubectl (make bench-node passes KUBECTL).
func kubectl() string { return framework.Env("KUBECTL", "kubectl") }
