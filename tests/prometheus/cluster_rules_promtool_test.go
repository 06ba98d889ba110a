//go:build promtool

package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestClusterPrometheusRuleFiresForItsClusterOnly renders the PrometheusRule the operator creates for
// etcd-prod/prod-etcd, has promtool check it (Prometheus's own parser) and runs cluster_rules_test.yaml
// against it: series of two clusters in the same trouble, alerts for prod-etcd's only.
func TestClusterPrometheusRuleFiresForItsClusterOnly(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		t.Fatal("PROMTOOL must name a promtool binary (make test-alerts sets it)")
	}
	groups, _, _ := unstructured.NestedSlice(clusterRule(t, "etcd-prod", "prod-etcd").Object, "spec", "groups")
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// cluster_rules_test.yaml loads cluster-rules.yaml from its own directory.
	if err := os.WriteFile(filepath.Join(dir, "cluster-rules.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("cluster_rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster_rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "rules", filepath.Join(dir, "cluster-rules.yaml")},
		{"test", "rules", filepath.Join(dir, "cluster_rules_test.yaml")},
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
