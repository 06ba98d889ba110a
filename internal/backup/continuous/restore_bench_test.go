package continuous

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// BenchmarkPointInTimeRestore measures the restore time of a large database plus minutes of changes, the
// way the product restores it, against real etcd: a database filled to BENCH_RESTORE_DB_MIB MiB (default
// 1024) of 256 KiB values, captured by a Capturer with the agent's defaults while a writer makes
// BENCH_RESTORE_WRITES_PER_SEC (default 100) puts, deletes and transactions per second for
// BENCH_RESTORE_CHANGE_MINUTES minutes (default 2). Then, for the newest revision, one in the middle and
// the base snapshot's (what costs the same whatever the changes), it times the point-in-time Job's work
// (RestoreTo and storing its snapshot), a member's restore step (backup.Restore) and etcd started on the
// result until it serves. A restored HashKV other than the source's fails it; no figure does.
// `make bench-restore` runs it once.
func BenchmarkPointInTimeRestore(b *testing.B) {
	mib, minutes, rate := envNumber(b, "BENCH_RESTORE_DB_MIB", 1024), envNumber(b, "BENCH_RESTORE_CHANGE_MINUTES", 2),
		envNumber(b, "BENCH_RESTORE_WRITES_PER_SEC", 100)
	bin, err := etcdtest.Binary()
	if err != nil {
		b.Fatal(err)
	}
	src, cli := startSource(b)
	ctx := context.Background()

	start := time.Now()
	values, err := etcdtest.Fill(ctx, cli, "/base/", int64(mib*(1<<20)), 256<<10)
	if err != nil {
		b.Fatal(err)
	}
	fill := time.Since(start)
	status, err := cli.Status(ctx, src.ClientURL(0))
	if err != nil {
		b.Fatal(err)
	}

	store := &backup.DirStore{Root: filepath.Join(b.TempDir(), "store"), Claim: "backups"}
	start = time.Now()
	run := startCapture(b, Config{Client: cli, Store: store, Prefix: testPrefix, ClusterUID: testUID, StagingDir: b.TempDir(), Logger: zap.NewNop()})
	// The full snapshot of a large database takes longer than waitChains allows.
	waitWithin(b, 30*time.Minute, "the chain's full snapshot", func() bool { return len(run.eventsOf(ChainStarted)) > 0 })
	snapshotTook := time.Since(start)
	base := run.eventsOf(ChainStarted)[0].Manifest.BaseRevision
	newest, writes := writeChanges(ctx, b, cli, time.Duration(minutes*float64(time.Minute)), rate)
	run.waitStored(b, newest)
	run.stop()
	var segBytes int64
	segments := run.eventsOf(SegmentWritten)
	for _, e := range segments {
		segBytes += e.SegmentBytes
	}

	b.ReportMetric(float64(status.DbSize)/(1<<20), "db-MiB")
	b.ReportMetric(float64(newest-base), "revisions")
	fmt.Printf("\npoint-in-time restore: %.0f MiB database (dbSize %.0f MiB, %d values of 256 KiB, filled in %s) + %.1f min of changes\n",
		mib, float64(status.DbSize)/(1<<20), values, fill.Round(time.Millisecond), minutes)
	fmt.Printf("capture: full snapshot stored in %s; %d writes (%.0f/s, %.0f/s asked) made %d revisions (%d..%d) in %d segments of %.2f MiB (%.0f bytes/revision)\n\n",
		snapshotTook.Round(time.Millisecond), writes, float64(writes)/(minutes*60), rate, newest-base, base+1, newest, len(segments), float64(segBytes)/(1<<20), float64(segBytes)/float64(newest-base))
	fmt.Println("| target | revisions replayed | replay Job | of it, the replay | member restore | etcd serving | total | replay RSS (anonymous) | temporary etcd RSS (anonymous) | HashKV |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, tg := range []struct {
		name string
		rev  int64
	}{{"newest", newest}, {"middle", (base + newest) / 2}, {"base", base}} {
		r := timeRestore(b, store, bin, tg.rev)
		want, err := cli.HashKV(ctx, src.ClientURL(0), tg.rev)
		if err != nil {
			b.Fatal(err)
		}
		// The product's proof: the restored cluster hashes its key history at the target as the source does.
		if r.hash != want.Hash || r.compactRevision != want.CompactRevision || r.replayHash != want.Hash {
			b.Fatalf("%s (revision %d): restored HashKV %d (compacted at %d; the replay reported %d), source %d (compacted at %d)",
				tg.name, tg.rev, r.hash, r.compactRevision, r.replayHash, want.Hash, want.CompactRevision)
		}
		total := r.replay + r.memberRestore + r.serving
		fmt.Printf("| %s (%d) | %d | %s | %s | %s | %s | %s | %s | %s | %d = source |\n", tg.name, tg.rev, r.replayed,
			seconds(r.replay), seconds(r.replayOnly), seconds(r.memberRestore), seconds(r.serving), seconds(total), r.replayMemory, r.memberMemory, r.hash)
		b.ReportMetric(total.Seconds(), tg.name+"-total-s")
	}
	fmt.Printf("\nload: %s (1/5/15 min)\n", loadAverage())
}

