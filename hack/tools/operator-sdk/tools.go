//go:build tools

// Package tools pins operator-sdk for `go build github.com/operator-framework/operator-sdk/cmd/operator-sdk`.
package tools

import _ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
