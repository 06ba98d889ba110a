//go:build tools

// Package tools pins the local-path-provisioner command this wrapper module builds.
package tools

import _ "github.com/rancher/local-path-provisioner"
