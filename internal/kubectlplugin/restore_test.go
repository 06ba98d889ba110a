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

func TestPointInTimeRestoreThroughAPIServer(t *testing.T) {
	c, kc := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := namespace(t, c)

	source := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: ns}, Spec: healthyCluster().Spec}
	source.Spec.Replicas = 5
	if err := c.Create(ctx, source); err != nil {
		t.Fatal(err)
	}

	t.Run("refuses a cluster without a continuous backup", func(t *testing.T) {
		_, _, err := run(ctx, kc, "restore", "--from-cluster", "prod-etcd", "--to", "pit", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), `EtcdCluster "prod-etcd" reports no continuous backup`) {
			t.Errorf("got error %v", err)
		}
	})

	oldest, newest := metav1.NewTime(now.Add(-2*time.Hour)), metav1.NewTime(now.Add(-5*time.Second))
	source.Status.ContinuousBackup = &etcdv1beta1.ContinuousBackupStatus{
		Location:       "pvc://prod-etcd-backups/" + ns + "/prod-etcd/continuous/",
		OldestRevision: 100, OldestTime: &oldest, NewestRevision: 9000, NewestTime: &newest,
		Gaps: []etcdv1beta1.ContinuousBackupGap{{FromRevision: 4000, ToRevision: 4100, Reason: "compacted before it was captured"}},
	}
	if err := c.Status().Update(ctx, source); err != nil {
		t.Fatal(err)
	}

	t.Run("creates a cluster restored to the revision, from the source's claim and location", func(t *testing.T) {
		out, _, err := run(ctx, kc, "restore", "--from-cluster", "prod-etcd", "--revision", "3999", "--to", "pit", "-n", ns)
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, out)
		}
		if !strings.Contains(out, "etcdcluster.etcd.seedops.io/pit created from prod-etcd's continuous backup at revision 3999") {
			t.Errorf("output:\n%s", out)
		}
		got := &etcdv1beta1.EtcdCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pit"}, got); err != nil {
			t.Fatal(err)
		}
		from := got.Spec.Bootstrap.FromBackup
		if got.Spec.Replicas != 5 || from.PVC == nil || from.PVC.ClaimName != "prod-etcd-backups" || from.Key != ns+"/prod-etcd/continuous/" ||
			from.PointInTime == nil || from.PointInTime.Revision != 3999 || from.PointInTime.ClusterUID != string(source.UID) {
			t.Errorf("spec %+v, fromBackup %+v: want the source's replicas, claim and location, revision 3999 and its UID", got.Spec, from)
		}
		if got.Spec.Backup.Continuous != nil {
			t.Error("the restored cluster must not capture into the source's location")
		}
	})

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"refuses a revision past the newest", "revision 9001 is outside what prod-etcd's continuous backup covers: revisions 100 to 9000", []string{"--revision", "9001"}},
		{"refuses a revision in a gap", "revision 4050 falls in a gap of prod-etcd's continuous backup (4000-4100", []string{"--revision", "4050"}},
		{"refuses a time before the oldest", "is before what prod-etcd's continuous backup covers", []string{"--time", now.Add(-3 * time.Hour).UTC().Format(time.RFC3339)}},
		{"refuses --revision without --from-cluster", "use them with --from-cluster", []string{"before-upgrade", "--revision", "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"restore"}
			if tc.args[0] != "before-upgrade" {
				args = append(args, "--from-cluster", "prod-etcd")
			}
			args = append(append(args, tc.args...), "--to", "refused", "-n", ns)
			_, _, err := run(ctx, kc, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want %q", err, tc.want)
			}
			if !apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "refused"}, &etcdv1beta1.EtcdCluster{})) {
				t.Error("a refused restore created the cluster")
			}
		})
	}
}
