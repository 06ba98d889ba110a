package kubectlplugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

type restoreOptions struct {
	to       string
	version  string
	replicas int32
	dryRun   bool
	// fromCluster restores the named cluster's continuous backup to revision or at (newest when neither).
	fromCluster string
	revision    int64
	at          string
}

func newRestoreCommand(k *kubeFlags, streams Streams) *cobra.Command {
	o := restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore (BACKUP | --from-cluster CLUSTER [--revision N | --time T]) --to NEW-CLUSTER",
		Short: "Create a new EtcdCluster from a Succeeded EtcdBackup, or from a cluster's continuous backup at a point in time",
		Long: "Creates the EtcdCluster NEW-CLUSTER with spec.bootstrap.fromBackup naming the backup: every member " +
			"starts from the snapshot. The new cluster takes the backed-up cluster's spec when that cluster still " +
			"exists (version, size, storage, pod settings, TLS, etcd settings), else the backup's etcd version and 3 " +
			"members. Backups, authentication and pausing are not copied: a second cluster writing backups to the " +
			"same destination, or sharing the first one's root password Secret, would interfere with it.\n\n" +
			"With --from-cluster, the new cluster starts from CLUSTER's continuous backup (spec.backup.continuous) at " +
			"--revision or --time (default: the newest revision it covers), which must lie in the range " +
			"status.continuousBackup reports.",
		Example: `  kubectl etcd restore before-upgrade --to prod-etcd-restored
  kubectl etcd restore before-upgrade --to prod-etcd-restored --replicas 5
  kubectl etcd restore before-upgrade --to prod-etcd-restored --dry-run
  kubectl etcd restore --from-cluster prod-etcd --time 2026-11-28T10:41:00Z --to prod-etcd-before-delete
  kubectl etcd restore --from-cluster prod-etcd --revision 48210 --to prod-etcd-before-delete`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.to == "" {
				return fmt.Errorf("--to names the new cluster: a restore never overwrites a running one")
			}
			if (len(args) == 1) == (o.fromCluster != "") {
				return fmt.Errorf("name one source: an EtcdBackup, or a cluster's continuous backup with --from-cluster")
			}
			if o.fromCluster == "" && (o.revision != 0 || o.at != "") {
				return fmt.Errorf("--revision and --time choose a point in a continuous backup: use them with --from-cluster")
			}
			s, err := k.session()
			if err != nil {
				return err
			}
			if o.fromCluster != "" {
				return runPointInTimeRestore(cmd.Context(), s, streams, o)
			}
			return runRestore(cmd.Context(), s, streams, args[0], o)
		},
	}
	cmd.Flags().StringVar(&o.to, "to", "", "Name of the EtcdCluster to create (required).")
	cmd.Flags().StringVar(&o.version, "version", "", "etcd version of the new cluster (default: the backed-up cluster's, else the backup's).")
	cmd.Flags().Int32Var(&o.replicas, "replicas", 0, "Members of the new cluster (default: the backed-up cluster's, else 3).")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "Print the EtcdCluster as YAML instead of creating it.")
	cmd.Flags().StringVar(&o.fromCluster, "from-cluster", "", "Restore this cluster's continuous backup instead of an EtcdBackup.")
	cmd.Flags().Int64Var(&o.revision, "revision", 0, "With --from-cluster: the revision to restore.")
	cmd.Flags().StringVar(&o.at, "time", "", "With --from-cluster: restore the newest revision captured at or before this time (RFC 3339).")
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
	return createRestored(ctx, s, streams, c, fmt.Sprintf("backup %s (revision %d)", b.Name, b.Status.Revision), o.dryRun)
}

