package continuous

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// These tests run real etcd servers (ETCD_BIN_DIR, set by `make test`).

const (
	testUID    = "7d1c0a3e-uid"
	testPrefix = "team-a/prod/etcd/continuous"
)

func startSource(t testing.TB) (*etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	src := etcdtest.StartStatic(t, "source", 1, nil)
	return src, src.Client(t, nil, 0)
}

// captureRun is a Capturer running in the background, with the events it reported.
type captureRun struct {
	c      *Capturer
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	events []Event
}

func testConfig(t testing.TB, cli *clientv3.Client, store backup.Store) Config {
	return Config{Client: cli, Store: store, Prefix: testPrefix, ClusterUID: testUID, StagingDir: t.TempDir(),
		Logger: quietLogger(t), FlushInterval: 100 * time.Millisecond, MaxSegmentBytes: 16 << 10}
}

func startCapture(t testing.TB, cfg Config) *captureRun {
	t.Helper()
	r := &captureRun{done: make(chan struct{})}
	cfg.OnEvent = func(e Event) {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("capture: %v", err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *captureRun) stop() {
	r.cancel()
	<-r.done
}

func (r *captureRun) eventsOf(kind EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls cond for up to 30 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, 30*time.Second, what, cond)
}

// waitWithin polls cond for up to d.
func waitWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStored waits until the current chain's segments hold rev.
func (r *captureRun) waitStored(t testing.TB, rev int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("revision %d to be stored", rev), func() bool { return r.c.Status().StoredRevision >= rev })
}

func (r *captureRun) waitChains(t testing.TB, n int) []Event {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d chains", n), func() bool { return len(r.eventsOf(ChainStarted)) >= n })
	return r.eventsOf(ChainStarted)
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// restoreInto restores target into a new one-member cluster, starts it and returns a client of it.
func restoreInto(t *testing.T, store backup.Store, target Target, name string) (*RestoreResult, *etcdtest.Cluster, *clientv3.Client) {
	t.Helper()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	r := etcdtest.New(name, filepath.Join(t.TempDir(), name), bin)
	t.Cleanup(r.Close)
	res, err := RestoreTo(context.Background(), RestoreConfig{
		Store: store, Prefix: testPrefix, ClusterUID: testUID, Target: target, EtcdBinary: bin, WorkDir: t.TempDir(),
		OutputSnapshot: filepath.Join(t.TempDir(), "restored.db"), Logger: quietLogger(t),
		Member: &MemberConfig{DataDir: r.DataDir(0), Name: r.MemberName(0), PeerURL: r.PeerURL(0),
			InitialCluster: r.InitialCluster([]int{0}), InitialClusterToken: r.Name},
	})
	if err != nil {
		t.Fatalf("restore to %s: %v", target, err)
	}
	if err := r.Start(0, r.InitialCluster([]int{0}), "new"); err != nil {
		t.Fatal(err)
	}
	return res, r, r.Client(t, nil, 0)
}

// sameAsSource checks that the restored member holds exactly the source's state at rev: etcd's HashKV
// (with the compact revision it covers) and every key-value with its metadata.
func sameAsSource(t *testing.T, src *etcdtest.Cluster, srcCli *clientv3.Client, dst *etcdtest.Cluster, dstCli *clientv3.Client, rev int64) {
	t.Helper()
	ctx := context.Background()
	want := must[*clientv3.HashKVResponse](t)(srcCli.HashKV(ctx, src.ClientURL(0), rev))
	got := must[*clientv3.HashKVResponse](t)(dstCli.HashKV(ctx, dst.ClientURL(0), rev))
	if got.Hash != want.Hash || got.CompactRevision != want.CompactRevision {
		t.Fatalf("HashKV(%d): restored %d (compacted at %d), source %d (compacted at %d)", rev, got.Hash, got.CompactRevision, want.Hash, want.CompactRevision)
	}
	srcKVs := must[*clientv3.GetResponse](t)(srcCli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(rev)))
	dstKVs := must[*clientv3.GetResponse](t)(dstCli.Get(ctx, "", clientv3.WithPrefix()))
	if dstKVs.Header.Revision != rev {
		t.Fatalf("restored member is at revision %d, want %d", dstKVs.Header.Revision, rev)
	}
	if len(srcKVs.Kvs) != len(dstKVs.Kvs) {
		t.Fatalf("revision %d: restored member has %d keys, the source had %d", rev, len(dstKVs.Kvs), len(srcKVs.Kvs))
	}
	for i := range srcKVs.Kvs {
		if !proto.Equal(srcKVs.Kvs[i], dstKVs.Kvs[i]) {
			t.Fatalf("revision %d: restored %v, source %v", rev, dstKVs.Kvs[i], srcKVs.Kvs[i])
		}
	}
}

