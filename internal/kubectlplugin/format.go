package kubectlplugin

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// formatBytes prints a size in binary units, as etcdctl and the Kubernetes quantities of the API do.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// age is how long ago t was, in kubectl's style (45s, 5h12m, 3d).
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// until is how far t lies ahead of now.
func until(now, t time.Time) string { return duration.HumanDuration(t.Sub(now)) }

// timestamp prints a time in UTC, to the second, as the API stores it.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
