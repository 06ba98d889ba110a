package prometheus

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// TestEtcdServesTheMetricsReferenced starts a real three-member etcd (the version make etcd builds) and
// checks that every etcd metric the alerting rules and the dashboard select is one it exports. Histogram
// buckets and peer round trips appear once etcd has observed something, so it polls until all are there.
func TestEtcdServesTheMetricsReferenced(t *testing.T) {
	var referenced []string
	add := func(expr string) {
		for _, m := range metricNames(expr) {
			if strings.HasPrefix(m, "etcd_") && !strings.HasPrefix(m, "etcd_operator_") && !slices.Contains(referenced, m) {
				referenced = append(referenced, m)
			}
		}
	}
	for _, r := range loadRules(t) {
		add(r.Expr)
	}
	for _, p := range graphPanels(loadDashboard(t).Panels) {
		for _, target := range p.Targets {
			add(target.Expr)
		}
	}
	if len(referenced) == 0 {
		t.Fatal("neither the rules nor the dashboard select an etcd metric")
	}

	c := etcdtest.StartStatic(t, "metrics", 3, nil)
	var missing []string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		served, err := exportedNames(c.ClientURL(0) + "/metrics")
		if err == nil {
			missing = missing[:0]
			for _, m := range referenced {
				if !served[m] {
					missing = append(missing, m)
				}
			}
			if len(missing) == 0 {
				t.Logf("etcd exports all %d etcd metrics referenced: %q", len(referenced), referenced)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd does not export %q (last error: %v)", missing, err)
		}
	}
}

// exportedNames returns the metric names of a Prometheus text exposition, histogram series (_bucket, _sum,
// _count) included as they are named.
func exportedNames(url string) (map[string]bool, error) {
	resp, err := http.Get(url) //nolint:gosec // a local test server
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, sc.Err()
}
