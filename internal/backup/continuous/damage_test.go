package continuous

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seedops/etcd-operator/internal/backup"
)

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesDamagedBackups: whatever is wrong with the objects a restore needs (a flipped byte, a
// missing, reordered or truncated segment, a segment or manifest of another cluster or chain, a damaged
// snapshot), the restore is refused with a typed error that names the object and what is still
// restorable, and nothing is started.
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	_, cli := startSource(t)
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "store")
	store := &backup.DirStore{Root: root}
	run := startCapture(t, testConfig(t, cli, store))
	base := run.waitChains(t, 1)[0].Manifest.BaseRevision
	var newest int64
	for i := range 120 {
		newest = must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/k/%03d", i%40), strings.Repeat("v", 1000))).Header.Revision
	}
	run.waitStored(t, newest)
	run.stop()
	cat := must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	ch := cat.Chains[0]
	if len(ch.Segments) < 4 {
		t.Fatalf("%d segments, the test needs 4", len(ch.Segments))
	}
	seg := ch.Segments
	file := func(root, key string) string { return filepath.Join(root, filepath.FromSlash(key)) }
	reencode := func(t *testing.T, root string, i int, change func(*SegmentHeader)) {
		data := must[[]byte](t)(os.ReadFile(file(root, seg[i].Key)))
		s, _, err := DecodeSegment(data)
		if err != nil {
			t.Fatal(err)
		}
		change(&s.Header)
		data, _, err = EncodeSegment(s.Header, s.Revisions, s.Leases)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file(root, seg[i].Key), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(t *testing.T, root, key string, at func(size int) int) {
		p := file(root, key)
		data := must[[]byte](t)(os.ReadFile(p))
		data[at(len(data))] ^= 0x01
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	upTo := func(i int) string { return fmt.Sprintf("restorable: revisions %d..%d ", base, seg[i].Last) }

	cases := []struct {
		name   string
		damage func(t *testing.T, root string)
		target Target
		want   error
		key    string
		says   []string
	}{
		{name: "a flipped byte in a segment's records", damage: func(t *testing.T, root string) { flip(t, root, seg[2].Key, func(n int) int { return n - 100 }) },
			want: ErrIntegrity, key: seg[2].Key, says: []string{"SHA-256", upTo(1)}},
		{name: "a flipped byte in a segment's header", damage: func(t *testing.T, root string) { flip(t, root, seg[2].Key, func(int) int { return 30 }) },
			want: ErrIntegrity, key: seg[2].Key, says: []string{upTo(1)}},
		{name: "a truncated segment", damage: func(t *testing.T, root string) {
			p := file(root, seg[1].Key)
			data := must[[]byte](t)(os.ReadFile(p))
			_ = os.WriteFile(p, data[:len(data)/2], 0o600)
		}, want: ErrIntegrity, key: seg[1].Key, says: []string{upTo(0)}},
		{name: "a missing segment", damage: func(t *testing.T, root string) { _ = os.Remove(file(root, seg[2].Key)) },
			target: Target{Revision: newest}, want: ErrNotRestorable, says: []string{"segment 2 is missing", upTo(1)}},
		{name: "segments swapped", damage: func(t *testing.T, root string) {
			a, b := must[[]byte](t)(os.ReadFile(file(root, seg[1].Key))), must[[]byte](t)(os.ReadFile(file(root, seg[2].Key)))
			_ = os.WriteFile(file(root, seg[1].Key), b, 0o600)
			_ = os.WriteFile(file(root, seg[2].Key), a, 0o600)
		}, want: ErrIntegrity, key: seg[1].Key, says: []string{"number 2 of its chain", upTo(0)}},
		{name: "a segment of another cluster", damage: func(t *testing.T, root string) {
			reencode(t, root, 2, func(h *SegmentHeader) { h.ClusterUID = "another-cluster" })
		}, want: ErrIntegrity, key: seg[2].Key, says: []string{`cluster "another-cluster"`, upTo(1)}},
		{name: "a segment of another chain", damage: func(t *testing.T, root string) {
			reencode(t, root, 3, func(h *SegmentHeader) { h.ChainID = newChainID(base, "ffffffff") })
		}, want: ErrIntegrity, key: seg[3].Key, says: []string{"belongs to chain", upTo(2)}},
		{name: "a segment that does not follow the previous one", damage: func(t *testing.T, root string) {
			reencode(t, root, 1, func(h *SegmentHeader) { h.PrevSHA256 = hex.EncodeToString(make([]byte, 32)) })
		}, want: ErrIntegrity, key: seg[1].Key, says: []string{"does not follow", upTo(0)}},
		{name: "a damaged snapshot", damage: func(t *testing.T, root string) { flip(t, root, ch.SnapshotKey, func(n int) int { return n / 2 }) },
			want: ErrIntegrity, key: ch.SnapshotKey, says: []string{"nothing is restorable"}},
		{name: "a manifest of another cluster", damage: func(t *testing.T, root string) {
			p := file(root, ch.ManifestKey)
			data := must[[]byte](t)(os.ReadFile(p))
			_ = os.WriteFile(p, []byte(strings.Replace(string(data), testUID, "another-cluster", 1)), 0o600)
		}, want: ErrNotRestorable, says: []string{"belongs to cluster another-cluster", "nothing is restorable"}},
		{name: "damage after the target does not matter", damage: func(t *testing.T, root string) { flip(t, root, seg[3].Key, func(n int) int { return n - 100 }) },
			target: Target{Revision: seg[1].Last}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "store")
			copyTree(t, store.Root, root)
			tc.damage(t, root)
			dir := t.TempDir()
			marker := filepath.Join(dir, "started")
			bin := filepath.Join(dir, "etcd")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(dir, "work")
			cfg := RestoreConfig{Store: &backup.DirStore{Root: root}, Prefix: testPrefix, ClusterUID: testUID, Target: tc.target,
				EtcdBinary: bin, WorkDir: work, OutputSnapshot: filepath.Join(dir, "out.db"), Logger: quietLogger(t)}
			if tc.want == nil {
				plan, err := PrepareRestore(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				plan.Close()
				return
			}
			_, err := RestoreTo(ctx, cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			var ie *IntegrityError
			if tc.key != "" && (!errors.As(err, &ie) || ie.Key != tc.key) {
				t.Fatalf("err %v, want it to name %s", err, tc.key)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error()+" ", s) {
					t.Fatalf("err %q does not say %q", err, s)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("etcd was started")
			}
			if left, _ := os.ReadDir(work); len(left) != 0 {
				t.Fatalf("the work directory keeps %d entries", len(left))
			}
			t.Logf("refused: %v", err)
		})
	}
}
