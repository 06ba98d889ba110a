package backup_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/s3test"
)

// These tests run real etcd servers (ETCD_BIN_DIR) and a real MinIO server (MINIO_BIN), both set by `make test`.

func startCluster(t testing.TB, name string, n int) *etcdtest.Cluster {
	t.Helper()
	return etcdtest.StartStatic(t, name, n, nil)
}

func client(t testing.TB, c *etcdtest.Cluster, n int) *clientv3.Client {
	t.Helper()
	return c.Client(t, nil, etcdtest.Ordinals(n)...)
}

func writeData(t *testing.T, cli *clientv3.Client, n int) (map[string]string, int64) {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	var rev int64
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("/data/%05d", i), fmt.Sprintf("value-%d", i)
		resp, err := cli.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		want[k], rev = v, resp.Header.Revision
	}
	for i := 0; i < n; i += 10 {
		k := fmt.Sprintf("/data/%05d", i)
		resp, err := cli.Put(ctx, k, "overwritten")
		if err != nil {
			t.Fatal(err)
		}
		want[k], rev = "overwritten", resp.Header.Revision
	}
	for i := 5; i < n; i += 10 {
		k := fmt.Sprintf("/data/%05d", i)
		resp, err := cli.Delete(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		delete(want, k)
		rev = resp.Header.Revision
	}
	return want, rev
}

// restoreAndCheck restores key into a new 3-member cluster, starts it from the restored data and checks
// every key, the revision and that the cluster ID is new.
func restoreAndCheck(t *testing.T, store backup.Store, key string, want map[string]string, rev int64, oldClusterID uint64) {
	t.Helper()
	bin, _ := etcdtest.Binary()
	r := etcdtest.New("restored", filepath.Join(t.TempDir(), "restored"), bin)
	t.Cleanup(r.Close)
	ords := []int{0, 1, 2}
	for _, i := range ords {
		res, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, backup.RestoreConfig{
			Key: key, DataDir: r.DataDir(i), Name: r.MemberName(i), PeerURL: r.PeerURL(i),
			InitialCluster: r.InitialCluster(ords), InitialClusterToken: r.Name,
		})
		if err != nil || !res.Restored {
			t.Fatalf("restore member %d: restored=%v err=%v", i, res.Restored, err)
		}
		if res.Revision != rev {
			t.Fatalf("restored snapshot has revision %d, want %d", res.Revision, rev)
		}
	}
	for _, i := range ords {
		if err := r.Start(i, r.InitialCluster(ords), "new"); err != nil {
			t.Fatal(err)
		}
	}
	cli := client(t, r, 3)
	resp, err := cli.Get(context.Background(), "/data/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if len(got) != len(want) {
		t.Fatalf("restored cluster has %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %s = %q after restore, want %q", k, got[k], v)
		}
	}
	// The health probe read above does not write, so the revision is exactly the snapshot's.
	if resp.Header.Revision != rev {
		t.Fatalf("restored cluster is at revision %d, want %d", resp.Header.Revision, rev)
	}
	if resp.Header.ClusterId == oldClusterID {
		t.Fatalf("restored cluster kept the old cluster ID %x", oldClusterID)
	}
	members, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 3 {
		t.Fatalf("restored cluster has %d members, want 3", len(members.Members))
	}
}

func dirStore(t *testing.T) backup.Store {
	return &backup.DirStore{Root: filepath.Join(t.TempDir(), "backups"), Claim: "backups"}
}