// restoreTimes is one restore, timed in the product's steps.
type restoreTimes struct {
	// replay is the point-in-time Job: verify, replay into a temporary member, snapshot it, store that.
	replay time.Duration
	// replayOnly is RestoreTo's own measure: the base snapshot restored into the temporary member, its
	// start, the replay and its verified snapshot (the rest: downloading and verifying the chain, storing
	// the result).
	replayOnly time.Duration
	// memberRestore is a member's restore step from the stored snapshot; serving, etcd's start on it
	// until it serves a linearizable read.
	memberRestore, serving time.Duration
	replayed               int64
	// replayMemory is this process's peak resident memory during the replay Job, memberMemory the
	// temporary etcd's.
	replayMemory, memberMemory memory
	replayHash, hash           uint32
	compactRevision            int64
}

// timeRestore restores rev as the product does and removes what it made on disk (a large database is
// several copies of it: the downloaded base, the temporary member, the snapshots, the new member).
func timeRestore(b *testing.B, store *backup.DirStore, bin string, rev int64) restoreTimes {
	ctx := context.Background()
	dir, err := os.MkdirTemp(b.TempDir(), "restore-")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var t restoreTimes
	stopSampling := sampleMemory(memberName)
	start := time.Now()
	out := filepath.Join(dir, "restored.db")
	res, err := RestoreTo(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID, Target: Target{Revision: rev},
		EtcdBinary: bin, WorkDir: filepath.Join(dir, "work"), OutputSnapshot: out, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	key := fmt.Sprintf("bench/restored/point-in-time/restored-%d.db", rev)
	if err := store.Put(ctx, key, out, map[string]string{"etcd-revision": strconv.FormatInt(rev, 10)}); err != nil {
		b.Fatal(err)
	}
	t.replay = time.Since(start)
	t.replayMemory, t.memberMemory = stopSampling()
	t.replayOnly, t.replayed, t.replayHash = res.Duration, res.Revisions, res.Hash
	_ = os.Remove(out)
	defer func() { _ = store.Delete(ctx, key) }()

	m := etcdtest.New("restored", filepath.Join(dir, "member"), bin)
	defer m.Close()
	start = time.Now()
	if _, err := backup.Restore(ctx, zap.NewNop(), store, backup.RestoreConfig{Key: key, DataDir: m.DataDir(0), Name: m.MemberName(0),
		PeerURL: m.PeerURL(0), InitialCluster: m.InitialCluster([]int{0}), InitialClusterToken: m.Name}); err != nil {
		b.Fatal(err)
	}
	t.memberRestore = time.Since(start)
	start = time.Now()
	if err := m.Start(0, m.InitialCluster([]int{0}), "new"); err != nil {
		b.Fatal(err)
	}
	mcli := m.Client(b, nil, 0)
	t.serving = time.Since(start)
	h, err := mcli.HashKV(ctx, m.ClientURL(0), rev)
	if err != nil {
		b.Fatal(err)
	}
	t.hash, t.compactRevision = h.Hash, h.CompactRevision
	return t
}

// writeChanges writes at a steady rate for d, one request at a time: 1 KiB puts over 10,000 keys,
// deletes (one of a missing key makes no revision) and transactions of two puts and a delete. It returns
// the newest revision and the writes made.
func writeChanges(ctx context.Context, b *testing.B, cli *clientv3.Client, d time.Duration, perSecond float64) (int64, int) {
	value := strings.Repeat("v", 1<<10)
	key := func(i int) string { return fmt.Sprintf("/changes/%05d", i%10000) }
	tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
	defer tick.Stop()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		<-tick.C
		k := rand.IntN(10000)
		var op clientv3.Op
		switch n % 10 {
		case 7:
			op = clientv3.OpDelete(key(k))
		case 8, 9:
			op = clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut(key(k), value), clientv3.OpPut(key(k+1), value), clientv3.OpDelete(key(k + 2))}, nil)
		default:
			op = clientv3.OpPut(key(k), value)
		}
		if _, err := cli.Do(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
	// Nothing else writes: the cluster's revision is the newest change.
	r, err := cli.Get(ctx, "/changes/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return r.Header.Revision, n
}

// memory is a peak of resident memory: in all, and anonymous (the rest is mapped files, chiefly bbolt's
// database, which the kernel can drop and read again).
type memory struct{ rss, anon int64 }

func (m memory) String() string {
	return fmt.Sprintf("%.0f MiB (%.0f)", float64(m.rss)/(1<<20), float64(m.anon)/(1<<20))
}

// sampleMemory follows, until the returned function is called, the resident memory of this process and of
// the processes whose command line holds marker (the temporary member lives only inside RestoreTo), and
// returns the peaks of each.
func sampleMemory(marker string) func() (self, marked memory) {
	var self, marked memory
	done, stopped := make(chan struct{}), make(chan struct{})
	pid := strconv.Itoa(os.Getpid())
	peak := func(m *memory, status []byte) {
		rss, anon := statusKiB(status, "VmRSS:"), statusKiB(status, "RssAnon:")
		m.rss, m.anon = max(m.rss, rss<<10), max(m.anon, anon<<10)
	}
	go func() {
		defer close(stopped)
		for {
			if status, err := os.ReadFile("/proc/self/status"); err == nil {
				peak(&self, status)
			}
			cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, c := range cmdlines {
				dir := filepath.Dir(c)
				line, err := os.ReadFile(c)
				if err != nil || filepath.Base(dir) == pid || !bytes.Contains(line, []byte(marker)) {
					continue
				}
				if status, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
					peak(&marked, status)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() (memory, memory) { close(done); <-stopped; return self, marked }
}

// statusKiB is a field of /proc/<pid>/status in KiB (0 when absent).
func statusKiB(status []byte, field string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}

func envNumber(b *testing.B, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return f
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}
