package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// BenchmarkBackupRestore fills a real etcd with BENCH_DB_MIB MiB (default 1024) of values, then times a
// backup (snapshot, verify, store on a PVC directory) and a restore of one member. `make bench` runs it.
func BenchmarkBackupRestore(b *testing.B) {
	mib := 1024
	if v := os.Getenv("BENCH_DB_MIB"); v != "" {
		mib, _ = strconv.Atoi(v)
	}
	src := startCluster(b, "bench", 1)
	cli := client(b, src, 1)
	start := time.Now()
	if _, err := etcdtest.Fill(context.Background(), cli, "/bench/", int64(mib)<<20, 512<<10); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d MiB in %s", mib, time.Since(start).Round(time.Millisecond))
	store := &backup.DirStore{Root: filepath.Join(b.TempDir(), "backups"), Claim: "bench"}
	lg := zap.NewNop()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		t0 := time.Now()
		res, err := backup.Run(context.Background(), lg, store, backup.RunConfig{
			Endpoint: src.ClientURL(0), Namespace: "bench", Cluster: "bench", Kind: backup.KindOnDemand, StagingDir: filepath.Join(b.TempDir(), "staging"),
		})
		if err != nil {
			b.Fatal(err)
		}
		backupTime := time.Since(t0)
		t1 := time.Now()
		dataDir := filepath.Join(b.TempDir(), "restored")
		restored, err := backup.Restore(context.Background(), lg, store, backup.RestoreConfig{
			Key: res.Key, DataDir: dataDir, Name: "m-0", PeerURL: "http://127.0.0.1:2380",
			InitialCluster: "m-0=http://127.0.0.1:2380", InitialClusterToken: "bench",
		})
		if err != nil || !restored.Restored {
			b.Fatalf("restore: %v", err)
		}
		restoreTime := time.Since(t1)
		mb := float64(res.SizeBytes) / (1 << 20)
		b.ReportMetric(mb, "MiB")
		b.ReportMetric(backupTime.Seconds(), "backup-s")
		b.ReportMetric(mb/backupTime.Seconds(), "backup-MiB/s")
		b.ReportMetric(restoreTime.Seconds(), "restore-s")
		b.ReportMetric(mb/restoreTime.Seconds(), "restore-MiB/s")
		fmt.Printf("snapshot %.0f MiB (revision %d): backup %s (%.0f MiB/s), restore %s (%.0f MiB/s)\n",
			mb, res.Revision, backupTime.Round(time.Millisecond), mb/backupTime.Seconds(), restoreTime.Round(time.Millisecond), mb/restoreTime.Seconds())
	}
}
