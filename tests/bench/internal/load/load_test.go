package load

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	p := Summarize(lat)
	if p.P50ms != 51 || p.P90ms != 91 || p.P99ms != 100 || p.Maxms != 100 {
		t.Fatalf("percentiles of 1..100 ms: %+v", p)
	}
	if (Summarize(nil) != Percentiles{}) {
		t.Fatal("percentiles of nothing are not zero")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
