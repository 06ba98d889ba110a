package kubectlplugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	"github.com/seedops/etcd-operator/internal/resources"
)

func newEtcdctlCommand(k *kubeFlags, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "etcdctl CLUSTER -- ETCDCTL_ARGS...",
		Short: "Run etcdctl in a member pod, with the member's certificate",
		Long: "Runs etcdctl inside the etcd container of a ready member (the leader when status names one), " +
			"against that member, with its certificate: no Secret leaves the cluster. stdin is passed on, and " +
			"the command exits with etcdctl's exit code. Put etcdctl's arguments after --.",
		Example: `  kubectl etcd etcdctl prod-etcd -- member list -w table
  kubectl etcd etcdctl prod-etcd -- endpoint status --cluster -w table
  kubectl etcd etcdctl prod-etcd -- get --prefix /registry --keys-only`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return fmt.Errorf("usage: kubectl etcd etcdctl CLUSTER -- ETCDCTL_ARGS... (the cluster name, then -- and etcdctl's arguments)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := k.session()
			if err != nil {
				return err
			}
			return runEtcdctl(cmd.Context(), s, streams, args[0], args[1:])
		},
	}
}

func runEtcdctl(ctx context.Context, s *session, streams Streams, name string, args []string) error {
	c, err := s.cluster(ctx, name)
	if err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(s.namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return fmt.Errorf("list the member pods of EtcdCluster %q in namespace %q: %w", name, s.namespace, err)
	}
	pod, err := chooseMemberPod(c, pods.Items)
	if err != nil {
		return err
	}
	if a := c.Status.AuthEnabled; a != nil && *a {
		// The member's server certificate authenticates as its common name, which is no etcd user.
		_, _ = fmt.Fprintf(streams.ErrOut, "Note: etcd authentication is on; the member's certificate (user %s-server) may be refused "+
			"for key and user commands. The root user's certificate is in Secret %s-client-tls.\n", c.Name, c.Name)
	}
	cmd, err := etcdctlCommand(tlsOfPod(pod), args)
	if err != nil {
		return err
	}
	return execInPod(ctx, s.config, pod, etcdContainerName, cmd, streams.In, streams.Out, streams.ErrOut)
}
