// Package prometheus carries the alerting rules (alerts.yaml) into the operator, which creates them as a
// PrometheusRule per cluster where prometheus-operator runs.
package prometheus

import _ "embed"

// AlertRules is alerts.yaml: Prometheus rule groups.
//
//go:embed alerts.yaml
var AlertRules []byte
