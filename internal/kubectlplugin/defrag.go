package kubectlplugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

func newDefragCommand(k *kubeFlags, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "defrag CLUSTER",
		Short: "Ask the operator to defragment every member in turn, followers first, the leader last",
		Long: "Sets the cluster's " + etcdv1beta1.DefragmentAnnotation + " annotation to the current time. The operator " +
			"then defragments one member at a time, each only while every member is healthy, and reports the sweep in " +
			"status.defragmentation and in events; a member serves nothing while it defragments. kubectl etcd status shows the progress.",
		Example: `  kubectl etcd defrag prod-etcd -n databases`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := k.session()
			if err != nil {
				return err
			}
			return runDefrag(cmd.Context(), s, streams, args[0], time.Now())
		},
	}
}

func runDefrag(ctx context.Context, s *session, streams Streams, clusterName string, now time.Time) error {
	c, err := s.cluster(ctx, clusterName)
	if err != nil {
		return err
	}
	request := now.UTC().Format(time.RFC3339Nano)
	patch := client.MergeFrom(c.DeepCopy())
	c.SetAnnotations(mergeAnnotation(c.GetAnnotations(), etcdv1beta1.DefragmentAnnotation, request))
	if err := s.client.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("annotate EtcdCluster %q in namespace %q: %w", c.Name, c.Namespace, err)
	}
	_, _ = fmt.Fprintf(streams.Out, "etcdcluster.etcd.seedops.io/%s: defragmentation requested (%s=%s)\n", c.Name, etcdv1beta1.DefragmentAnnotation, request)
	if st := c.Status.Defragmentation; st != nil && st.Current != nil {
		_, _ = fmt.Fprintf(streams.Out, "A sweep is under way (%s); this one starts when it finishes.\n", st.Current.Trigger)
	}
	_, _ = fmt.Fprintf(streams.Out, "Follow it with: kubectl etcd status %s -n %s\n", c.Name, c.Namespace)
	return nil
}

// mergeAnnotation returns annotations with key set to value, leaving the others.
func mergeAnnotation(annotations map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[key] = value
	return out
}
