// Package kubectlplugin is `kubectl etcd`: a kubectl plugin that shows an EtcdCluster's state, takes
// on-demand backups, restores them into new clusters and runs etcdctl inside a member, with kubectl's
// connection flags.
package kubectlplugin

import (
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// Streams are the plugin's standard input, output and error.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// NewRootCommand builds `kubectl etcd` and its subcommands. version is what `kubectl etcd version` prints.
func NewRootCommand(streams Streams, version string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-etcd",
		Short: "Inspect and operate etcd clusters run by etcd-operator",
		Long: "kubectl etcd works with the EtcdClusters of etcd-operator (etcd.seedops.io/v1beta1): " +
			"their status, on-demand backups, restores into a new cluster, defragmentation, and etcdctl inside a member pod, without copying Secrets.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Shown as "kubectl etcd" in help, the way kubectl invokes the binary.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)

	k := newKubeFlags()
	k.bind(cmd.PersistentFlags())

	cmd.AddCommand(
		newStatusCommand(k, streams),
		newBackupCommand(k, streams),
		newRestoreCommand(k, streams),
		newDefragCommand(k, streams),
		newEtcdctlCommand(k, streams),
		newMigrateStorageCommand(k, streams),
		newVersionCommand(streams, version),
	)
	return cmd
}

// kubeFlags are kubectl's connection flags (--kubeconfig, --context, -n/--namespace, --server, ...),
// resolved the way kubectl resolves them.
type kubeFlags struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
}

func newKubeFlags() *kubeFlags {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	// Like kubectl: a missing default kubeconfig falls back to in-cluster configuration.
	rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	return &kubeFlags{rules: rules, overrides: &clientcmd.ConfigOverrides{}}
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.rules, k.overrides)
}
