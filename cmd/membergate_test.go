package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/seedops/etcd-operator/internal/membergate"
)

// TestMemberGateVerdicts checks what the operator reads back from the pod: the exit code and the
// termination message. (internal/membergate tests the decisions themselves against real etcd.)
func TestMemberGateVerdicts(t *testing.T) {
	// A peer whose member list lacks member 2.
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/members" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"id":1,"name":"m-0","peerURLs":["` + "http://" + r.Host + `"],"clientURLs":["http://127.0.0.1:2379"]}]`))
	}))
	defer peer.Close()
	dataDir := t.TempDir()
	e := map[string]string{
		"ETCD_DATA_DIR":                    dataDir,
		"ETCD_NAME":                        "m-1",
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": "http://127.0.0.1:1",
		"ETCD_INITIAL_CLUSTER":             "m-0=" + peer.URL + ",m-1=http://127.0.0.1:1",
		"ETCD_INITIAL_CLUSTER_STATE":       "new",
	}
	getenv := func(k string) string { return e[k] }
	msgPath := filepath.Join(t.TempDir(), "termination-log")
	message := func() string {
		b, err := os.ReadFile(msgPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if code := memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop()); code != 0 || !strings.HasPrefix(message(), "start: ") {
		t.Fatalf("bootstrap: exit %d, message %q; want 0 and a start", code, message())
	}

	// The data directory holds member 2, which the peer does not list.
	member, cluster := uint64(2), uint64(0)
	md, _ := proto.Marshal(&etcdserverpb.Metadata{NodeID: &member, ClusterID: &cluster})
	w, err := wal.Create(zap.NewNop(), membergate.WALDir(dataDir), md)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	code := memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop())
	if msg := message(); code != membergate.RefusalExitCode || !strings.HasPrefix(msg, membergate.RefusalMarker) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("stale data: exit %d, message %q; want %d and one line starting with %q", code, msg, membergate.RefusalExitCode, membergate.RefusalMarker)
	}

	// A quorum-loss recovery forces member m-0 to start alone: m-1's data waits, whatever the peers say.
	e[membergate.EnvForceNewCluster], e[membergate.EnvForceNewClusterMember] = "true", "m-0"
	code = memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop())
	if msg := message(); code != membergate.HoldExitCode || !strings.HasPrefix(msg, membergate.HoldMarker) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("forced start of another member: exit %d, message %q; want %d and one line starting with %q", code, msg, membergate.HoldExitCode, membergate.HoldMarker)
	}
	// The member forced to start alone starts on its data at once.
	e[membergate.EnvForceNewClusterMember] = "m-1"
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop()); code != 0 || !strings.Contains(message(), "--force-new-cluster") {
		t.Fatalf("forced start of this member: exit %d, message %q; want 0 and a start", code, message())
	}
	// The instruction without a member is unusable: which member forces is unknown.
	delete(e, membergate.EnvForceNewClusterMember)
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop()); code != 1 {
		t.Fatalf("force without a member: exit %d, message %q; want 1", code, message())
	}
	delete(e, membergate.EnvForceNewCluster)

	delete(e, "ETCD_DATA_DIR")
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, zap.NewNop()); code != 1 || strings.HasPrefix(message(), membergate.RefusalMarker) {
		t.Fatalf("bad configuration: exit %d, message %q; want 1 and no refusal", code, message())
	}
}
