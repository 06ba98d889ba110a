package continuous

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/backup"
)

var now = time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)

// testChain is a chain whose snapshot was taken at base, covering until newest, of size bytes.
func testChain(base int64, taken, newest time.Time, bytes int64) *Chain {
	id := newChainID(base, "00000000")
	dir := "p/" + id + "/"
	seg := SegmentRef{Key: dir + "seg", Seq: 0, First: base + 1, Last: base + 100, CoveredUntil: newest}
	return &Chain{ID: id, Manifest: Manifest{ChainID: id, BaseRevision: base, TakenAt: taken}, ManifestKey: dir + manifestName,
		SnapshotKey: dir + snapshotName, Segments: []SegmentRef{seg}, Bytes: bytes,
		Keys: []string{dir + snapshotName, dir + "seg", dir + manifestName}}
}

func TestPlanRetention(t *testing.T) {
	day := 24 * time.Hour
	// Four daily chains, each covering until the next one's snapshot; the newest is still being written.
	chains := func() []*Chain {
		return []*Chain{
			testChain(100, now.Add(-4*day), now.Add(-3*day), 400),
			testChain(200, now.Add(-3*day), now.Add(-2*day), 300),
			testChain(300, now.Add(-2*day), now.Add(-1*day), 200),
			testChain(400, now.Add(-1*day), now, 100),
		}
	}
	id := func(base int64) string { return newChainID(base, "00000000") }
	cases := []struct {
		name    string
		policy  RetentionPolicy
		chains  []*Chain
		orphans []Orphan
		want    []string
	}{
		{name: "no policy keeps everything", chains: chains()},
		{name: "age: chains that restore nothing within two days go", policy: RetentionPolicy{MaxAge: 2*day + time.Hour}, chains: chains(), want: []string{id(100)}},
		{name: "age: a chain restoring a point just inside the window stays", policy: RetentionPolicy{MaxAge: 2 * day}, chains: chains(), want: []string{id(100)}},
		{name: "age: everything old, the newest chain stays", policy: RetentionPolicy{MaxAge: time.Minute}, chains: chains(), want: []string{id(100), id(200), id(300)}},
		{name: "size: oldest first until under the bound", policy: RetentionPolicy{MaxBytes: 350}, chains: chains(), want: []string{id(100), id(200)}},
		{name: "size: exactly at the bound keeps all", policy: RetentionPolicy{MaxBytes: 1000}, chains: chains()},
		{name: "size: the newest chain stays even alone above the bound", policy: RetentionPolicy{MaxBytes: 1}, chains: chains(), want: []string{id(100), id(200), id(300)}},
		{name: "age and size together", policy: RetentionPolicy{MaxAge: 2*day + time.Hour, MaxBytes: 450}, chains: chains(), want: []string{id(100), id(200)}},
		{name: "a single chain is never removed", policy: RetentionPolicy{MaxAge: time.Second, MaxBytes: 1}, chains: chains()[:1]},
		{name: "the newest usable chain stays when a newer one lost its snapshot", policy: RetentionPolicy{MaxAge: time.Second},
			chains: func() []*Chain {
				cs := chains()
				cs[3].SnapshotKey = ""
				return cs
			}(), want: []string{id(100), id(200)}},
		{name: "the chain restoring the newest revision stays when a newer chain holds only its snapshot", policy: RetentionPolicy{MaxBytes: 1},
			chains: func() []*Chain {
				cs := chains()
				late := testChain(450, now, now, 50)
				late.Segments = nil
				return append(cs, late)
			}(), want: []string{id(100), id(200), id(300)}},
		{name: "unfinished chains go after the grace, unless newer than the newest chain", chains: chains(),
			orphans: []Orphan{
				{Key: "p/" + newChainID(150, "aaaaaaaa") + "/" + snapshotName, Size: 10, LastModified: now.Add(-2 * time.Hour)},
				{Key: "p/" + newChainID(250, "aaaaaaaa") + "/" + snapshotName, Size: 10, LastModified: now.Add(-time.Minute)},
				{Key: "p/" + newChainID(500, "aaaaaaaa") + "/" + snapshotName, Size: 10, LastModified: now.Add(-48 * time.Hour)},
			}, want: []string{newChainID(150, "aaaaaaaa")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cat := &Catalog{Chains: tc.chains, Orphans: tc.orphans}
			plan := PlanRetention(cat, tc.policy, now)
			var got []string
			var freed int64
			for _, d := range plan.Delete {
				got = append(got, d.ChainID)
				freed += d.Bytes
				if d.Reason == "" || len(d.Keys) == 0 {
					t.Errorf("deletion %+v has no reason or keys", d)
				}
				if filepath.Base(d.Keys[0]) != manifestName && d.Reason != "unfinished chain" {
					t.Errorf("chain %s: %s is deleted before its manifest", d.ChainID, d.Keys[0])
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("deleted %v, want %v", got, tc.want)
			}
			var total int64
			for _, c := range tc.chains {
				total += c.Bytes
			}
			for _, o := range tc.orphans {
				total += o.Size
			}
			if plan.KeptBytes != total-freed || plan.KeptChains+len(got) < len(tc.chains) {
				t.Fatalf("kept %d bytes in %d chains; %d bytes in %d chains before, %d freed", plan.KeptBytes, plan.KeptChains, total, len(tc.chains), freed)
			}
		})
	}
}

func TestApplyRetentionDeletesThePlannedKeys(t *testing.T) {
	ctx := context.Background()
	store := &backup.DirStore{Root: t.TempDir()}
	c := &Capturer{cfg: Config{Store: store, StagingDir: t.TempDir()}}
	for _, k := range []string{"p/a/manifest.json", "p/a/seg", "p/a/snapshot.db", "p/b/manifest.json"} {
		if err := c.putBytes(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	deleted, err := ApplyRetention(ctx, store, RetentionPlan{Delete: []Deletion{{ChainID: "a", Keys: orderedKeys([]string{"p/a/snapshot.db", "p/a/seg", "p/a/manifest.json"})}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []string{"p/a/manifest.json", "p/a/seg", "p/a/snapshot.db"}) {
		t.Fatalf("deleted %v", deleted)
	}
	left, _ := store.List(ctx, "p/")
	if len(left) != 1 || left[0].Key != "p/b/manifest.json" {
		t.Fatalf("left %v", left)
	}
}

// TestRetentionOfAnEarlierHistory: the chains of an earlier history (before the cluster was restored from a
// snapshot) are pruned by age and size like any chain, first, and never protected: the current history's
// newest chain is, though its base revision is lower.
func TestRetentionOfAnEarlierHistory(t *testing.T) {
	day := 24 * time.Hour
	earlier := []*Chain{testChain(100, now.Add(-5*day), now.Add(-3*day), 400), testChain(400, now.Add(-3*day), now.Add(-2*day), 300)}
	current := []*Chain{testChain(50, now.Add(-2*day), now, 100)}
	cat := &Catalog{Chains: current, Superseded: earlier}

	plan := PlanRetention(cat, RetentionPolicy{MaxAge: 60 * time.Hour}, now)
	if len(plan.Delete) != 1 || plan.Delete[0].ChainID != earlier[0].ID || plan.KeptChains != 2 || plan.KeptBytes != 400 {
		t.Fatalf("by age: %+v; want the earlier history's chain older than the limit gone", plan)
	}
	plan = PlanRetention(cat, RetentionPolicy{MaxBytes: 150}, now)
	if len(plan.Delete) != 2 || plan.Delete[0].ChainID != earlier[0].ID || plan.Delete[1].ChainID != earlier[1].ID || plan.KeptChains != 1 {
		t.Fatalf("by size: %+v; want both earlier chains gone, the current history's kept", plan)
	}
}
