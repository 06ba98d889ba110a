// Package prometheus checks the alerting rules of config/prometheus/alerts.yaml and the Grafana dashboard of
// config/grafana against the operator: every metric an expression selects is one the operator exports
// (controllers.MetricNames), one the continuous backup agent serves (continuous.MetricNames), or a
// controller-runtime metric of one of its controllers, and every alert carries the labels and annotations its runbook and
// routing rely on, and a promtool test case that fires and one that must not. promtool (make test-alerts)
// checks what the rules do; this checks that they still refer to what exists, so renaming a metric or a
// controller fails here.
package prometheus

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/seedops/etcd-operator/controllers"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
)

const (
	root       = "../.."
	runbookURL = "https://github.com/seedops/etcd-operator/blob/main/docs/alerts.md#"
)

var (
	rulesFile = filepath.Join(root, "config", "prometheus", "alerts.yaml")
	runbooks  = filepath.Join(root, "docs", "alerts.md")

	// controllerRuntimeMetrics are the controller-runtime metrics the rules may use; their controller label
	// must name one of the operator's controllers.
	controllerRuntimeMetrics = []string{"controller_runtime_reconcile_errors_total", "controller_runtime_reconcile_total",
		"controller_runtime_reconcile_time_seconds_bucket"}
	controllerNames   = []string{controllers.ClusterControllerName, controllers.BackupControllerName}
	controllerMatcher = regexp.MustCompile(`\bcontroller\s*(=~|=)\s*"([^"]*)"`)
	// etcdJob is the job label of the members' series: the PodMonitor takes it from the pods' name label.
	etcdJob = regexp.MustCompile(`\bjob\s*=\s*"etcd"`)
)

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", rulesFile)
	}
	return rules
}

// The parts of a PromQL expression that hold no metric name, removed before identifiers are read: string
// literals (label values), label matchers, range and subquery durations, the label lists of grouping and
// vector matching, and comments.
var (
	stringLiteral = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	matchers      = regexp.MustCompile(`\{[^}]*\}`)
	ranges        = regexp.MustCompile(`\[[^\]]*\]`)
	labelLists    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	comments      = regexp.MustCompile(`#[^\n]*`)
	identifier    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	call          = regexp.MustCompile(`^\s*\(`)
	// PromQL's keywords: binary operators, modifiers and the number literals Inf and NaN.
	keywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
		"group_right", "inf", "nan", "atan2"}
)

