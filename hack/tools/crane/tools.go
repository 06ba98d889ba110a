//go:build tools

// Package tools pins crane, used to set image config labels (OLM bundle and catalog labels) on the images hack/olm
// builds with nodetool, and to copy images between the node's two registry endpoints. Same go-containerregistry
// version as hack/node/tools/nodetool.
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
