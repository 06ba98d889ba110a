package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/utils/ptr"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// snapshotOnClaim backs up a real one-member etcd holding n keys into a directory standing for the backup
// claim, and returns the claim's store and the backup.
func snapshotOnClaim(t *testing.T, n int) (*backup.DirStore, backup.Result) {
	t.Helper()
	src := etcdtest.StartStatic(t, "source", 1, nil)
	cli := src.Client(t, nil, 0)
	for i := range n {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/data/%04d", i), strings.Repeat("v", 100)); err != nil {
			t.Fatal(err)
		}
	}
	store := &backup.DirStore{Root: filepath.Join(t.TempDir(), "claim"), Claim: "old-backups"}
	res, err := backup.Run(context.Background(), quietTestLogger(t), store, backup.RunConfig{
		Endpoint: src.ClientURL(0), Namespace: "ns", Cluster: "source", Kind: backup.KindOnDemand, StagingDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, res
}

// startSnapshotServer runs `manager serve-snapshot`'s server on a local port until the test ends.
func startSnapshotServer(t *testing.T, srv *backup.SnapshotServer) string {
	t.Helper()
	if err := srv.Check(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveSnapshots(ctx, srv.Log, ln, srv) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// tamperingProxy forwards downloads from upstream and changes the body on the way with tamper, which gets
// the whole body and writes what the client receives.
func tamperingProxy(t *testing.T, upstream string, tamper func(w http.ResponseWriter, body []byte)) string {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.Path, nil)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		tamper(w, body)
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// TestServeSnapshotToRestoringMembers: members download the restore's snapshot from the server of the claim
// and restore it; a wrong or missing token, another key, or bytes lost or changed on the way are refused
// with a clear error, and nothing is restored then. The token never reaches the server's log.
func TestServeSnapshotToRestoringMembers(t *testing.T) {
	store, res := snapshotOnClaim(t, 300)
	const token = "s3cr3t-t0k3n-of-the-cluster"
	ctx := context.Background()

	// Other snapshots on the claim: another backup, and the restore's one cut on a sector boundary (still
	// the shape of a snapshot: only the sha256 check of the downloaded file can tell).
	good, err := os.ReadFile(filepath.Join(store.Root, res.Key))
	if err != nil {
		t.Fatal(err)
	}
	other := "ns/source/on-demand/other.db"
	cut := "ns/source/on-demand/cut.db"
	for key, content := range map[string][]byte{other: good, cut: good[:len(good)-512]} {
		if err := os.WriteFile(filepath.Join(store.Root, key), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zap.DebugLevel)
	url := startSnapshotServer(t, &backup.SnapshotServer{Store: store, Keys: []string{res.Key, cut}, Token: token, Log: zap.New(core)})

	t.Run("restored by the restore step, and etcd starts on it", func(t *testing.T) {
		bin, err := etcdtest.Binary()
		if err != nil {
			t.Fatal(err)
		}
		r := etcdtest.New("restored", filepath.Join(t.TempDir(), "restored"), bin)
		t.Cleanup(r.Close)
		// The restore step's environment: etcd's own configuration, and the token from the Secret.
		env := map[string]string{
			"ETCD_DATA_DIR": r.DataDir(0), "ETCD_NAME": r.MemberName(0), "ETCD_INITIAL_ADVERTISE_PEER_URLS": r.PeerURL(0),
			"ETCD_INITIAL_CLUSTER": r.InitialCluster([]int{0}), "ETCD_INITIAL_CLUSTER_TOKEN": r.Name,
			"ETCD_INITIAL_CLUSTER_STATE": "new", backup.SnapshotTokenEnv: token,
		}
		for k, v := range env {
			t.Setenv(k, v)
		}
		code := runRestore([]string{"--key=" + res.Key, "--pvc-claim=old-backups", "--snapshot-server=" + url})
		for k := range env {
			_ = os.Unsetenv(k) // the etcd started below gets its configuration from flags
		}
		if code != 0 {
			t.Fatalf("restore exited %d", code)
		}
		if err := r.Start(0, r.InitialCluster([]int{0}), "new"); err != nil {
			t.Fatal(err)
		}
		got, err := r.Client(t, nil, 0).Get(ctx, "/data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != 300 || got.Header.Revision != res.Revision {
			t.Fatalf("restored member has %d keys at revision %d, want 300 at %d", got.Count, got.Header.Revision, res.Revision)
		}
	})

	for _, tc := range []struct {
		name    string
		url     func() string
		token   *string
		key     string
		wantErr error
		wantMsg string
	}{
		{name: "wrong token", token: ptr.To("not-the-token"), wantErr: backup.ErrTokenRefused, wantMsg: "403"},
		{name: "no token", token: ptr.To(""), wantErr: backup.ErrTokenRefused, wantMsg: "401"},
		{name: "a key the server does not serve", key: other, wantErr: backup.ErrNotServed, wantMsg: "404"},
		{name: "a key that is not on the claim", key: "ns/source/on-demand/missing.db", wantErr: backup.ErrNotServed, wantMsg: "404"},
		{name: "snapshot truncated on the claim", key: cut, wantErr: backup.ErrCorrupt, wantMsg: "sha256"},
		{name: "connection cut halfway", url: func() string {
			return tamperingProxy(t, url, func(w http.ResponseWriter, body []byte) {
				_, _ = w.Write(body[:len(body)/2])
				panic(http.ErrAbortHandler) // the connection closes before the announced length
			})
		}, wantErr: backup.ErrIncomplete, wantMsg: fmt.Sprintf("of %d bytes", len(good))},
		{name: "download stalls halfway", url: func() string {
			return tamperingProxy(t, url, func(w http.ResponseWriter, body []byte) {
				_, _ = w.Write(body[:len(body)/2])
				w.(http.Flusher).Flush()
				time.Sleep(3 * time.Second) // then nothing more, the connection still open
				panic(http.ErrAbortHandler)
			})
		}, wantErr: backup.ErrIncomplete, wantMsg: "no data for 500ms"},
		{name: "one byte changed on the way", url: func() string {
			return tamperingProxy(t, url, func(w http.ResponseWriter, body []byte) {
				body[len(body)/2] ^= 0xff
				_, _ = w.Write(body)
			})
		}, wantErr: backup.ErrCorrupt, wantMsg: "sha256"},
		{name: "trailer changed on the way", url: func() string {
			return tamperingProxy(t, url, func(w http.ResponseWriter, body []byte) {
				body[len(body)-1] ^= 0xff
				_, _ = w.Write(body)
			})
		}, wantErr: backup.ErrCorrupt, wantMsg: "served file ends with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, key, tok := url, res.Key, token
			if tc.url != nil {
				u = tc.url()
			}
			if tc.key != "" {
				key = tc.key
			}
			if tc.token != nil {
				tok = *tc.token
			}
			dataDir := filepath.Join(t.TempDir(), "data")
			store := &backup.HTTPStore{URL: u, Token: tok, Claim: "old-backups", StallTimeout: 500 * time.Millisecond}
			got, err := backup.Restore(ctx, quietTestLogger(t), store, backup.RestoreConfig{
				Key: key, DataDir: dataDir, Name: "m-0", PeerURL: "http://127.0.0.1:2380",
				InitialCluster: "m-0=http://127.0.0.1:2380", InitialClusterToken: "m",
			})
			if !errors.Is(err, tc.wantErr) || got.Restored || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("restored=%v err=%v, want %v mentioning %q", got.Restored, err, tc.wantErr, tc.wantMsg)
			}
			t.Logf("refused: %v", err)
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused download left a data directory behind: %v", err)
			}
		})
	}

	t.Run("a server that does not answer is retried, then given up on", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String()
		_ = ln.Close()
		start := time.Now()
		err = (&backup.HTTPStore{URL: closed, Token: token, Wait: 2500 * time.Millisecond}).Get(ctx, res.Key, filepath.Join(t.TempDir(), "s.db"))
		if err == nil || !strings.Contains(err.Error(), "did not serve") || time.Since(start) < time.Second {
			t.Fatalf("after %s: %v, want a retried failure", time.Since(start), err)
		}
	})

	t.Run("a server for a snapshot not on its claim refuses to start", func(t *testing.T) {
		for _, key := range []string{"ns/source/on-demand/missing.db", "ns/source/on-demand/short.db"} {
			if key == "ns/source/on-demand/short.db" {
				if err := os.WriteFile(filepath.Join(store.Root, key), good[:len(good)/3], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := (&backup.SnapshotServer{Store: store, Keys: []string{key}, Token: token}).Check()
			if err == nil || !strings.Contains(err.Error(), "pvc://old-backups/"+key) {
				t.Fatalf("check of %s: %v", key, err)
			}
		}
	})

	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), token) {
			t.Fatalf("the server logged the token: %s %v", e.Message, e.ContextMap())
		}
	}
	if logs.FilterMessage("snapshot served").Len() == 0 || logs.FilterMessage("request with a wrong token refused").Len() == 0 {
		t.Fatalf("the server's log lacks the download or the refusal: %v", logs.All())
	}
}
