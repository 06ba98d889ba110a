package continuous

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// BenchmarkCaptureThroughput measures, against a real one-member etcd, the write rate the capture keeps up
// with and what it costs the writers: b.N puts of 256-byte values from 8 concurrent writers, first
// without a capture, then with one storing segments on a local directory. Run it once with a fixed count:
//
//	go test ./internal/backup/continuous/ -run '^$' -bench CaptureThroughput -benchtime 5000x
func BenchmarkCaptureThroughput(b *testing.B) {
	_, cli := startSource(b)
	ctx := context.Background()
	value := strings.Repeat("x", 256)
	const writers = 8
	// puts writes n keys and returns every put's latency, the newest revision and the time taken.
	puts := func(n int, prefix string) ([]time.Duration, int64, time.Duration) {
		lat := make([]time.Duration, n)
		var next, newest atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					t := time.Now()
					resp, err := cli.Put(ctx, fmt.Sprintf("%s/%06d", prefix, i%5000), value)
					if err != nil {
						b.Error(err)
						return
					}
					lat[i] = time.Since(t)
					for {
						old := newest.Load()
						if resp.Header.Revision <= old || newest.CompareAndSwap(old, resp.Header.Revision) {
							break
						}
					}
				}
			}()
		}
		wg.Wait()
		return lat, newest.Load(), time.Since(start)
	}
	quantile := func(lat []time.Duration, q float64) float64 {
		s := slices.Clone(lat)
		slices.Sort(s)
		return float64(s[int(q*float64(len(s)-1))].Microseconds())
	}

	n := b.N
	base, _, baseTook := puts(n, "/plain")

	store := &backup.DirStore{Root: filepath.Join(b.TempDir(), "store")}
	cfg := Config{Client: cli, Store: store, Prefix: testPrefix, ClusterUID: testUID, StagingDir: b.TempDir(), Logger: zap.NewNop(),
		FlushInterval: time.Second}
	run := startCapture(b, cfg)
	run.waitChains(b, 1)

	b.ResetTimer()
	start := time.Now()
	withCapture, newest, took := puts(n, "/captured")
	waitFor(b, "the capture to receive every revision", func() bool { return run.c.Status().ReceivedRevision >= newest })
	received := time.Since(start)
	run.waitStored(b, newest)
	stored := time.Since(start)
	b.StopTimer()
	run.stop()
	var segBytes, segRevs int64
	for _, e := range run.eventsOf(SegmentWritten) {
		segBytes += e.SegmentBytes
		segRevs += int64(e.Segment.Revisions)
	}

	// Catching up: history written while no capture ran is read as fast as the capture can.
	_, behind, _ := puts(n, "/behind")
	start = time.Now()
	run = startCapture(b, cfg)
	run.waitStored(b, behind)
	catchUp := time.Since(start)
	run.stop()
	if len(run.eventsOf(ChainResumed)) != 1 {
		b.Fatal("the capture did not resume its chain")
	}

	b.ReportMetric(float64(n)/baseTook.Seconds(), "writes/s-alone")
	b.ReportMetric(float64(n)/took.Seconds(), "writes/s-captured")
	b.ReportMetric(float64(n)/received.Seconds(), "captured-revs/s")
	b.ReportMetric(float64((received - took).Milliseconds()), "receive-lag-ms")
	b.ReportMetric(float64((stored - took).Milliseconds()), "store-lag-ms")
	b.ReportMetric(quantile(base, 0.5), "put-p50-us-alone")
	b.ReportMetric(quantile(withCapture, 0.5), "put-p50-us-captured")
	b.ReportMetric(quantile(base, 0.99), "put-p99-us-alone")
	b.ReportMetric(quantile(withCapture, 0.99), "put-p99-us-captured")
	// Restoring the newest revision replays the whole chain.
	bin, err := etcdtest.Binary()
	if err != nil {
		b.Fatal(err)
	}
	res, err := RestoreTo(ctx, RestoreConfig{Store: store, Prefix: testPrefix, ClusterUID: testUID, EtcdBinary: bin,
		WorkDir: b.TempDir(), OutputSnapshot: filepath.Join(b.TempDir(), "restored.db"), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(res.Revisions)/res.Duration.Seconds(), "restore-revs/s")
	b.ReportMetric(float64(n)/catchUp.Seconds(), "catch-up-revs/s")
	if segRevs > 0 {
		b.ReportMetric(float64(segBytes)/float64(segRevs), "segment-bytes/rev")
	}
}
