// Command kubectl-etcd is the `kubectl etcd` plugin for etcd-operator's EtcdClusters. Install it with
// `go install github.com/seedops/etcd-operator/cmd/kubectl-etcd@latest` or through krew; kubectl finds it
// on the PATH.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/seedops/etcd-operator/internal/kubectlplugin"
)

// version is set at build time: -ldflags "-X main.version=v0.2.0". Without it, the module version that
// `go install ...@vX.Y.Z` records is used.
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubectlplugin.NewRootCommand(kubectlplugin.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, pluginVersion()).
		ExecuteContext(ctx)
	stop()
	var exit kubectlplugin.ExitError
	switch {
	case errors.As(err, &exit):
		// etcdctl already said why on stderr; its exit code is the answer.
		os.Exit(exit.Code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func pluginVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
