package membergate

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// writeWAL writes a WAL with the given identity and enough entries to cut it into several segments.
func writeWAL(t *testing.T, dir string, member, cluster uint64) {
	t.Helper()
	old := wal.SegmentSizeBytes
	wal.SegmentSizeBytes = 16 << 10
	t.Cleanup(func() { wal.SegmentSizeBytes = old })
	md, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &member, ClusterID: &cluster})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zap.NewNop(), dir, md)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 64; i++ {
		term, index := uint64(1), i
		e := &raftpb.Entry{Term: &term, Index: &index, Data: make([]byte, 1<<10)}
		if err := w.Save(&raftpb.HardState{Term: &term, Commit: &index}, []*raftpb.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadWALMetadataAfterThePurge(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	writeWAL(t, dir, 0x8e9e05c52164694d, 0xcdf818194e3a8c32)
	names, err := walSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 {
		t.Fatalf("want several segments, got %v", names)
	}
	// etcd purges the oldest segments (names are newest first): the one that started at index 0 is gone.
	for _, n := range names[len(names)-2:] {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	md, ok, err := ReadWALMetadata(dir)
	if err != nil || !ok {
		t.Fatalf("ReadWALMetadata: ok %v, err %v", ok, err)
	}
	if md.MemberID != 0x8e9e05c52164694d || md.ClusterID != 0xcdf818194e3a8c32 {
		t.Fatalf("metadata %+v", md)
	}
}

func TestReadWALMetadataFallsBackFromABrokenSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	writeWAL(t, dir, 7, 9)
	names, _ := walSegments(dir)
	// The newest segment's head is garbage: the older ones still carry the metadata.
	if err := os.WriteFile(filepath.Join(dir, names[0]), []byte("not a WAL segment at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	md, ok, err := ReadWALMetadata(dir)
	if err != nil || !ok || md.MemberID != 7 || md.ClusterID != 9 {
		t.Fatalf("ReadWALMetadata = %+v, %v, %v", md, ok, err)
	}
	// Every segment broken: there is a WAL, but no identity to read.
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := ReadWALMetadata(dir); !ok || err == nil {
		t.Fatalf("all segments broken: ok %v, err %v; want a WAL and an error", ok, err)
	}
}

func TestReadWALMetadataWithoutAWAL(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "missing"), dir} {
		if _, ok, err := ReadWALMetadata(d); ok || err != nil {
			t.Fatalf("%s: ok %v, err %v; want no WAL", d, ok, err)
		}
	}
	// A segment still being prepared is not a WAL yet (etcd ignores it too).
	if err := os.WriteFile(filepath.Join(dir, "0.tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadWALMetadata(dir); ok {
		t.Fatal("a .tmp file counts as a WAL")
	}
}

// TestIsInitialCluster checks the derivation against a cluster etcd bootstrapped: it holds for the
// bootstrap's members and token, and stops holding once a member is removed or under another token.
func TestIsInitialCluster(t *testing.T) {
	c := startCluster(t, "gate-initial", 3, nil)
	cli := client(t, c, nil, 0, 1, 2)
	list := func() (uint64, map[uint64][]string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		members := map[uint64][]string{}
		for _, m := range resp.Members {
			members[m.ID] = m.PeerURLs
		}
		return resp.Header.ClusterId, members
	}
	id, members := list()
	if !IsInitialCluster(id, members, c.Name) {
		t.Fatalf("cluster %x with members %v: not recognised as the initial cluster of token %q", id, members, c.Name)
	}
	if IsInitialCluster(id, members, c.Name+"-other") {
		t.Fatal("recognised under another token")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Stop(2)
	if _, err := cli.MemberRemove(ctx, memberID(t, cli, c.MemberName(2))); err != nil {
		t.Fatal(err)
	}
	if id, members = list(); IsInitialCluster(id, members, c.Name) {
		t.Fatalf("a member was removed, yet members %v are taken for the initial cluster %x", members, id)
	}
}