// createRestored creates the restored cluster, or prints it with --dry-run.
func createRestored(ctx context.Context, s *session, streams Streams, c *etcdv1beta1.EtcdCluster, from string, dryRun bool) error {
	if dryRun {
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
	_, _ = fmt.Fprintf(streams.Out, "etcdcluster.etcd.seedops.io/%s created from %s\n"+
		"Follow it with: kubectl etcd status %s -n %s\n", c.Name, from, c.Name, c.Namespace)
	return nil
}

// runPointInTimeRestore creates a cluster from the source cluster's continuous backup at the chosen point,
// refusing a point outside the range the source's status reports (the restore Job would refuse it too, but
// only after the new cluster exists).
func runPointInTimeRestore(ctx context.Context, s *session, streams Streams, o restoreOptions) error {
	source := &etcdv1beta1.EtcdCluster{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: o.fromCluster}, source); err != nil {
		return describeGetError(err, "EtcdCluster", o.fromCluster, s.namespace)
	}
	cb := source.Status.ContinuousBackup
	if cb == nil || cb.Location == "" {
		return fmt.Errorf("EtcdCluster %q reports no continuous backup (spec.backup.continuous, status.continuousBackup)", source.Name)
	}
	pit := &etcdv1beta1.PointInTime{Revision: o.revision, ClusterUID: string(source.UID)}
	covered := fmt.Sprintf("revisions %d to %d", cb.OldestRevision, cb.NewestRevision)
	if cb.OldestTime != nil && cb.NewestTime != nil {
		covered += fmt.Sprintf(" (%s to %s)", cb.OldestTime.UTC().Format(time.RFC3339), cb.NewestTime.UTC().Format(time.RFC3339))
	}
	switch {
	case o.revision != 0 && o.at != "":
		return fmt.Errorf("choose --revision or --time, not both")
	case o.revision != 0 && (o.revision < cb.OldestRevision || o.revision > cb.NewestRevision):
		return fmt.Errorf("revision %d is outside what %s's continuous backup covers: %s", o.revision, source.Name, covered)
	case o.at != "":
		t, err := time.Parse(time.RFC3339, o.at)
		if err != nil {
			return fmt.Errorf("--time %q: want RFC 3339, e.g. 2026-11-28T10:41:00Z", o.at)
		}
		if cb.OldestTime != nil && t.Before(cb.OldestTime.Time) {
			return fmt.Errorf("%s is before what %s's continuous backup covers: %s", o.at, source.Name, covered)
		}
		pit.Time = &metav1.Time{Time: t.UTC()}
	}
	for _, g := range cb.Gaps {
		if o.revision >= g.FromRevision && o.revision <= g.ToRevision {
			return fmt.Errorf("revision %d falls in a gap of %s's continuous backup (%d-%d: %s): no chain holds it", o.revision, source.Name, g.FromRevision, g.ToRevision, g.Reason)
		}
	}
	d := resources.BackupDestination(source, nil)
	_, key, ok := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(cb.Location, "pvc://"), "s3://"), "/")
	if !ok || key == "" {
		return fmt.Errorf("status.continuousBackup.location %q of %q names no key", cb.Location, source.Name)
	}
	spec := *source.Spec.DeepCopy()
	spec.BackupSchedule, spec.Backup, spec.Auth, spec.Paused = "", etcdv1beta1.BackupSpec{}, etcdv1beta1.AuthSpec{}, false
	if o.version != "" {
		spec.Version = o.version
	}
	if o.replicas != 0 {
		spec.Replicas = o.replicas
	}
	spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{PVC: d.PVC, S3: d.S3, Key: key, PointInTime: pit}}
	if d.PVC != nil {
		spec.Bootstrap.FromBackup.PVC = &etcdv1beta1.PVCBackupDestination{ClaimName: d.PVC.ClaimName}
	}
	c := &etcdv1beta1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1beta1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.to, Namespace: source.Namespace},
		Spec:       spec,
	}
	target := "its newest revision"
	switch {
	case pit.Revision != 0:
		target = fmt.Sprintf("revision %d", pit.Revision)
	case pit.Time != nil:
		target = pit.Time.Format(time.RFC3339)
	}
	return createRestored(ctx, s, streams, c, fmt.Sprintf("%s's continuous backup at %s", source.Name, target), o.dryRun)
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
