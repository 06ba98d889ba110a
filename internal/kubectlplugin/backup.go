package kubectlplugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

type backupOptions struct {
	name    string
	wait    bool
	timeout time.Duration
}

func newBackupCommand(k *kubeFlags, streams Streams) *cobra.Command {
	o := backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Take an on-demand backup (creates an EtcdBackup) and wait for its result",
		Long: "Creates an EtcdBackup of the cluster; it goes to the cluster's spec.backup destination. With --wait " +
			"(the default) the command follows the backup until it succeeds or fails and prints where the snapshot went.",
		Example: `  kubectl etcd backup prod-etcd
  kubectl etcd backup prod-etcd --name before-upgrade --timeout 30m
  kubectl etcd backup prod-etcd --wait=false`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := k.session()
			if err != nil {
				return err
			}
			return runBackup(cmd.Context(), s, streams, args[0], o, time.Now())
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "Name of the EtcdBackup (default <cluster>-<UTC time>, e.g. prod-etcd-20261124-143000).")
	cmd.Flags().BoolVar(&o.wait, "wait", true, "Wait until the backup succeeds or fails.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Minute, "How long --wait waits; the backup itself goes on after it.")
	return cmd
}

func runBackup(ctx context.Context, s *session, streams Streams, clusterName string, o backupOptions, now time.Time) error {
	// The operator would wait for a missing cluster; a user typing a name wants to hear about a typo now.
	if _, err := s.cluster(ctx, clusterName); err != nil {
		return err
	}
	b := newBackup(s.namespace, clusterName, o.name, now)
	if err := s.client.Create(ctx, b); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("EtcdBackup %q already exists in namespace %q: an EtcdBackup runs once; choose another --name", b.Name, b.Namespace)
		}
		return fmt.Errorf("create EtcdBackup %q in namespace %q: %w", b.Name, b.Namespace, err)
	}
	_, _ = fmt.Fprintf(streams.Out, "etcdbackup.etcd.seedops.io/%s created\n", b.Name)
	if !o.wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	done, err := waitForBackup(ctx, s.client, b, func(b *etcdv1beta1.EtcdBackup) {
		_, _ = fmt.Fprintf(streams.Out, "%s  %s\n", time.Now().UTC().Format(time.TimeOnly), describeProgress(b))
	})
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("EtcdBackup %q has not finished after %s; it goes on: follow it with kubectl get etcdbackup %s -n %s -w",
				b.Name, o.timeout, b.Name, b.Namespace)
		}
		return err
	}
	if done.Status.Phase == etcdv1beta1.BackupFailed {
		return fmt.Errorf("backup %s failed: %s", done.Name, orUnknown(done.Status.Error))
	}
	_, _ = fmt.Fprint(streams.Out, describeResult(done))
	return nil
}

// newBackup is the EtcdBackup the command creates: no destination, so the cluster's spec.backup applies,
// as for scheduled backups.
func newBackup(namespace, cluster, name string, now time.Time) *etcdv1beta1.EtcdBackup {
	if name == "" {
		// EtcdBackup names are at most 63 characters (they label the backup's Job); cluster names at most 45.
		name = cluster + "-" + strings.ToLower(now.UTC().Format("20060102-150405"))
	}
	return &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterName: cluster},
	}
}

// describeProgress is one line per observed change: the phase, and the operator's message if any.
func describeProgress(b *etcdv1beta1.EtcdBackup) string {
	if b.Status.Phase == "" {
		return "waiting for the operator to pick the backup up"
	}
	line := "phase " + string(b.Status.Phase)
	if b.Status.JobName != "" {
		line += ", Job " + b.Status.JobName
	}
	if b.Status.Error != "" {
		line += ": " + b.Status.Error
	}
	return line
}

func describeResult(b *etcdv1beta1.EtcdBackup) string {
	st := b.Status
	var sb strings.Builder
	fmt.Fprintf(&sb, "Backup %s succeeded\n", b.Name)
	fmt.Fprintf(&sb, "  Location:  %s\n", orDash(st.Location))
	fmt.Fprintf(&sb, "  Revision:  %d\n", st.Revision)
	fmt.Fprintf(&sb, "  Size:      %s (%d bytes)\n", formatBytes(st.SizeBytes), st.SizeBytes)
	if st.EtcdVersion != "" {
		fmt.Fprintf(&sb, "  etcd:      %s\n", st.EtcdVersion)
	}
	if st.StartTime != nil && st.CompletionTime != nil {
		fmt.Fprintf(&sb, "  Took:      %s\n", st.CompletionTime.Sub(st.StartTime.Time).Round(time.Second))
	}
	fmt.Fprintf(&sb, "Restore it into a new cluster with spec.bootstrap.fromBackup.backupName: %s\n", b.Name)
	return sb.String()
}
