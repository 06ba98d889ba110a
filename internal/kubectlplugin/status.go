package kubectlplugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

func newStatusCommand(k *kubeFlags, streams Streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status CLUSTER",
		Short: "Show an EtcdCluster's phase, conditions, members, alarms, backups and certificates",
		Example: `  kubectl etcd status prod-etcd -n databases
  kubectl etcd status prod-etcd -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("unknown output format %q: use json or yaml", output)
			}
			s, err := k.session()
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), s, streams, args[0], output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Print the EtcdCluster object instead: json or yaml.")
	return cmd
}

func runStatus(ctx context.Context, s *session, streams Streams, name, output string) error {
	c, err := s.cluster(ctx, name)
	if err != nil {
		return err
	}
	if output != "" {
		return printObject(streams.Out, c, "EtcdCluster", output)
	}
	// Backups only name the last backup and show running ones: without the right to list them, the
	// status is still worth showing.
	backups := &etcdv1beta1.EtcdBackupList{}
	if err := s.client.List(ctx, backups, client.InNamespace(s.namespace)); err != nil {
		backups.Items = nil
	}
	return RenderStatus(streams.Out, StatusView{Cluster: c, Backups: backups.Items, Now: time.Now(), Color: useColor(streams.Out)})
}