func s3Store(t *testing.T) backup.Store {
	t.Helper()
	bin, err := s3test.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := s3test.Start(ctx, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "etcd-backups", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	store, err := backup.NewS3Store(backup.S3Config{Endpoint: srv.Endpoint, Bucket: "etcd-backups", AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

var stores = []struct {
	name string
	new  func(*testing.T) backup.Store
}{
	{"pvc", dirStore},
	{"s3", s3Store},
}

func TestSnapshotVerifyRestoreKeepsEveryKeyAndTheRevision(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			src := startCluster(t, "source", 1)
			cli := client(t, src, 1)
			want, rev := writeData(t, cli, 2000)
			status, err := cli.Status(context.Background(), src.ClientURL(0))
			if err != nil {
				t.Fatal(err)
			}
			store := st.new(t)
			res, err := backup.Run(context.Background(), zaptest.NewLogger(t), store, backup.RunConfig{
				Endpoint: src.ClientURL(0), Namespace: "prod", Cluster: "source", Kind: backup.KindOnDemand,
				Prefix: "team-a", StagingDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Revision != rev || res.TotalKeys != len(want) {
				t.Fatalf("backup says revision %d with %d keys, want %d with %d", res.Revision, res.TotalKeys, rev, len(want))
			}
			if res.EtcdVersion != status.Version {
				t.Fatalf("backup says etcd %q, server is %q", res.EtcdVersion, status.Version)
			}
			wantKey := fmt.Sprintf("team-a/prod/source/on-demand/source-%s-r%d.db", res.StartTime.Format("20060102T150405Z"), rev)
			if res.Key != wantKey || !strings.HasSuffix(res.Location, "/"+wantKey) {
				t.Fatalf("backup stored at %q (%s), want key %q", res.Key, res.Location, wantKey)
			}
			objects, err := store.List(context.Background(), "team-a/")
			if err != nil || len(objects) != 1 || objects[0].Size != res.SizeBytes {
				t.Fatalf("store holds %+v (err %v), want one object of %d bytes", objects, err, res.SizeBytes)
			}
			restoreAndCheck(t, store, res.Key, want, rev, status.Header.ClusterId)
		})
	}
}

func TestRetentionPrunesOldestScheduledBackupsOnly(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			src := startCluster(t, "prod", 1)
			cli := client(t, src, 1)
			store := st.new(t)
			clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			run := func(kind, endpoint string) (backup.Result, error) {
				clock = clock.Add(time.Hour)
				now := clock
				return backup.Run(context.Background(), zaptest.NewLogger(t), store, backup.RunConfig{
					Endpoint: endpoint, Namespace: "ns", Cluster: "prod", Kind: kind, Retention: 2,
					StagingDir: t.TempDir(), Now: func() time.Time { return now },
				})
			}
			if _, err := run(backup.KindOnDemand, src.ClientURL(0)); err != nil {
				t.Fatal(err)
			}
			var kept []string
			for i := 0; i < 4; i++ {
				if _, err := cli.Put(context.Background(), "k", fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
				res, err := run(backup.KindScheduled, src.ClientURL(0))
				if err != nil {
					t.Fatal(err)
				}
				kept = append(kept, res.Key)
				if i >= 2 && (len(res.Pruned) != 1 || res.Pruned[0] != kept[i-2]) {
					t.Fatalf("run %d pruned %v, want [%s]", i, res.Pruned, kept[i-2])
				}
			}
			// A run that cannot reach etcd stores nothing and deletes nothing.
			if _, err := run(backup.KindScheduled, "http://127.0.0.1:1"); err == nil {
				t.Fatal("a backup from an unreachable endpoint succeeded")
			}
			objects, err := store.List(context.Background(), "ns/prod/")
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objects {
				keys = append(keys, o.Key)
			}
			if len(keys) != 3 || !strings.HasPrefix(keys[0], "ns/prod/on-demand/prod-20261122T110000Z-r") || keys[1] != kept[2] || keys[2] != kept[3] {
				t.Fatalf("store holds %v, want the on-demand backup and %v", keys, kept[2:])
			}
		})
	}
}

func TestCorruptSnapshotIsRefusedAndNothingIsRestored(t *testing.T) {
	src := startCluster(t, "source", 1)
	cli := client(t, src, 1)
	writeData(t, cli, 200)
	root := filepath.Join(t.TempDir(), "backups")
	store := &backup.DirStore{Root: root, Claim: "backups"}
	res, err := backup.Run(context.Background(), zaptest.NewLogger(t), store, backup.RunConfig{
		Endpoint: src.ClientURL(0), Namespace: "ns", Cluster: "source", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(root, res.Key))
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0xff
	cases := map[string][]byte{
		"one byte flipped":  flipped,
		"truncated":         good[:len(good)/2],
		"trailer only":      good[len(good)-32:],
		"not a snapshot":    []byte("hello"),
		"database replaced": append(make([]byte, len(good)-32), good[len(good)-32:]...),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			key := "ns/source/on-demand/" + strings.ReplaceAll(name, " ", "-") + ".db"
			if err := os.WriteFile(filepath.Join(root, key), content, 0o600); err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			res, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, backup.RestoreConfig{
				Key: key, DataDir: dataDir, Name: "m-0", PeerURL: "http://127.0.0.1:2380",
				InitialCluster: "m-0=http://127.0.0.1:2380", InitialClusterToken: "m",
			})
			restored := res.Restored
			if !errors.Is(err, backup.ErrCorrupt) || restored {
				t.Fatalf("restore of a corrupt snapshot: restored=%v err=%v, want ErrCorrupt", restored, err)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused restore left a data directory behind: %v", err)
			}
		})
	}
}

