package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// TestRecoveryBackups: the last backup status reports is restorable when it is on the cluster's backup
// destination (its key names the revision), and the newest of the cluster's backups is the one a recovery
// starts from; a recorded recovery finds its source again by location.
func TestRecoveryBackups(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"}}
	claim := resources.BackupDestination(c, nil).PVC.ClaimName
	key := "ns/prod/scheduled/prod-20261122T020000Z-r1234.db"
	at := metav1.NewTime(time.Date(2026, 11, 22, 2, 0, 5, 0, time.UTC))
	c.Status.LastBackupTime, c.Status.LastBackupLocation = &at, "pvc://"+claim+"/"+key
	b, ok := lastReportedBackup(c)
	if !ok || b.Revision != 1234 || b.source.Key != key || b.source.Destination.PVC == nil || b.source.Destination.PVC.ClaimName != claim {
		t.Fatalf("last reported backup: %+v, %v; want revision 1234 at %s on claim %s", b, ok, key, claim)
	}
	for _, loc := range []string{"pvc://another-claim/" + key, "s3://bucket/" + key, "pvc://" + claim + "/ns/prod/scheduled/not-a-snapshot"} {
		c.Status.LastBackupLocation = loc
		if b, ok := lastReportedBackup(c); ok {
			t.Errorf("%s: %+v; a location off the cluster's destination, or no backup's name, is not restorable from status alone", loc, b)
		}
	}

	older := recoveryBackup{Backup: membership.Backup{Location: "s3://b/old-r10.db", Revision: 10}, finished: at.Add(-time.Hour),
		source: resources.RestoreSource{Key: "old-r10.db"}}
	newer := recoveryBackup{Backup: membership.Backup{Location: "s3://b/new-r20.db", Revision: 20}, finished: at.Time,
		source: resources.RestoreSource{Key: "new-r20.db"}}
	if got := newestBackup([]recoveryBackup{newer, older}); got == nil || *got != newer.Backup {
		t.Fatalf("newest backup %+v, want %+v", got, newer.Backup)
	}
	if got := newestBackup(nil); got != nil {
		t.Fatalf("newest of no backups: %+v", got)
	}
	rec := membership.RestoreRecovery{ID: "restore-1", Location: older.Location, Revision: 10}
	if src := recoverySource([]recoveryBackup{newer, older}, rec); src == nil || src.Key != "old-r10.db" || src.Recovery != "restore-1" {
		t.Fatalf("source of the recorded recovery: %+v; want the recorded backup's, for restore-1", src)
	}
	rec.Location = "s3://b/gone-r5.db"
	if src := recoverySource([]recoveryBackup{newer, older}, rec); src != nil {
		t.Fatalf("a recorded backup no longer there: %+v; want none (the template keeps no restore step, and no pod restarts)", src)
	}
}

// TestFinishedRecovery: status records a recovery once, in the reconcile whose configuration drops its
// record with etcd answering.
func TestFinishedRecovery(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := &membership.RestoreRecovery{ID: "restore-1", Location: "pvc://b/k-r7.db", Revision: 7}
	ordinary := &membership.Config{State: membership.StateExisting}
	cases := []struct {
		name string
		obs  observation
		d    membership.Decision
		want *etcdv1beta1.RecoveryStatus
	}{
		{"restore ends", observation{reachable: true, restoring: rec}, membership.Decision{Config: ordinary},
			&etcdv1beta1.RecoveryStatus{Strategy: etcdv1beta1.QuorumLossFromBackup, Time: metav1.NewTime(now), Source: rec.Location, Revision: 7}},
		{"a fallback's reason is kept", observation{reachable: true, restoring: &membership.RestoreRecovery{ID: "restore-1", Location: rec.Location, Revision: 7, Fallback: "the replay failed"}},
			membership.Decision{Config: ordinary},
			&etcdv1beta1.RecoveryStatus{Strategy: etcdv1beta1.QuorumLossFromBackup, Time: metav1.NewTime(now), Source: rec.Location, Revision: 7, Fallback: "the replay failed"}},
		{"restore continues", observation{reachable: true, restoring: rec}, membership.Decision{Config: &membership.Config{Restore: rec}}, nil},
		{"etcd not answering", observation{restoring: rec}, membership.Decision{Config: ordinary}, nil},
		{"configuration left as it is", observation{reachable: true, restoring: rec}, membership.Decision{}, nil},
		{"forced start ends", observation{reachable: true, forcing: &membership.ForceNewCluster{Member: "prod-0"}}, membership.Decision{Config: ordinary},
			&etcdv1beta1.RecoveryStatus{Strategy: etcdv1beta1.QuorumLossFromSurvivor, Time: metav1.NewTime(now), Source: "prod-0"}},
		{"no recovery", observation{reachable: true}, membership.Decision{Config: ordinary}, nil},
	}
	for _, tc := range cases {
		got := finishedRecovery(tc.obs, tc.d, now)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
