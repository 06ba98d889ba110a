package membership_test

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAddPromoteLearner measures growing a healthy 3-member cluster by one member through the
// planner against real etcd: add as learner, start it, wait until caught up, promote. etcd itself refuses
// a membership change until every member has been connected for a few seconds, which dominates.
func BenchmarkAddPromoteLearner(b *testing.B) {
	benchMembership(b, 4, 3)
}

// BenchmarkRemoveMember measures shrinking a healthy 4-member cluster by one member (remove, then stop
// its pod), leadership moved away first when needed.
func BenchmarkRemoveMember(b *testing.B) {
	benchMembership(b, 3, 4)
}

func benchMembership(b *testing.B, to, from int) {
	ctx := context.Background()
	d, stop := newCluster(b, from)
	defer stop()
	var measured time.Duration
	for b.Loop() {
		b.StopTimer()
		d = d.restart(from, 0)
		d.converge(ctx, 2*time.Minute)
		b.StartTimer()
		start := time.Now()
		d = d.restart(to, 0)
		d.converge(ctx, 2*time.Minute)
		measured += time.Since(start)
	}
	b.ReportMetric(measured.Seconds()/float64(b.N), "s/change")
}