// TestCaptureAndRestoreMatchTheSource captures a cluster under concurrent puts, deletes, multi-operation
// transactions and leases (granted, attached, detached, revoked, expired), then restores several revisions
// and proves each equal to the source at that revision: HashKV and every key-value with its metadata.
func TestCaptureAndRestoreMatchTheSource(t *testing.T) {
	src, cli := startSource(t)
	ctx := context.Background()
	// History before the capture, partly compacted: the restored state carries the compaction along.
	for i := range 60 {
		must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/pre/%02d", i%15), fmt.Sprint(i)))
	}
	must[*clientv3.DeleteResponse](t)(cli.Delete(ctx, "/pre/03"))
	pre := must[*clientv3.PutResponse](t)(cli.Put(ctx, "/pre/last", "x"))
	must[*clientv3.CompactResponse](t)(cli.Compact(ctx, pre.Header.Revision-20, clientv3.WithCompactPhysical()))
	// A lease that exists in the base snapshot, with a key.
	l0 := must[*clientv3.LeaseGrantResponse](t)(cli.Grant(ctx, 300))
	must[*clientv3.PutResponse](t)(cli.Put(ctx, "/pre/leased", "x", clientv3.WithLease(l0.ID)))

	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store"), Claim: "backups"}
	run := startCapture(t, testConfig(t, cli, store))
	base := run.waitChains(t, 1)[0].Manifest.BaseRevision

	// Phase A: two concurrent writers, multi-operation transactions, leases attached, detached and revoked.
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				k := fmt.Sprintf("/w%d/%02d", w, i%25)
				var err error
				if i%7 == 3 {
					_, err = cli.Delete(ctx, k)
				} else {
					_, err = cli.Put(ctx, k, fmt.Sprintf("v%d-%d", w, i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	l1 := must[*clientv3.LeaseGrantResponse](t)(cli.Grant(ctx, 300))
	l3 := must[*clientv3.LeaseGrantResponse](t)(cli.Grant(ctx, 300))
	for i := range 20 {
		must[*clientv3.TxnResponse](t)(cli.Txn(ctx).Then(
			clientv3.OpPut(fmt.Sprintf("/txn/a%02d", i), "a", clientv3.WithLease(l1.ID)),
			clientv3.OpPut(fmt.Sprintf("/txn/b%02d", i), "b"),
			clientv3.OpDelete(fmt.Sprintf("/txn/a%02d", i-1)),
			clientv3.OpPut("/pre/leased", fmt.Sprint(i), clientv3.WithLease(l0.ID)),
		).Commit())
		must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/l3/%02d", i), "x", clientv3.WithLease(l3.ID)))
	}
	// Detach a key from its lease, attach another.
	must[*clientv3.PutResponse](t)(cli.Put(ctx, "/txn/a19", "detached"))
	must[*clientv3.PutResponse](t)(cli.Put(ctx, "/w0/00", "attached", clientv3.WithLease(l1.ID)))
	// A conditional transaction that deletes a range and puts in the same revision.
	must[*clientv3.TxnResponse](t)(cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/txn/b00"), ">", 0)).
		Then(clientv3.OpDelete("/txn/b0", clientv3.WithPrefix()), clientv3.OpPut("/txn/c", "c")).
		Else(clientv3.OpPut("/never", "x")).Commit())
	wg.Wait()
	// Revoking deletes every key of the lease in one revision.
	must[*clientv3.LeaseRevokeResponse](t)(cli.Revoke(ctx, l3.ID))
	endA := must[*clientv3.PutResponse](t)(cli.Put(ctx, "/phase", "A")).Header.Revision
	mid := (base + endA) / 2

	// A quiet moment: the time right after endA was received restores endA.
	waitFor(t, "the capture to receive the revision", func() bool { return run.c.Status().ReceivedRevision >= endA })
	atEndA := time.Now()
	time.Sleep(50 * time.Millisecond)

	// Phase B: a lease that expires.
	l2 := must[*clientv3.LeaseGrantResponse](t)(cli.Grant(ctx, 1))
	must[*clientv3.PutResponse](t)(cli.Put(ctx, "/l2/a", "x", clientv3.WithLease(l2.ID)))
	must[*clientv3.PutResponse](t)(cli.Put(ctx, "/l2/b", "x", clientv3.WithLease(l2.ID)))
	waitFor(t, "lease l2 to expire", func() bool {
		r, err := cli.Get(ctx, "/l2/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 0
	})

	// Phase C: a delete of more keys than a transaction may hold operations.
	for i := range 200 {
		must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/bulk/%03d", i), strings.Repeat("b", i)))
	}
	beforeDel := must[*clientv3.PutResponse](t)(cli.Put(ctx, "/phase", "C")).Header.Revision
	del := must[*clientv3.DeleteResponse](t)(cli.Delete(ctx, "/bulk/", clientv3.WithPrefix()))
	if del.Deleted != 200 {
		t.Fatalf("deleted %d keys", del.Deleted)
	}
	newest := must[*clientv3.PutResponse](t)(cli.Put(ctx, "/phase", "done")).Header.Revision
	run.waitStored(t, newest)
	run.stop()
	t.Logf("base %d, mid %d, end of phase A %d, before the delete %d, newest %d; %d segments", base, mid, endA, beforeDel, newest, run.c.Status().Segments)

	// The catalog states what is restorable; a time target resolves to the revision of that time.
	cat := must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	if rs := cat.Ranges(); len(rs) != 1 || rs[0].First != base || rs[0].Last != newest || len(cat.Gaps()) != 0 || len(cat.Problems) != 0 {
		t.Fatalf("catalog: ranges %v, gaps %v, problems %v", rs, cat.Gaps(), cat.Problems)
	}
	plan := must[*RestorePlan](t)(PrepareRestore(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID,
		Target: Target{Time: atEndA}, WorkDir: t.TempDir()}))
	plan.Close()
	if plan.Revision != endA {
		t.Fatalf("time %s resolves to revision %d, want %d", atEndA, plan.Revision, endA)
	}

	targets := []struct {
		name string
		rev  int64
	}{{"first after the snapshot", base + 1}, {"middle", mid}, {"before the delete of a prefix", beforeDel}, {"newest", newest}}
	var last *etcdtest.Cluster
	var lastCli *clientv3.Client
	for i, tg := range targets {
		res, dst, dstCli := restoreInto(t, store, Target{Revision: tg.rev}, fmt.Sprintf("restored%d", i))
		if res.Revision != tg.rev || res.Snapshot.Revision != tg.rev {
			t.Fatalf("%s: restored revision %d (snapshot %d), want %d", tg.name, res.Revision, res.Snapshot.Revision, tg.rev)
		}
		t.Logf("%s (revision %d): replayed %d revisions, %d events, granted %d leases in %s", tg.name, tg.rev, res.Revisions, res.Events, res.LeasesGranted, res.Duration)
		sameAsSource(t, src, cli, dst, dstCli, tg.rev)
		if h := must[*clientv3.HashKVResponse](t)(cli.HashKV(ctx, src.ClientURL(0), tg.rev)); h.Hash != res.Hash {
			t.Fatalf("%s: the restore reports hash %d, the source's is %d", tg.name, res.Hash, h.Hash)
		}
		// Keys keep their leases, which exist on the restored cluster.
		for _, kv := range must[*clientv3.GetResponse](t)(dstCli.Get(ctx, "", clientv3.WithPrefix())).Kvs {
			if kv.Lease != 0 {
				if ttl := must[*clientv3.LeaseTimeToLiveResponse](t)(dstCli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))); ttl.TTL <= 0 {
					t.Fatalf("%s: key %s has lease %x, which the restored cluster does not have", tg.name, kv.Key, kv.Lease)
				}
			}
		}
		if i < len(targets)-1 {
			dst.Close()
		} else {
			last, lastCli = dst, dstCli
		}
	}

	// Compacting the source after the snapshot changes its HashKV; compacting the restored member at the
	// same revision makes them equal again.
	must[*clientv3.CompactResponse](t)(cli.Compact(ctx, mid, clientv3.WithCompactPhysical()))
	must[*clientv3.CompactResponse](t)(lastCli.Compact(ctx, mid, clientv3.WithCompactPhysical()))
	sameAsSource(t, src, cli, last, lastCli, newest)
}

// lossyWatch lets a test cut the capturer's watch and hold the next one back.
type lossyWatch struct {
	cli    *clientv3.Client
	lose   chan struct{} // closed: the first watch ends
	resume chan struct{} // closed: the second watch may start
	mu     sync.Mutex
	calls  int
}

func (l *lossyWatch) watch(ctx context.Context, from int64) clientv3.WatchChan {
	l.mu.Lock()
	l.calls++
	call := l.calls
	l.mu.Unlock()
	if call == 2 {
		select {
		case <-l.resume:
		case <-ctx.Done():
		}
	}
	real := l.cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from))
	if call != 1 {
		return real
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for {
			select {
			case wr, ok := <-real:
				if !ok {
					return
				}
				select {
				case out <- wr:
				case <-l.lose:
					return
				}
			case <-l.lose:
				return
			}
		}
	}()
	return out
}

