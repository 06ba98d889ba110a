//go:build tools

// Package tools pins OLM v0 for `go build` of its commands (olm, catalog, package-server, copy-content, cpb), and
// the opm and grpc_health_probe OLM itself requires (operator-registry and its pinned grpc-health-probe), for the
// images its pods run; the OLM module also carries the chart and CRDs (deploy/chart) that hack/olm renders.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
