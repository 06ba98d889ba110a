//go:build bench

package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// defragMiB is the live data the defragmentation scenario leaves in each member's database, with as much
// again in free pages.
var defragMiB = framework.EnvInt("BENCH_DEFRAG_MIB", 512)

// TestNoSpace: a 3-member cluster with 64Mi volumes (a 25.6 MiB space quota) is filled until etcd raises
// NOSPACE and refuses writes; the time until a write succeeds again, with no one but the operator acting
// (it compacts, defragments each member in turn and disarms the alarm).
func TestNoSpace(t *testing.T) {
	gomega.RegisterTestingT(t)
	for range runs {
		c, done := startCluster(t, "nospace", etcdVersion, func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.StorageSize = resource.MustParse("64Mi")
		})
		cli := fw.ClusterClient(c)
		put := func(value string) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cli.Put(ctx, "/bench/space/overwritten", value)
			return err
		}
		big := strings.Repeat("x", 512<<10)
		for i := 0; ; i++ {
			err := put(big)
			if errors.Is(err, rpctypes.ErrNoSpace) {
				break
			}
			if err != nil || i > 500 {
				t.Fatalf("filling the quota: write %d: %v", i, err)
			}
		}
		start := time.Now()
		for put("writable again") != nil {
			if time.Since(start) > 5*time.Minute {
				t.Fatal("still refusing writes 5 min after NOSPACE")
			}
			time.Sleep(250 * time.Millisecond)
		}
		took := secs(time.Since(start))
		_ = cli.Close()
		done()
		record(t, "nospace", map[string]float64{"writable": took})
	}
}

// TestDefragment: each member's database holds defragMiB of data and as much again in free pages (written,
// half deleted, compacted); the operator's automatic defragmentation then shrinks the members one at a time
// while a writer keeps writing. Recorded: when each member's file shrank, counted from the compaction (the
// operator sees the free pages at its next look), the time per member, and the writer's longest wait for
// an acknowledgement (its worst unavailability) and failed writes over the whole run.
func TestDefragment(t *testing.T) {
	gomega.RegisterTestingT(t)
	for range runs {
		c, done := startCluster(t, "defrag", etcdVersion, func(c *etcdv1beta1.EtcdCluster) {
			// The file grows past the data it holds (bbolt grows it in steps of up to 1 GiB): a quota of
			// 2.5 times what is written leaves room for that.
			c.Spec.StorageSize = *resource.NewQuantity(int64(defragMiB)<<20*12, resource.BinarySI)
			c.Spec.Etcd.QuotaBackendSize = resource.NewQuantity(int64(defragMiB)<<20*5, resource.BinarySI)
			c.Spec.Defragmentation.FreePercent = ptr.To(int32(30))
		})
		cli := fw.ClusterClient(c)
		ctx := context.Background()
		value := strings.Repeat("x", 1<<20)
		var rev int64
		for i := range 2 * defragMiB {
			resp, err := cli.Put(ctx, fmt.Sprintf("/bench/defrag/%06d", i), value)
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			rev = resp.Header.Revision
		}
		for i := 0; i < 2*defragMiB; i += 2 {
			resp, err := cli.Delete(ctx, fmt.Sprintf("/bench/defrag/%06d", i))
			if err != nil {
				t.Fatalf("delete %d: %v", i, err)
			}
			rev = resp.Header.Revision
		}
		members := memberClients(t, c)
		full := dbSizes(members)
		t.Logf("database files before compaction (MiB): %v", full)

		w := startGapWriter(fw.ClusterClient(c), "/bench/defrag-writer")
		start := time.Now()
		if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		shrunk := map[string]float64{}
		for len(shrunk) < len(full) {
			if time.Since(start) > 15*time.Minute {
				t.Fatalf("members defragmented after 15 min: %v of %v", shrunk, full)
			}
			for name, size := range dbSizes(members) {
				if _, ok := shrunk[name]; !ok && size < full[name]*0.75 {
					shrunk[name] = secs(time.Since(start))
					t.Logf("%s shrank to %.0f MiB %.1f s after the compaction", name, size, shrunk[name])
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		longest, longestAt, failed, acked := w.stop()
		t.Logf("the writer's longest wait, %.1f s, ended %.1f s after the compaction", longest.Seconds(), longestAt.Sub(start).Seconds())
		_ = cli.Close()
		for _, m := range members {
			_ = m.Close()
		}
		done()
		var first, last float64
		for _, s := range shrunk {
			if first == 0 || s < first {
				first = s
			}
			last = max(last, s)
		}
		record(t, "defrag", map[string]float64{"dataMiB": float64(defragMiB), "fileMiB": maxOf(full),
			"firstShrunk": first, "allShrunk": last, "perMember": (last - first) / float64(len(full)-1),
			"writerLongestWait": longest.Seconds(), "writerFailed": float64(failed), "writerAcked": float64(acked)})
	}
}

// memberClients connects to each member pod by its IP (the cluster client goes through the Service, which
// picks a member per connection), keyed by pod name.
func memberClients(t *testing.T, c *etcdv1beta1.EtcdCluster) map[string]*clientv3.Client {
	t.Helper()
	pods, err := memberPods(c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*clientv3.Client{}
	for _, p := range pods {
		// Any name the server certificate carries verifies; the connection goes to the pod's IP.
		cli, err := fw.EtcdClientVia(c, c.Name+"-client."+c.Namespace+".svc", p.Status.PodIP, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = cli
	}
	return out
}

// dbSizes is each member's database file size in MiB, as the member itself reports it.
func dbSizes(members map[string]*clientv3.Client) map[string]float64 {
	out := map[string]float64{}
	for name, cli := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// A member busy defragmenting may not answer in time: it counts as not shrunk yet.
		if st, err := cli.Status(ctx, cli.Endpoints()[0]); err == nil {
			out[name] = float64(st.DbSize) / (1 << 20)
		} else {
			out[name] = 1 << 30
		}
		cancel()
	}
	return out
}

func maxOf(m map[string]float64) float64 {
	var out float64
	for _, v := range m {
		out = max(out, v)
	}
	return out
}

// gapWriter writes small values in a loop and keeps the longest time between two acknowledgements: the
// longest a client waited, whether its writes failed or were slow.
type gapWriter struct {
	cli  *clientv3.Client
	quit chan struct{}
	done chan struct{}

	mu            sync.Mutex
	longest       time.Duration
	longestAt     time.Time
	failed, acked int
	lastAck       time.Time
}

func startGapWriter(cli *clientv3.Client, key string) *gapWriter {
	w := &gapWriter{cli: cli, quit: make(chan struct{}), done: make(chan struct{}), lastAck: time.Now()}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cli.Put(ctx, key, fmt.Sprint(i))
			cancel()
			now := time.Now()
			w.mu.Lock()
			if err == nil {
				w.acked++
				if gap := now.Sub(w.lastAck); gap > w.longest {
					w.longest, w.longestAt = gap, now
				}
				w.lastAck = now
			} else {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// stop ends the writer and reports the longest wait (a wait still open counts) and when it ended, and the
// failed and acknowledged writes.
func (w *gapWriter) stop() (time.Duration, time.Time, int, int) {
	close(w.quit)
	<-w.done
	_ = w.cli.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if open := time.Since(w.lastAck); open > w.longest {
		return open, time.Now(), w.failed, w.acked
	}
	return w.longest, w.longestAt, w.failed, w.acked
}