// TestLostHistoryStartsANewChainWithAGap: when the source compacts history the capturer has not read
// (its watch was lost, or it was not running), it records the gap, starts a new chain from a new full
// snapshot, and a restore into the gap is refused with the restorable ranges; without compaction a
// restarted capturer continues its chain.
func TestLostHistoryStartsANewChainWithAGap(t *testing.T) {
	src, cli := startSource(t)
	ctx := context.Background()
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store")}
	put := func(k string) int64 {
		t.Helper()
		return must[*clientv3.PutResponse](t)(cli.Put(ctx, k, "v")).Header.Revision
	}
	for i := range 20 {
		put(fmt.Sprintf("/a/%d", i))
	}

	// The watch is lost while the capture runs; the source compacts past the last captured revision.
	lw := &lossyWatch{cli: cli, lose: make(chan struct{}), resume: make(chan struct{})}
	cfg := testConfig(t, cli, store)
	cfg.watch = lw.watch
	run := startCapture(t, cfg)
	base1 := run.waitChains(t, 1)[0].Manifest.BaseRevision
	var last1 int64
	for i := range 30 {
		last1 = put(fmt.Sprintf("/b/%d", i))
	}
	run.waitStored(t, last1)
	close(lw.lose)
	waitFor(t, "the capture to watch again", func() bool { lw.mu.Lock(); defer lw.mu.Unlock(); return lw.calls == 2 })
	var compactAt int64
	for i := range 30 {
		compactAt = put(fmt.Sprintf("/c/%d", i))
	}
	must[*clientv3.CompactResponse](t)(cli.Compact(ctx, compactAt, clientv3.WithCompactPhysical()))
	close(lw.resume)
	chains := run.waitChains(t, 2)
	second := chains[1].Manifest
	gaps := run.eventsOf(GapRecorded)
	if second.Reason != ReasonLostHistory || len(gaps) != 1 || gaps[0].Gap.From != last1+1 || gaps[0].Gap.To != second.BaseRevision-1 || second.BaseRevision < compactAt {
		t.Fatalf("second chain %+v, gaps %+v; want a gap from %d to the new base minus one (at least %d)", second, gaps, last1+1, compactAt)
	}
	if st := run.c.Status(); st.Gaps != 1 || st.ChainsStarted != 2 || st.ChainID != second.ChainID {
		t.Fatalf("status %+v", st)
	}
	var last2 int64
	for i := range 10 {
		last2 = put(fmt.Sprintf("/d/%d", i))
	}
	run.waitStored(t, last2)
	run.stop()

	// A restarted capturer continues its chain while the source still has the history.
	var last3 int64
	for i := range 10 {
		last3 = put(fmt.Sprintf("/e/%d", i))
	}
	run = startCapture(t, testConfig(t, cli, store))
	waitFor(t, "the chain to resume", func() bool { return len(run.eventsOf(ChainResumed)) == 1 })
	run.waitStored(t, last3)
	run.stop()
	if n := len(run.eventsOf(ChainStarted)); n != 0 {
		t.Fatalf("the restarted capturer started %d chains, want it to continue", n)
	}

	// It was not running while the source compacted: a new chain, and a second gap.
	for i := range 10 {
		put(fmt.Sprintf("/f/%d", i))
	}
	compact2 := put("/f/last")
	must[*clientv3.CompactResponse](t)(cli.Compact(ctx, compact2, clientv3.WithCompactPhysical()))
	run = startCapture(t, testConfig(t, cli, store))
	third := run.waitChains(t, 1)[0].Manifest
	newest := put("/g/0")
	run.waitStored(t, newest)
	run.stop()
	if third.Gap == nil || third.Gap.From != last3+1 || third.Reason != ReasonLostHistory {
		t.Fatalf("third chain %+v: want a gap from %d", third, last3+1)
	}

	cat := must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	rs, gs := cat.Ranges(), cat.Gaps()
	if len(cat.Chains) != 3 || len(rs) != 3 || len(gs) != 2 ||
		rs[0].First != base1 || rs[0].Last != last1 || rs[1].First != second.BaseRevision || rs[1].Last != last3 || rs[2].Last != newest {
		t.Fatalf("chains %d, ranges %v, gaps %v", len(cat.Chains), rs, gs)
	}

	// A restore into a gap is refused before anything starts, naming what is restorable.
	for _, rev := range []int64{last1 + 1, compactAt - 1, last3 + 2, newest + 1, base1 - 1} {
		_, err := RestoreTo(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID, Target: Target{Revision: rev},
			EtcdBinary: "/nonexistent/etcd", WorkDir: t.TempDir(), OutputSnapshot: filepath.Join(t.TempDir(), "x.db")})
		var nr *NotRestorableError
		if !errors.As(err, &nr) || !errors.Is(err, ErrNotRestorable) || len(nr.Ranges) != 3 {
			t.Fatalf("restore to revision %d: %v", rev, err)
		}
		for _, r := range rs {
			if !strings.Contains(err.Error(), fmt.Sprintf("revisions %d..%d", r.First, r.Last)) {
				t.Fatalf("restore to revision %d: %q does not name range %v", rev, err, r)
			}
		}
		if (rev == last1+1 || rev == last3+2) && nr.Gap == nil {
			t.Fatalf("restore to revision %d: the error does not name the gap: %v", rev, err)
		}
		t.Logf("refused: %v", err)
	}

	// The newest chain restores; its snapshot was taken after the source's compaction, so both report the
	// same compact revision and HashKV.
	_, dst, dstCli := restoreInto(t, store, Target{}, "restored")
	sameAsSource(t, src, cli, dst, dstCli, newest)
}

