package prometheus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seedops/etcd-operator/controllers"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
)

// TestMetricsAreDocumented: docs/metrics.md has a row for every metric the operator exports and every metric
// the continuous backup agent serves.
func TestMetricsAreDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, m := range append(controllers.MetricNames(), continuous.MetricNames()...) {
		if !strings.Contains(doc, "| `"+m+"` |") {
			t.Errorf("docs/metrics.md has no row for %s", m)
		}
	}
}
