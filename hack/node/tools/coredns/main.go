// Command coredns is CoreDNS with only the plugins the local node's Corefile uses. Building the upstream
// main (every plugin, with the cloud providers' SDKs) takes several times longer.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

// directives are the plugins in upstream's execution order (core/dnsserver/zdirectives.go).
var directives = []string{"bind", "ready", "health", "errors", "log", "cache", "template", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