func TestRestoreLeavesAnExistingMemberAlone(t *testing.T) {
	src := startCluster(t, "source", 1)
	client(t, src, 1)
	store := dirStore(t)
	res, err := backup.Run(context.Background(), zaptest.NewLogger(t), store, backup.RunConfig{
		Endpoint: src.ClientURL(0), Namespace: "ns", Cluster: "source", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The source member's own data directory: a restarted pod of a restored cluster looks like this.
	marker := filepath.Join(src.DataDir(0), "member", "marker")
	if err := os.WriteFile(marker, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, backup.RestoreConfig{
		Key: res.Key, DataDir: src.DataDir(0), Name: src.MemberName(0), PeerURL: src.PeerURL(0),
		InitialCluster: src.InitialCluster([]int{0}), InitialClusterToken: src.Name,
	})
	restored := again.Restored
	if err != nil || restored {
		t.Fatalf("restore over a member's data: restored=%v err=%v, want a no-op", restored, err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "mine" {
		t.Fatalf("the member's data changed: %q %v", b, err)
	}
}

// snapshotOfOneMember backs up a running one-member cluster into a directory store.
func snapshotOfOneMember(t *testing.T) (backup.Store, backup.Result) {
	t.Helper()
	src := startCluster(t, "source", 1)
	client(t, src, 1)
	store := dirStore(t)
	res, err := backup.Run(context.Background(), zaptest.NewLogger(t), store, backup.RunConfig{
		Endpoint: src.ClientURL(0), Namespace: "ns", Cluster: "source", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, res
}

// TestRestoreRefusesAnotherClustersData: a cluster deleted and recreated under its name with a restore
// finds the old members' claims retained; the restore must not start them on that data.
func TestRestoreRefusesAnotherClustersData(t *testing.T) {
	store, res := snapshotOfOneMember(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := backup.RestoreConfig{Key: res.Key, DataDir: dataDir, Name: "m-0", PeerURL: "http://127.0.0.1:2380",
		InitialCluster: "m-0=http://127.0.0.1:2380", InitialClusterToken: "ns/m/first-uid"}
	if got, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, cfg); err != nil || !got.Restored {
		t.Fatalf("first restore: restored=%v err=%v", got.Restored, err)
	}
	// The same cluster's member restarting: its data is its own.
	if got, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, cfg); err != nil || got.Restored {
		t.Fatalf("restart of the restored member: restored=%v err=%v, want a no-op", got.Restored, err)
	}
	// The cluster recreated under the same name (new UID, so a new token) over the retained claim.
	cfg.InitialClusterToken = "ns/m/second-uid"
	if got, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, cfg); !errors.Is(err, backup.ErrForeignData) || got.Restored {
		t.Fatalf("restore over another cluster's member: restored=%v err=%v, want ErrForeignData", got.Restored, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err != nil {
		t.Fatalf("the refused data is gone: %v", err)
	}
}

// TestRestoreForRecoveryMovesDataAside: in a quorum-loss recovery, the lost cluster's data in a member's
// data directory is moved aside on the volume, whole, and the snapshot restored in its place; the restored
// member restarting keeps its data; and a second recovery moves the first one's data aside beside the
// first, deleting nothing.
func TestRestoreForRecoveryMovesDataAside(t *testing.T) {
	store, res := snapshotOfOneMember(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	lost := backup.RestoreConfig{Key: res.Key, DataDir: dataDir, Name: "m-0", PeerURL: "http://127.0.0.1:2380",
		InitialCluster: "m-0=http://127.0.0.1:2380", InitialClusterToken: "ns/m/uid"}
	if _, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, lost); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dataDir, "member", "lost-cluster-marker")
	if err := os.WriteFile(marker, []byte("lost"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := lost
	cfg.InitialClusterToken, cfg.Recovery = "ns/m/uid/restore-1", "restore-1"
	got, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, cfg)
	if err != nil || !got.Restored || got.MovedAside != cfg.MovedAsideDir() {
		t.Fatalf("recovery restore: %+v, %v; want restored, the old data in %s", got, err, cfg.MovedAsideDir())
	}
	if b, err := os.ReadFile(filepath.Join(got.MovedAside, "member", "lost-cluster-marker")); err != nil || string(b) != "lost" {
		t.Fatalf("the lost cluster's data was not kept whole: %q %v", b, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restored data directory still holds the old data: %v", err)
	}
	if again, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, cfg); err != nil || again.Restored || again.MovedAside != "" {
		t.Fatalf("restart of the restored member: %+v, %v; want a no-op", again, err)
	}
	next := cfg
	next.InitialClusterToken, next.Recovery = "ns/m/uid/restore-2", "restore-2"
	second, err := backup.Restore(context.Background(), zaptest.NewLogger(t), store, next)
	if err != nil || !second.Restored || second.MovedAside != next.MovedAsideDir() {
		t.Fatalf("second recovery: %+v, %v", second, err)
	}
	for _, dir := range []string{got.MovedAside, second.MovedAside, dataDir} {
		if _, err := os.Stat(filepath.Join(dir, "member", "wal")); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
	}
}

func TestS3OverTLSTrustsOnlyTheGivenCA(t *testing.T) {
	bin, err := s3test.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv, caPEM, err := s3test.StartTLS(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := backup.S3Config{Endpoint: srv.Endpoint, Bucket: "tls", AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}

	// Without the CA the server's certificate is refused.
	untrusting, err := backup.NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusting.List(ctx, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("listing over TLS without the CA: %v, want a certificate error", err)
	}

	cfg.CAFile = caFile
	store, err := backup.NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}}
	tr.TLSClientConfig.RootCAs.AppendCertsFromPEM(caPEM)
	mc, err := minio.New(strings.TrimPrefix(srv.Endpoint, "https://"), &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Secure: true, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "tls", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	src := startCluster(t, "tls", 1)
	want, rev := writeData(t, client(t, src, 1), 100)
	res, err := backup.Run(ctx, zaptest.NewLogger(t), store, backup.RunConfig{
		Endpoint: src.ClientURL(0), Namespace: "ns", Cluster: "tls", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	restoreAndCheck(t, store, res.Key, want, rev, 0)
}

// TestBackupOverTLSNeedsTheClientCertificate runs a member with client certificate authentication, as the
// operator configures TLS clusters: the backup succeeds with the cluster's client certificate and fails
// without one or over plaintext.
func TestBackupOverTLSNeedsTheClientCertificate(t *testing.T) {
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca, _, err := pki.NewCA("test CA", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	serverCert, serverKey, err := ca.Issue(pki.Request{CommonName: "member", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		Usage: pki.ServerAndClient, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.Issue(pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := &etcdtest.TLSFiles{CA: write("ca.crt", ca.CertPEM), ServerCert: write("server.crt", serverCert),
		ServerKey: write("server.key", serverKey), PeerCert: filepath.Join(dir, "server.crt"), PeerKey: filepath.Join(dir, "server.key")}
	src := etcdtest.New("secure", filepath.Join(dir, "etcd"), bin)
	src.TLS = files
	t.Cleanup(src.Close)
	if err := src.Start(0, src.InitialCluster([]int{0}), "new"); err != nil {
		t.Fatal(err)
	}
	withCert, err := etcd.ClientTLSConfigFromFiles(files.CA, write("client.crt", clientCert), write("client.key", clientKey))
	if err != nil {
		t.Fatal(err)
	}
	run := func(endpoint string, cfg *tls.Config) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := backup.Run(ctx, zaptest.NewLogger(t), dirStore(t), backup.RunConfig{
			Endpoint: endpoint, TLS: cfg, Namespace: "ns", Cluster: "secure", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
		})
		return err
	}
	// The member needs a moment to elect itself; the first successful run proves the path.
	deadline := time.Now().Add(60 * time.Second)
	for err := run(src.ClientURL(0), withCert); err != nil; err = run(src.ClientURL(0), withCert) {
		if time.Now().After(deadline) {
			t.Fatalf("backup with the client certificate: %v\n%s", err, src.Log(0))
		}
		time.Sleep(500 * time.Millisecond)
	}
	noCert := withCert.Clone()
	noCert.Certificates = nil
	if err := run(src.ClientURL(0), noCert); err == nil {
		t.Error("a backup without a client certificate succeeded")
	}
	if err := run(strings.Replace(src.ClientURL(0), "https://", "http://", 1), nil); err == nil {
		t.Error("a plaintext backup from a TLS member succeeded")
	}
}
