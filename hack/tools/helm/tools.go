//go:build tools

// Package tools pins helm, used only to render OLM v0's chart (deploy/chart in the OLM module) into manifests, as
// OLM's own release does. v3.18.6 is the version operator-sdk v1.42.3 already depends on (no extra downloads).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
