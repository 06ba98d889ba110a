package continuous

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// These tests run real etcd servers (ETCD_BIN_DIR, set by `make test`).

// restoreSourceFrom replaces the source's only member with the snapshot at file, as a quorum-loss recovery
// or a restore onto a full backup does: same member name and address, data restored under another initial
// cluster token, so the cluster gets a new cluster ID and its revisions start again at the snapshot's.
func restoreSourceFrom(t *testing.T, src *etcdtest.Cluster, file, token string) {
	t.Helper()
	ctx := context.Background()
	full := &backup.DirStore{Root: filepath.Join(t.TempDir(), "full")}
	if err := full.Put(ctx, "older.db", file, nil); err != nil {
		t.Fatal(err)
	}
	src.Stop(0)
	if err := src.Wipe(0); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Restore(ctx, quietLogger(t), full, backup.RestoreConfig{Key: "older.db", DataDir: src.DataDir(0), Name: src.MemberName(0),
		PeerURL: src.PeerURL(0), InitialCluster: src.InitialCluster([]int{0}), InitialClusterToken: token}); err != nil {
		t.Fatal(err)
	}
	if err := src.Start(0, src.InitialCluster([]int{0}), "new"); err != nil {
		t.Fatal(err)
	}
}

// TestRestoredClusterStartsANewHistory: after the cluster is restored from an older snapshot (another
// cluster ID, revisions below what the chain holds), the capturer does not continue its chain, whose
// revision numbers the restored cluster reuses for other states: resumed, it begins a new chain (a new
// history) and records the break as a gap; and a running capturer does the same when the cluster is
// restored under its watch. The restorable range never spans a break: the earlier history's chains restore
// nothing, a revision both histories have restores the current history's state, and one only the earlier
// history's chains held is refused as in a gap.
func TestRestoredClusterStartsANewHistory(t *testing.T) {
	src, cli := startSource(t)
	ctx := context.Background()
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store")}
	put := func(k string) int64 {
		t.Helper()
		return must[*clientv3.PutResponse](t)(cli.Put(ctx, k, "v")).Header.Revision
	}
	snapshotNow := func() (string, int64) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "full.db")
		if _, err := clientSnapshot(ctx, cli, file); err != nil {
			t.Fatal(err)
		}
		return file, must[*clientv3.GetResponse](t)(cli.Get(ctx, "/", clientv3.WithCountOnly())).Header.Revision
	}
	clusterID := func() string {
		t.Helper()
		var id uint64
		waitFor(t, "the cluster to answer", func() bool {
			resp, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
			if err == nil {
				id = resp.Header.ClusterId
			}
			return err == nil
		})
		return clusterIDString(id)
	}
	for i := range 20 {
		put(fmt.Sprintf("/a/%d", i))
	}
	older, olderRev := snapshotNow() // a full backup, older than what the capture will hold

	run := startCapture(t, testConfig(t, cli, store))
	first := run.waitChains(t, 1)[0].Manifest
	var newest1 int64
	for i := range 40 {
		newest1 = put(fmt.Sprintf("/b/%d", i))
	}
	run.waitStored(t, newest1)
	run.stop()
	if first.EtcdClusterID != clusterID() || first.History != first.ChainID {
		t.Fatalf("first chain %+v: want it to record cluster %s and begin its history", first, clusterID())
	}

	// Restored from the older snapshot while the capturer is down; a few writes, still below the revision
	// the chain holds: the chain's next revision would come, later, from another history.
	restoreSourceFrom(t, src, older, "restored-1")
	if id := clusterID(); id == first.EtcdClusterID {
		t.Fatalf("the restored cluster kept cluster ID %s", id)
	}
	for i := range 5 {
		put(fmt.Sprintf("/c/%d", i))
	}
	run = startCapture(t, testConfig(t, cli, store))
	second := run.waitChains(t, 1)[0].Manifest
	gaps := run.eventsOf(GapRecorded)
	if second.Reason != ReasonHistoryRestarted || second.History != second.ChainID || second.PreviousChain != first.ChainID ||
		second.EtcdClusterID != clusterID() || second.BaseRevision > newest1 || second.BaseRevision < olderRev+5 {
		t.Fatalf("second chain %+v; want a new history from the restored cluster's revision (at least %d, below %d)", second, olderRev+5, newest1)
	}
	if len(gaps) != 1 || gaps[0].Gap.From != 1 || gaps[0].Gap.To != second.BaseRevision-1 || !strings.Contains(gaps[0].Gap.Reason, "history restarted") {
		t.Fatalf("gaps recorded %+v; want one, of the new history's revisions before its chain", gaps)
	}
	if st := run.c.Status(); st.Gaps != 1 || st.ChainID != second.ChainID {
		t.Fatalf("status %+v", st)
	}
	// The new history passes the revision the first chain ended at: that revision now names another state.
	var newest2 int64
	for i := range int(newest1-second.BaseRevision) + 10 {
		newest2 = put(fmt.Sprintf("/d/%d", i))
	}
	run.waitStored(t, newest2)

	cat := must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	rs, gs := cat.Ranges(), cat.Gaps()
	if len(cat.Chains) != 1 || cat.Chains[0].ID != second.ChainID || len(cat.Superseded) != 1 || cat.Superseded[0].ID != first.ChainID ||
		len(rs) != 1 || rs[0].First != second.BaseRevision || rs[0].Last != newest2 ||
		len(gs) != 1 || gs[0].From != 1 || gs[0].To != second.BaseRevision-1 || cat.History != second.ChainID {
		t.Fatalf("chains %d (superseded %d), ranges %v, gaps %v; want the second history's chain alone, from %d to %d", len(cat.Chains), len(cat.Superseded), rs, gs, second.BaseRevision, newest2)
	}
	// A revision both histories have is the current history's state; one only the first chain held is
	// in the break's gap.
	_, dst, dstCli := restoreInto(t, store, Target{Revision: newest1}, "restored-at-newest1")
	sameAsSource(t, src, cli, dst, dstCli, newest1)
	dst.Close()
	_, err := RestoreTo(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID, Target: Target{Revision: first.BaseRevision + 1},
		EtcdBinary: "/nonexistent/etcd", WorkDir: t.TempDir(), OutputSnapshot: filepath.Join(t.TempDir(), "x.db")})
	var nr *NotRestorableError
	if !errors.As(err, &nr) || nr.Gap == nil || nr.Gap.To != second.BaseRevision-1 {
		t.Fatalf("restore to revision %d of the first history: %v; want it refused as in the break's gap", first.BaseRevision+1, err)
	}

	// Restored again, from a snapshot of the second history, under the running capturer's watch.
	older2, _ := snapshotNow()
	var newest3 int64
	for i := range 10 {
		newest3 = put(fmt.Sprintf("/e/%d", i))
	}
	run.waitStored(t, newest3)
	restoreSourceFrom(t, src, older2, "restored-2")
	put("/f/0")
	third := run.waitChains(t, 2)[1].Manifest
	if third.Reason != ReasonHistoryRestarted || third.PreviousChain != second.ChainID || third.History != third.ChainID || third.EtcdClusterID != clusterID() {
		t.Fatalf("third chain %+v; want a new history after the second chain", third)
	}
	newest4 := put("/f/1")
	run.waitStored(t, newest4)
	run.stop()

	cat = must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	rs = cat.Ranges()
	if len(cat.Chains) != 1 || cat.Chains[0].ID != third.ChainID || len(cat.Superseded) != 2 || len(rs) != 1 || rs[0].First != third.BaseRevision || rs[0].Last != newest4 {
		t.Fatalf("chains %d (superseded %d), ranges %v; want the third history's chain alone, from %d to %d", len(cat.Chains), len(cat.Superseded), rs, third.BaseRevision, newest4)
	}
	_, dst, dstCli = restoreInto(t, store, Target{}, "restored-newest")
	sameAsSource(t, src, cli, dst, dstCli, newest4)
}
