package kubectlplugin

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newVersionCommand(streams Streams, version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(streams.Out, "kubectl-etcd %s\n", version)
			return err
		},
	}
}