// quietLogger logs warnings and errors only: the restore's bbolt and etcdutl chatter would bury a
// failure.
func quietLogger(t testing.TB) *zap.Logger { return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)) }

// TestRotationLeavesNoGapAndIdleTimeIsCovered: chains rotate under writes without losing a revision (the
// old chain ends where the new one's snapshot is), a revision on the new chain restores to the source's
// state, and while the cluster is idle checkpoints extend the covered time, so that a time after the last
// write resolves to the newest revision.
func TestRotationLeavesNoGapAndIdleTimeIsCovered(t *testing.T) {
	src, cli := startSource(t)
	ctx := context.Background()
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store")}
	cfg := testConfig(t, cli, store)
	cfg.ChainInterval = 600 * time.Millisecond
	cfg.CheckpointInterval = 200 * time.Millisecond
	run := startCapture(t, cfg)
	run.waitChains(t, 1)
	var newest int64
	for i := 0; len(run.eventsOf(ChainStarted)) < 3; i++ {
		newest = must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/r/%02d", i%30), fmt.Sprint(i))).Header.Revision
		time.Sleep(2 * time.Millisecond)
	}
	run.waitStored(t, newest)
	written := time.Now()
	// Idle: checkpoints follow.
	waitFor(t, "a checkpoint", func() bool {
		for _, e := range run.eventsOf(SegmentWritten) {
			if e.Segment.Empty() && e.Segment.LastRevision == newest && e.Segment.CoveredUntil.After(written) {
				return true
			}
		}
		return false
	})
	run.stop()

	cat := must[*Catalog](t)(ReadCatalog(ctx, store, testPrefix, testUID))
	rs := cat.Ranges()
	if len(cat.Chains) < 3 || len(rs) != 1 || len(cat.Gaps()) != 0 || rs[0].Last < newest || len(cat.Problems) != 0 {
		t.Fatalf("%d chains, ranges %v, gaps %v, problems %v", len(cat.Chains), rs, cat.Gaps(), cat.Problems)
	}
	for i, c := range cat.Chains[1:] {
		prev := cat.Chains[i]
		if c.Manifest.Reason != ReasonRotation || c.Manifest.PreviousChain != prev.ID || prev.Newest() < c.Manifest.BaseRevision {
			t.Fatalf("chain %s (%s, after %s, base %d) does not continue chain %s (newest %d)", c.ID, c.Manifest.Reason, c.Manifest.PreviousChain, c.Manifest.BaseRevision, prev.ID, prev.Newest())
		}
	}
	if last := rs[0].LastTime; !last.After(written) {
		t.Fatalf("covered until %s, the last write was stored at %s", last, written)
	}
	plan := must[*RestorePlan](t)(PrepareRestore(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID,
		Target: Target{Time: rs[0].LastTime}, WorkDir: t.TempDir()}))
	plan.Close()
	if plan.Revision != newest || plan.ChainID != cat.Newest().ID {
		t.Fatalf("the covered end resolves to revision %d on chain %s, want %d on %s", plan.Revision, plan.ChainID, newest, cat.Newest().ID)
	}
	// The chains overlap at the second one's base: with its snapshot damaged, the first chain restores it.
	second := cat.Chains[1]
	snap := filepath.Join(store.Root, filepath.FromSlash(second.SnapshotKey))
	intact := must[[]byte](t)(os.ReadFile(snap))
	damaged := slices.Clone(intact)
	damaged[len(damaged)/2] ^= 1
	if err := os.WriteFile(snap, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	plan = must[*RestorePlan](t)(PrepareRestore(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID,
		Target: Target{Revision: second.Manifest.BaseRevision}, WorkDir: t.TempDir(), Logger: quietLogger(t)}))
	plan.Close()
	if plan.ChainID != cat.Chains[0].ID || len(plan.Problems) == 0 {
		t.Fatalf("revision %d restores from chain %s (problems %v), want the intact chain %s", second.Manifest.BaseRevision, plan.ChainID, plan.Problems, cat.Chains[0].ID)
	}
	if err := os.WriteFile(snap, intact, 0o600); err != nil {
		t.Fatal(err)
	}

	// A revision just after the second chain's base replays from that chain.
	rev := cat.Chains[1].Manifest.BaseRevision + 1
	res, dst, dstCli := restoreInto(t, store, Target{Revision: rev}, "restored")
	if res.ChainID != cat.Chains[1].ID {
		t.Fatalf("revision %d restored from chain %s, want %s", rev, res.ChainID, cat.Chains[1].ID)
	}
	sameAsSource(t, src, cli, dst, dstCli, rev)
}

