//go:build tools

// Package tools pins opm for `go build github.com/operator-framework/operator-registry/cmd/opm`.
package tools

import _ "github.com/operator-framework/operator-registry/cmd/opm"