// metricNames returns the metric names expr selects. A name is an identifier that is not a keyword, not
// a function or aggregation (followed by "("), and not part of a number or duration.
func metricNames(expr string) []string {
	e := comments.ReplaceAllString(expr, " ")
	e = stringLiteral.ReplaceAllString(e, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = labelLists.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.") {
			continue
		}
		if slices.Contains(keywords, strings.ToLower(name)) || call.MatchString(e[loc[1]:]) {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`up`: {"up"},
		`sum by (namespace, cluster) (rate(foo_total{a="b", c=~"x|y"}[5m])) / on (namespace) group_left (member) bar > 0.8`: {"foo_total", "bar"},
		`time() - last_success{x='bar'} > 26 * 3600`:                                                  {"last_success"},
		"a\n  and on (namespace, cluster)\nb{version!=\"\"} offset 5m # c\n":                          {"a", "b"},
		`max_over_time(has_leader[5m:1m]) == 0 unless ignoring (member) c_bytes < 1e9`:                {"has_leader", "c_bytes"},
		`sum without (instance) (increase(errs{controller=~"etcdcluster|etcdbackup"}[30m])) > bool 0`: {"errs"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// TestRulesReferToExportedMetrics fails when an expression selects a metric the operator does not export
// (a renamed or removed metric, a typo), or a controller-runtime metric of a controller it does not run.
func TestRulesReferToExportedMetrics(t *testing.T) {
	for _, r := range loadRules(t) {
		checkExpr(t, r.Alert+r.Record, r.Expr)
	}
}

// checkExpr reports, as errors of t named after where, every metric expr selects that is neither exported by
// the operator nor a controller-runtime metric of one of its controllers.
func checkExpr(t *testing.T, where, expr string) {
	t.Helper()
	exported := controllers.MetricNames()
	if len(exported) == 0 {
		t.Fatal("controllers.MetricNames() is empty")
	}
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric name found in %q", where, expr)
	}
	for _, m := range names {
		switch {
		case strings.HasPrefix(m, continuous.MetricsPrefix):
			// The continuous backup agent's, from its own scrape job (resources.ContinuousBackupPodMonitor).
			if !slices.Contains(continuous.MetricNames(), m) {
				t.Errorf("%s: %s is not a metric the continuous backup agent serves (continuous.MetricNames: %q)", where, m, continuous.MetricNames())
			}
		case strings.HasPrefix(m, "etcd_operator_"):
			if !slices.Contains(exported, m) {
				t.Errorf("%s: %s is not a metric the operator exports (controllers.MetricNames: %q)", where, m, exported)
			}
		case slices.Contains(controllerRuntimeMetrics, m):
			if !controllerMatcher.MatchString(expr) {
				t.Errorf("%s: %s is selected without a controller matcher: it would count every controller in the process", where, m)
			}
		case strings.HasPrefix(m, "etcd_") || m == "up":
			// etcd's own metrics (TestEtcdServesTheMetricsReferenced checks them against a real etcd) and
			// the scrape's up, each only from the members' scrape job.
			if !etcdJob.MatchString(expr) {
				t.Errorf("%s: %s is selected without job=\"etcd\": it would match other programs' series", where, m)
			}
		default:
			t.Errorf("%s: %s is neither an operator metric, nor etcd's, nor one of %q", where, m, controllerRuntimeMetrics)
		}
	}
	for _, match := range controllerMatcher.FindAllStringSubmatch(expr, -1) {
		values := []string{match[2]}
		if match[1] == "=~" {
			values = strings.Split(match[2], "|")
		}
		for _, v := range values {
			if !slices.Contains(controllerNames, v) {
				t.Errorf("%s: controller %q is not one of the operator's controllers %q", where, v, controllerNames)
			}
		}
	}
}

// TestAlertsAreDocumented checks what routing and the on-call person need from every alert: a severity,
// a summary, a description naming the cluster, and a runbook_url whose anchor is a heading of docs/alerts.md.
func TestAlertsAreDocumented(t *testing.T) {
	anchors := headingAnchors(t, runbooks)
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary", r.Alert)
		}
		desc := r.Annotations["description"]
		if desc == "" {
			t.Errorf("%s: no description", r.Alert)
		}
		if strings.Contains(r.Expr, "etcd_operator_") && !strings.Contains(desc, "{{ $labels.namespace }}/{{ $labels.cluster }}") {
			t.Errorf("%s: the description does not name the cluster ({{ $labels.namespace }}/{{ $labels.cluster }})", r.Alert)
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookURL)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q does not start with %s", r.Alert, url, runbookURL)
		case anchor != strings.ToLower(r.Alert):
			t.Errorf("%s: runbook_url anchor %q, want %q (the alert's name)", r.Alert, anchor, strings.ToLower(r.Alert))
		case !slices.Contains(anchors, anchor):
			t.Errorf("%s: %s has no heading with the anchor %q", r.Alert, runbooks, anchor)
		}
	}
}

var anchorDrop = regexp.MustCompile(`[^a-z0-9 _-]`)

// headingAnchors returns the anchors GitHub gives the Markdown headings of path (outside code blocks):
// lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var anchors []string
	inCode := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchors = append(anchors, strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(title), ""), " ", "-"))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

// TestEveryAlertIsUnitTested checks that tests/prometheus/alerts_test.yaml has, for every alert, a case
// where it must not fire and, for each of its severities, a case where it fires.
func TestEveryAlertIsUnitTested(t *testing.T) {
	data, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `json:"exp_labels"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, group := range tests.Tests {
		for _, c := range group.AlertRuleTest {
			if len(c.ExpAlerts) == 0 {
				silent[c.Alertname] = true
			}
			for _, a := range c.ExpAlerts {
				fires[c.Alertname+"/"+a.ExpLabels["severity"]] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		if !fires[r.Alert+"/"+r.Labels["severity"]] {
			t.Errorf("%s (severity %s): no promtool test case where it fires", r.Alert, r.Labels["severity"])
		}
		if !silent[r.Alert] {
			t.Errorf("%s: no promtool test case where it must not fire", r.Alert)
		}
	}
}
