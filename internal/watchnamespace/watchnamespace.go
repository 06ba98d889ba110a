// Package watchnamespace reads WATCH_NAMESPACE, the namespaces the operator serves (OLM sets it from the
// OperatorGroup's target namespaces).
package watchnamespace

import "strings"

// Parse splits WATCH_NAMESPACE into namespaces: comma-separated, blanks trimmed, empty entries dropped; none
// means every namespace.
func Parse(watchNamespace string) []string {
	var out []string
	for ns := range strings.SplitSeq(watchNamespace, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}
