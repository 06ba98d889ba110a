package kubectlplugin

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

func TestRestoreThroughAPIServer(t *testing.T) {
	c, kc := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := namespace(t, c)

	source := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: ns}, Spec: healthyCluster().Spec}
	source.Spec.Replicas, source.Spec.Version = 5, "3.5.21"
	source.Spec.StorageSize = resource.MustParse("20Gi")
	if err := c.Create(ctx, source); err != nil {
		t.Fatal(err)
	}
	backup := func(name string, st etcdv1beta1.EtcdBackupStatus) {
		t.Helper()
		b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: source.Name}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		setBackupStatus(ctx, t, c, b, st)
	}
	backup("before-upgrade", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Revision: 50877, EtcdVersion: "3.5.17",
		Location: "pvc://prod-etcd-backups/" + ns + "/prod-etcd/ondemand/before-upgrade.db"})
	backup("unfinished", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupRunning})

	t.Run("creates a cluster with the source's spec, bootstrapped from the backup", func(t *testing.T) {
		out, _, err := run(ctx, kc, "restore", "before-upgrade", "--to", "prod-etcd-restored", "-n", ns)
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, out)
		}
		if !strings.Contains(out, "etcdcluster.etcd.seedops.io/prod-etcd-restored created from backup before-upgrade (revision 50877)") {
			t.Errorf("output:\n%s", out)
		}
		got := &etcdv1beta1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod-etcd-restored"}, got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.Version != "3.5.21" || s.Replicas != 5 || s.StorageSize.String() != "20Gi" || s.TLS.Enabled == nil || !*s.TLS.Enabled {
			t.Errorf("spec %+v: want the source's version, replicas, storage and TLS", s)
		}
		if s.BackupSchedule != "" || s.Bootstrap == nil || s.Bootstrap.FromBackup == nil || s.Bootstrap.FromBackup.BackupName != "before-upgrade" {
			t.Errorf("spec %+v: want no backup schedule and bootstrap.fromBackup.backupName before-upgrade", s)
		}

		_, _, err = run(ctx, kc, "restore", "before-upgrade", "--to", "prod-etcd-restored", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), `EtcdCluster "prod-etcd-restored" already exists`) {
			t.Errorf("second restore to the same name: got error %v", err)
		}
	})

	t.Run("refuses a backup that has not succeeded", func(t *testing.T) {
		_, _, err := run(ctx, kc, "restore", "unfinished", "--to", "other", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), `EtcdBackup "unfinished" is Running, not Succeeded`) {
			t.Errorf("got error %v", err)
		}
	})

	t.Run("needs --to", func(t *testing.T) {
		_, _, err := run(ctx, kc, "restore", "before-upgrade", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), "--to names the new cluster") {
			t.Errorf("got error %v", err)
		}
	})

	t.Run("takes the backup's version once the source is gone; --dry-run creates nothing", func(t *testing.T) {
		if err := c.Delete(ctx, source); err != nil {
			t.Fatal(err)
		}
		out, _, err := run(ctx, kc, "restore", "before-upgrade", "--to", "from-backup-only", "--replicas", "1", "--dry-run", "-n", ns)
		if err != nil {
			t.Fatalf("restore --dry-run: %v\n%s", err, out)
		}
		for _, want := range []string{"kind: EtcdCluster", "name: from-backup-only", "version: 3.5.17", "replicas: 1", "backupName: before-upgrade"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "from-backup-only"}, &etcdv1beta1.EtcdCluster{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("--dry-run created the cluster (get: %v)", err)
		}
	})
}
