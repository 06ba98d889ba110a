package framework

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// Writer writes sequential keys to a cluster while a spec disrupts it, and records every write etcd
// acknowledged: StopAndVerify then proves that none of them was lost.
type Writer struct {
	f      *Framework
	cli    *clientv3.Client
	prefix string
	stop   chan struct{}
	done   chan struct{}
	// stopOnce: Stop may be called before StopAndVerify.
	stopOnce sync.Once

	mu     sync.Mutex
	acked  []string
	failed int
	// lastAck and longestGap: the time between two acknowledged writes, at its longest (how long clients
	// saw no progress).
	lastAck    time.Time
	longestGap time.Duration
}

// StartWriter starts writing keys prefix/00000000, prefix/00000001, ... (value "v"+key) through
// EtcdClient, pausing WritePause after each acknowledged write and 200 ms after a failed one.
func (f *Framework) StartWriter(c *etcdv1beta1.EtcdCluster, prefix string) *Writer {
	w := &Writer{f: f, cli: f.etcdClient(c), prefix: prefix, stop: make(chan struct{}), done: make(chan struct{})}
	pause := f.WritePause
	if pause <= 0 {
		pause = 10 * time.Millisecond
	}
	go func() {
		defer ginkgo.GinkgoRecover()
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s/%08d", w.prefix, i)
			wctx, cancel := context.WithTimeout(f.Ctx, 5*time.Second)
			_, err := w.cli.Put(wctx, key, "v"+key)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
				now := time.Now()
				if !w.lastAck.IsZero() && now.Sub(w.lastAck) > w.longestGap {
					w.longestGap = now.Sub(w.lastAck)
				}
				w.lastAck = now
			} else {
				w.failed++
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			} else {
				time.Sleep(pause)
			}
		}
	}()
	return w
}

func (f *Framework) etcdClient(c *etcdv1beta1.EtcdCluster) *clientv3.Client {
	if f.EtcdClient != nil {
		return f.EtcdClient(c)
	}
	return f.ClusterClient(c)
}

// AckedCount is the number of acknowledged writes so far.
func (w *Writer) AckedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Counts are the acknowledged and the failed writes so far, read together (availability is their ratio).
func (w *Writer) Counts() (acked, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), w.failed
}

// LongestGap is the longest time so far between two acknowledged writes.
func (w *Writer) LongestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longestGap
}

// WaitProgress waits until n more writes have been acknowledged.
func (w *Writer) WaitProgress(n int, timeout time.Duration) {
	target := w.AckedCount() + n
	gomega.EventuallyWithOffset(1, w.AckedCount).WithTimeout(timeout).WithPolling(200*time.Millisecond).
		Should(gomega.BeNumerically(">=", target), "the writer makes no progress")
}

// StopAndVerify stops the writer and checks, through a new client, that every acknowledged key is
// readable with its value.
func (w *Writer) StopAndVerify(c *etcdv1beta1.EtcdCluster) {
	w.Stop()
	w.Verify(c)
}

// Stop stops the writer: no write is in flight once it returns.
func (w *Writer) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
		_ = w.cli.Close()
	})
}

// Verify checks, through a new client, that every write the stopped writer saw acknowledged is readable
// with its value.
func (w *Writer) Verify(c *etcdv1beta1.EtcdCluster) {
	w.mu.Lock()
	acked, failed := slices.Clone(w.acked), w.failed
	w.mu.Unlock()
	summary := fmt.Sprintf("%d writes acknowledged, %d failed", len(acked), failed)
	ginkgo.AddReportEntry("writer "+w.prefix, summary)
	ginkgo.GinkgoWriter.Printf("writer %s: %s\n", w.prefix, summary)
	gomega.ExpectWithOffset(1, len(acked)).To(gomega.BeNumerically(">", 20), "too few acknowledged writes to prove anything")

	cli := w.f.etcdClient(c)
	defer func() { _ = cli.Close() }()
	var got map[string]string
	gomega.EventuallyWithOffset(1, func() error {
		rctx, cancel := context.WithTimeout(w.f.Ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, w.prefix+"/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		got = make(map[string]string, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return nil
	}).WithTimeout(time.Minute).Should(gomega.Succeed())
	var lost []string
	for _, k := range acked {
		if got[k] != "v"+k {
			lost = append(lost, k)
		}
	}
	gomega.ExpectWithOffset(1, lost).To(gomega.BeEmpty(), "%d of %d acknowledged writes are lost", len(lost), len(acked))
}
