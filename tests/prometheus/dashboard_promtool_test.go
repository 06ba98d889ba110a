//go:build promtool

package prometheus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// grafanaVariables are replaced by what Grafana substitutes at query time, so that promtool parses the
// queries Prometheus receives.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$cluster", ".*")

// TestDashboardQueriesParse hands every query of the dashboard to promtool (PROMTOOL, set by make
// test-alerts) as a recording rule: promtool parses each with Prometheus's own PromQL parser and type checks.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		t.Fatal("PROMTOOL must name a promtool binary (make test-alerts sets it)")
	}
	type recording struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []recording
	for _, p := range graphPanels(loadDashboard(t).Panels) {
		for _, target := range p.Targets {
			rules = append(rules, recording{Record: fmt.Sprintf("dashboard:panel:%d", len(rules)), Expr: grafanaVariables.Replace(target.Expr)})
		}
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules of the dashboard's queries: %v\n%s\n%s", err, out, data)
	}
	t.Logf("%d queries parsed: %s", len(rules), strings.TrimSpace(string(out)))
}