// TestRestoreOfAClusterWithAuthentication: with authentication enabled at the source (the base snapshot
// holds it), the temporary member authenticates the replay by its client certificate, without the root
// password; the restored cluster keeps authentication and the password.
func TestRestoreOfAClusterWithAuthentication(t *testing.T) {
	src, open := startSource(t)
	ctx := context.Background()
	must[*clientv3.AuthUserAddResponse](t)(open.UserAdd(ctx, "root", "secret"))
	must[*clientv3.AuthUserGrantRoleResponse](t)(open.UserGrantRole(ctx, "root", "root"))
	must[*clientv3.AuthEnableResponse](t)(open.AuthEnable(ctx))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{src.ClientURL(0)}, Username: "root", Password: "secret", DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "store")}
	run := startCapture(t, testConfig(t, cli, store))
	run.waitChains(t, 1)
	lease := must[*clientv3.LeaseGrantResponse](t)(cli.Grant(ctx, 300))
	var newest int64
	for i := range 30 {
		newest = must[*clientv3.PutResponse](t)(cli.Put(ctx, fmt.Sprintf("/auth/%d", i%7), fmt.Sprint(i), clientv3.WithLease(lease.ID))).Header.Revision
	}
	run.waitStored(t, newest)
	run.stop()

	bin, _ := etcdtest.Binary()
	dst := etcdtest.New("restored", filepath.Join(t.TempDir(), "restored"), bin)
	t.Cleanup(dst.Close)
	res, err := RestoreTo(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID, EtcdBinary: bin, WorkDir: t.TempDir(),
		OutputSnapshot: filepath.Join(t.TempDir(), "restored.db"), Logger: quietLogger(t),
		Member: &MemberConfig{DataDir: dst.DataDir(0), Name: dst.MemberName(0), PeerURL: dst.PeerURL(0), InitialCluster: dst.InitialCluster([]int{0}), InitialClusterToken: dst.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != newest || res.LeasesGranted != 1 {
		t.Fatalf("restored revision %d with %d leases granted, want %d with 1", res.Revision, res.LeasesGranted, newest)
	}
	if err := dst.Start(0, dst.InitialCluster([]int{0}), "new"); err != nil {
		t.Fatal(err)
	}
	dstCli, err := clientv3.New(clientv3.Config{Endpoints: []string{dst.ClientURL(0)}, Username: "root", Password: "secret", DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dstCli.Close() })
	waitFor(t, "the restored cluster to serve", func() bool {
		_, err := dstCli.Get(ctx, "health")
		return err == nil
	})
	sameAsSource(t, src, cli, dst, dstCli, newest)
	if st := must[*clientv3.AuthStatusResponse](t)(dstCli.AuthStatus(ctx)); !st.Enabled {
		t.Fatal("the restored cluster has authentication disabled")
	}
}
