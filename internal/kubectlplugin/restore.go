package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

type restoreOptions struct {
	to       string
	version  string
	replicas int32
	dryRun   bool
}

func newRestoreCommand(k *kubeFlags, streams Streams) *cobra.Command {
	o := restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore BACKUP --to NEW-CLUSTER",
		Short: "Create a new EtcdCluster from a Succeeded EtcdBackup",
		Long: "Creates the EtcdCluster NEW-CLUSTER with spec.bootstrap.fromBackup naming the backup: every member " +
			"starts from the snapshot. The new cluster takes the backed-up cluster's spec when that cluster still " +
			"exists (version, size, storage, pod settings, TLS, etcd settings), else the backup's etcd version and 3 " +
			"members. Backups, authentication and pausing are not copied: a second cluster writing backups to the " +
			"same destination, or sharing the first one's root password Secret, would interfere with it.",
		Example: `  kubectl etcd restore before-upgrade --to prod-etcd-restored
  kubectl etcd restore before-upgrade --to prod-etcd-restored --replicas 5
  kubectl etcd restore before-upgrade --to prod-etcd-restored --dry-run`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.to == "" {
				return fmt.Errorf("--to names the new cluster: a restore never overwrites a running one")
			}
			s, err := k.session()
			if err != nil {
				return err
			}
			return runRestore(cmd.Context(), s, streams, args[0], o)
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "Name of the EtcdCluster to create (required).")
	cmd.Flags().StringVar(&o.version, "version", "", "etcd version of the new cluster (default: the backed-up cluster's, else the backup's).")
	cmd.Flags().Int32Var(&o.replicas, "replicas", 0, "Members of the new cluster (default: the backed-up cluster's, else 3).")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "Print the EtcdCluster as YAML instead of creating it.")
	return cmd
}

func runRestore(ctx context.Context, s *session, streams Streams, backupName string, o restoreOptions) error {
	b := &etcdv1beta1.EtcdBackup{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: backupName}, b); err != nil {
		return describeGetError(err, "EtcdBackup", backupName, s.namespace)
	}
	if b.Status.Phase != etcdv1beta1.BackupSucceeded {
		return fmt.Errorf("EtcdBackup %q is %s, not Succeeded: only a finished backup can be restored", b.Name, orUnknown(string(b.Status.Phase)))
	}
	source := &etcdv1beta1.EtcdCluster{}
	switch err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: b.Spec.ClusterName}, source); {
	case apierrors.IsNotFound(err):
		source = nil // deleted since: the backup alone says what to create
	case err != nil:
		return describeGetError(err, "EtcdCluster", b.Spec.ClusterName, s.namespace)
	}
	c := restoredCluster(b, source, o)
	if o.dryRun {
		out, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		_, err = streams.Out.Write(out)
		return err
	}
	if err := s.client.Create(ctx, c); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("EtcdCluster %q already exists in namespace %q: a restore creates a new cluster; choose another --to", c.Name, c.Namespace)
		}
		return fmt.Errorf("create EtcdCluster %q in namespace %q: %w", c.Name, c.Namespace, err)
	}
	_, _ = fmt.Fprintf(streams.Out, "etcdcluster.etcd.seedops.io/%s created from backup %s (revision %d)\n"+
		"Follow it with: kubectl etcd status %s -n %s\n", c.Name, b.Name, b.Status.Revision, c.Name, c.Namespace)
	return nil
}

// restoredCluster is the EtcdCluster a restore creates: the source cluster's spec (when it still exists)
// without what must not be shared between two clusters, bootstrapped from the backup.
func restoredCluster(b *etcdv1beta1.EtcdBackup, source *etcdv1beta1.EtcdCluster, o restoreOptions) *etcdv1beta1.EtcdCluster {
	spec := etcdv1beta1.EtcdClusterSpec{Version: b.Status.EtcdVersion, Replicas: 3}
	if source != nil {
		spec = *source.Spec.DeepCopy()
		spec.BackupSchedule, spec.Backup, spec.Auth, spec.Paused = "", etcdv1beta1.BackupSpec{}, etcdv1beta1.AuthSpec{}, false
	}
	if o.version != "" {
		spec.Version = o.version
	}
	if o.replicas != 0 {
		spec.Replicas = o.replicas
	}
	spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{BackupName: b.Name}}
	return &etcdv1beta1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1beta1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.to, Namespace: b.Namespace},
		Spec:       spec,
	}
}
