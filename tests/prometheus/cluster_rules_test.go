package prometheus

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/seedops/etcd-operator/api/v1beta1"
	alertrules "github.com/seedops/etcd-operator/config/prometheus"
	"github.com/seedops/etcd-operator/internal/resources"
)

// clusterRule is the PrometheusRule the operator creates for namespace/name.
func clusterRule(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	groups, err := resources.ClusterRuleGroups(alertrules.AlertRules)
	if err != nil {
		t.Fatal(err)
	}
	c := &v1beta1.EtcdCluster{}
	c.Namespace, c.Name = namespace, name
	return resources.PrometheusRule(c, groups)
}

// TestClusterRulesSelectWithBraces: the per-cluster copy confines an expression by adding matchers inside
// braces, so a selector written without them would read every cluster's series. Every metric name in a
// cluster rule's expression must be followed by "{".
func TestClusterRulesSelectWithBraces(t *testing.T) {
	groups, err := resources.ClusterRuleGroups(alertrules.AlertRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			expr := r["expr"].(string)
			for _, name := range metricNames(expr) {
				at := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
				for _, loc := range at.FindAllStringIndex(stringLiteral.ReplaceAllString(expr, `""`), -1) {
					if rest := stringLiteral.ReplaceAllString(expr, `""`)[loc[1]:]; !strings.HasPrefix(rest, "{") {
						t.Errorf("%s: %s selects %s without braces: write %s{...}", g.Name, r["alert"], name, name)
					}
				}
			}
		}
	}
}

// TestClusterPrometheusRule: the operator's copy has every cluster group of the rules file, none about the
// operator itself, each rule as written but for its expression, and every series selector confined to the
// cluster.
func TestClusterPrometheusRule(t *testing.T) {
	u := clusterRule(t, "etcd-prod", "prod-etcd")
	if u.GetName() != "prod-etcd" || u.GetNamespace() != "etcd-prod" || len(u.GetOwnerReferences()) != 1 {
		t.Fatalf("PrometheusRule %s/%s owned by %v", u.GetNamespace(), u.GetName(), u.GetOwnerReferences())
	}
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
	var file ruleFile
	if err := yaml.UnmarshalStrict(alertrules.AlertRules, &file); err != nil {
		t.Fatal(err)
	}
	var names []string
	rules := 0
	for _, g := range file.Groups {
		if g.Name != resources.OperatorRuleGroup {
			names = append(names, g.Name)
			rules += len(g.Rules)
		}
	}
	var got []string
	for _, g := range groups {
		group := g.(map[string]any)
		got = append(got, group["name"].(string))
		for _, r := range group["rules"].([]any) {
			rules--
			expr := r.(map[string]any)["expr"].(string)
			opens := strings.Count(stringLiteral.ReplaceAllString(expr, `""`), "{")
			if scoped := strings.Count(expr, `namespace="etcd-prod",cluster="prod-etcd"`); opens == 0 || scoped != opens {
				t.Errorf("%v: %d of %d selectors confined to the cluster: %s", r.(map[string]any)["alert"], scoped, opens, expr)
			}
		}
	}
	if !slices.Equal(got, names) || rules != 0 {
		t.Errorf("groups %v (%d rules unaccounted), want %v", got, rules, names)
	}
}

func TestScopeExpr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`up{job="etcd"} == 0`, `up{namespace="ns",cluster="c",job="etcd"} == 0`},
		{`a{} / on (namespace, cluster) group_left b{ }`, `a{namespace="ns",cluster="c"} / on (namespace, cluster) group_left b{namespace="ns",cluster="c" }`},
		{`rate(x{l="{not a selector}"}[5m])`, `rate(x{namespace="ns",cluster="c",l="{not a selector}"}[5m])`},
		{"x{l=`{`, m=\"\\\"{\"}", "x{namespace=\"ns\",cluster=\"c\",l=`{`, m=\"\\\"{\"}"},
	} {
		if got := resources.ScopeExpr(tc.in, "ns", "c"); got != tc.want {
			t.Errorf("ScopeExpr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
