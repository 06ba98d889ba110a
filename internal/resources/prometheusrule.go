package resources

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// PrometheusRuleGVK is prometheus-operator's PrometheusRule, built unstructured like the PodMonitor.
var PrometheusRuleGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}

// OperatorRuleGroup is the group of rules about the operator itself (its controllers' errors), not about one
// cluster: it is loaded once, from the rules file, and never copied into a cluster's PrometheusRule.
const OperatorRuleGroup = "etcd-operator.operator"

// RuleGroup is one Prometheus rule group; rules are kept as they are written, but for their expressions.
type RuleGroup struct {
	Name  string           `json:"name"`
	Rules []map[string]any `json:"rules"`
}

// ClusterRuleGroups reads the rule groups of a Prometheus rules file (config/prometheus/alerts.yaml) that are
// about one cluster: every group but OperatorRuleGroup. Their expressions must write every series selector
// with braces (`metric{}`, not `metric`), which is what ScopeExpr relies on.
func ClusterRuleGroups(rulesFile []byte) ([]RuleGroup, error) {
	var file struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(rulesFile, &file); err != nil {
		return nil, fmt.Errorf("alerting rules: %w", err)
	}
	var out []RuleGroup
	for _, g := range file.Groups {
		if g.Name == OperatorRuleGroup {
			continue
		}
		for _, r := range g.Rules {
			if expr, ok := r["expr"].(string); !ok || !strings.Contains(expr, "{") {
				return nil, fmt.Errorf("alerting rules: group %s, rule %v: the expression selects no series with braces", g.Name, r["alert"])
			}
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("alerting rules: no group about a cluster")
	}
	return out, nil
}

// ScopeExpr confines a PromQL expression to one cluster: every series selector (every "{" outside a
// string literal) gets the matchers namespace="<namespace>" and cluster="<name>" first, so Prometheus reads
// only that cluster's series and each cluster's copy of a rule costs what its own series cost. Namespace and
// cluster names are DNS labels, so they need no quoting beyond the quotes.
func ScopeExpr(expr, namespace, name string) string {
	matchers := fmt.Sprintf("namespace=%q,cluster=%q", namespace, name)
	var b strings.Builder
	var quote rune // the open string literal's quote, 0 outside one
	escaped := false
	runes := []rune(expr)
	for i, r := range runes {
		b.WriteRune(r)
		switch {
		case quote != 0:
			switch {
			case escaped:
				escaped = false
			case r == '\\' && quote != '`':
				escaped = true
			case r == quote:
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '{':
			b.WriteString(matchers)
			if next := nextNonSpace(runes[i+1:]); next != '}' {
				b.WriteByte(',')
			}
		}
	}
	return b.String()
}

func nextNonSpace(rs []rune) rune {
	for _, r := range rs {
		if r != ' ' && r != '\t' && r != '\n' {
			return r
		}
	}
	return 0
}

// PrometheusRule is the cluster's alerting rules: the cluster rule groups with every expression confined to
// this cluster (ScopeExpr), in the cluster's namespace, so a Prometheus that selects the namespace's rules
// alerts on the cluster with the labels and runbooks of docs/alerts.md.
func PrometheusRule(c *etcdv1beta1.EtcdCluster, groups []RuleGroup) *unstructured.Unstructured {
	var specGroups []any
	for _, g := range groups {
		var rules []any
		for _, r := range g.Rules {
			scoped := make(map[string]any, len(r))
			for k, v := range r {
				scoped[k] = v
			}
			scoped["expr"] = ScopeExpr(r["expr"].(string), c.Namespace, c.Name)
			rules = append(rules, scoped)
		}
		specGroups = append(specGroups, map[string]any{"name": g.Name, "rules": rules})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": monitoringMetadata(c, PrometheusRuleName(c), ComponentEtcd),
		"spec":     map[string]any{"groups": specGroups},
	}}
	u.SetGroupVersionKind(PrometheusRuleGVK)
	return u
}
