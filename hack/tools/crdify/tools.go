//go:build tools

// Package tools pins crdify, the CRD upgrade checker that OLM v1's upgrade-safety preflight runs (operator-controller
// v1.5.1 uses crdify v0.5.0): make crdify-check compares the previous release's CRDs with bundle/'s, configured as
// operator-controller configures it (config.yaml).
package tools

import _ "sigs.k8s.io/crdify"
