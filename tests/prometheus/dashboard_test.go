package prometheus

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seedops/etcd-operator/controllers"
)

var (
	dashboardFile          = filepath.Join(root, "config", "grafana", "etcd-operator-dashboard.json")
	dashboardKustomization = filepath.Join(root, "config", "grafana", "kustomization.yaml")

	// labelValues is the Grafana variable query label_values(<series selector>, <label>).
	labelValues = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// graphPanels returns every panel that draws something, rows' children included.
func graphPanels(panels []panel) []panel {
	var out []panel
	for _, p := range panels {
		if p.Type == "row" {
			out = append(out, graphPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestDashboardQueriesExportedMetrics fails when a panel or a variable queries a metric the operator does not
// export, or a controller-runtime metric of a controller it does not run; and when a metric the operator
// exports has no panel.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: the dashboard needs a uid (stable links) and a title", dashboardFile)
	}
	shown := map[string]bool{}
	panels := graphPanels(d.Panels)
	if len(panels) == 0 {
		t.Fatalf("%s: no panels", dashboardFile)
	}
	for _, p := range panels {
		where := "panel " + p.Title
		if p.Title == "" || p.Description == "" {
			t.Errorf("%s: every panel needs a title and a description (a %s panel has %q, %q)", dashboardFile, p.Type, p.Title, p.Description)
		}
		// One data source variable, so the dashboard works with whatever Prometheus it is imported into.
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: %s: datasource must be the ${datasource} variable, is %+v", dashboardFile, where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: %s has no query", dashboardFile, where)
		}
		for _, target := range p.Targets {
			checkExpr(t, where, target.Expr)
			for _, m := range metricNames(target.Expr) {
				shown[m] = true
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		query, _ := v.Query.(map[string]any)["query"].(string)
		match := labelValues.FindStringSubmatch(query)
		if match == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(<selector>, <label>)", dashboardFile, v.Name, query)
			continue
		}
		checkExpr(t, "variable "+v.Name, match[1])
	}
	for _, m := range controllers.MetricNames() {
		if !shown[m] {
			t.Errorf("%s: no panel shows %s", dashboardFile, m)
		}
	}
}

// TestDashboardIsShipped checks the ConfigMap that kustomize builds for Grafana's sidecar holds this file.
func TestDashboardIsShipped(t *testing.T) {
	data, err := os.ReadFile(dashboardKustomization)
	if err != nil {
		t.Fatal(err)
	}
	k := string(data)
	if !strings.Contains(k, "- "+filepath.Base(dashboardFile)) || !strings.Contains(k, `grafana_dashboard: "1"`) {
		t.Errorf("%s must generate a ConfigMap labelled grafana_dashboard: \"1\" from %s", dashboardKustomization, filepath.Base(dashboardFile))
	}
	if !slices.Contains(strings.Fields(k), "disableNameSuffixHash:") {
		t.Errorf("%s: the ConfigMap's name must not change with its content (disableNameSuffixHash)", dashboardKustomization)
	}
}
