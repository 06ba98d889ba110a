//go:build tools

// Package tools pins OLM v1 (operator-controller and catalogd, one module) for `go build` of both commands; the
// module also carries the kustomize config (config/overlays/basic-olm) that hack/olm/olmv1.sh renders.
package tools

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
