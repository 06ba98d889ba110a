// Package load is the clientv3 load shared by the served-load benchmarks: tests/bench/served (members on
// localhost) and tests/bench/loadgen (the generator run in a pod on the node).
package load

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Op is one request: a client to send it on and a random source of the goroutine sending it.
type Op func(context.Context, *clientv3.Client, *mrand.Rand) error

// Key is the i-th key of the key space the benchmarks write and read.
func Key(i int) string { return fmt.Sprintf("bench/%08d", i) }

// Drive runs op from clients goroutines, spread over clis, for d: each as fast as it can, or, with rate,
// together at most rate requests per second (latency then counts from the request's turn). It returns the
// successful requests, the failed ones, the latencies of the successful ones and the time it took.
func Drive(ctx context.Context, clis []*clientv3.Client, clients int, d time.Duration, rate float64,
	op Op) (ops, errs int, lat []time.Duration, elapsed time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	var turns chan struct{}
	if rate > 0 {
		turns = make(chan struct{}, clients)
		done := make(chan struct{})
		defer close(done)
		go func() {
			// One turn per 1/rate: a ticker of a millisecond or more hands out the turns due since the last.
			period := max(time.Millisecond, time.Duration(float64(time.Second)/rate))
			t := time.NewTicker(period)
			defer t.Stop()
			given := 0
			for {
				select {
				case <-done:
					return
				case now := <-t.C:
					due := int(now.Sub(start).Seconds() * rate)
					for ; given < due; given++ {
						select {
						case turns <- struct{}{}:
						default: // every client is busy: the turn is lost
						}
					}
				}
			}
		}()
	}
	for g := range clients {
		wg.Go(func() {
			cli := clis[g%len(clis)]
			rng := mrand.New(mrand.NewPCG(uint64(g), uint64(start.UnixNano())))
			mine := make([]time.Duration, 0, 1<<14)
			var e int
			for time.Now().Before(end) {
				if turns != nil {
					select {
					case <-turns:
					case <-time.After(time.Until(end)):
						continue
					}
				}
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t := time.Now()
				err := op(rctx, cli, rng)
				cancel()
				if err != nil {
					e++
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += e
			mu.Unlock()
		})
	}
	wg.Wait()
	return len(lat), errs, lat, time.Since(start)
}

// Percentiles are latency percentiles in milliseconds.
type Percentiles struct {
	P50ms float64 `json:"p50ms"`
	P90ms float64 `json:"p90ms"`
	P99ms float64 `json:"p99ms"`
	Maxms float64 `json:"maxms"`
}

// Summarize sorts lat and reads its percentiles (nearest rank; all zero when lat is empty).
func Summarize(lat []time.Duration) Percentiles {
	slices.Sort(lat)
	pct := func(q float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	return Percentiles{P50ms: pct(0.50), P90ms: pct(0.90), P99ms: pct(0.99), Maxms: pct(1)}
}

// Median is the median of xs (0 when empty), xs left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
