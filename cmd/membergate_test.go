package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	tickets := t.TempDir()
	msgPath := filepath.Join(t.TempDir(), "termination-log")
	message := func() string {
		b, err := os.ReadFile(msgPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != 0 || !strings.HasPrefix(message(), "start: ") {
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
	code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop())
	if msg := message(); code != membergate.RefusalExitCode || !strings.HasPrefix(msg, membergate.RefusalMarker) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("stale data: exit %d, message %q; want %d and one line starting with %q", code, msg, membergate.RefusalExitCode, membergate.RefusalMarker)
	}

	// A quorum-loss recovery forces member m-0 to start alone: m-1's data waits, whatever the peers say.
	e[membergate.EnvForceNewClusterMember], e[membergate.EnvForceNewClusterOldPod], e[membergate.EnvPodUID] = "m-0", "old-pod", "new-pod"
	code = memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop())
	if msg := message(); code != membergate.HoldExitCode || !strings.HasPrefix(msg, membergate.HoldMarker) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("forced start of another member: exit %d, message %q; want %d and one line starting with %q", code, msg, membergate.HoldExitCode, membergate.HoldMarker)
	}
	noTicket := func(when string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(tickets, membergate.ForceTicketFile)); !os.IsNotExist(err) {
			t.Fatalf("%s: a forced start's ticket is in the pod's volume (%v)", when, err)
		}
	}
	noTicket("forced start of another member")
	// The pod the instruction was written against, or one that cannot tell its UID, holds too: the operator
	// replaces it.
	e[membergate.EnvForceNewClusterMember] = "m-1"
	for _, uid := range []string{"old-pod", ""} {
		e[membergate.EnvPodUID] = uid
		code = memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop())
		if msg := message(); code != membergate.HoldExitCode || !strings.HasPrefix(msg, membergate.HoldMarker) {
			t.Fatalf("forced start of this member in pod %q: exit %d, message %q; want %d", uid, code, msg, membergate.HoldExitCode)
		}
		noTicket("pod " + uid)
	}
	// The member forced to start alone, in its new pod, starts on its data at once, with a ticket for its
	// own etcd's next start, which that start consumes.
	e[membergate.EnvPodUID] = "new-pod"
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != 0 || !strings.Contains(message(), "--force-new-cluster") {
		t.Fatalf("forced start of this member: exit %d, message %q; want 0 and a start", code, message())
	}
	environ := []string{"ETCD_NAME=m-1", membergate.EnvPodUID + "=new-pod"}
	if env, forced, err := membergate.EtcdStart(environ, tickets); err != nil || !forced || !slices.Contains(env, membergate.EnvForceNewCluster+"=true") {
		t.Fatalf("etcd's first start in the pod: %v, forced %v, %v; want %s=true", env, forced, err, membergate.EnvForceNewCluster)
	}
	if env, forced, err := membergate.EtcdStart(append(environ, membergate.EnvForceNewCluster+"=true"), tickets); err != nil || forced ||
		slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, membergate.EnvForceNewCluster+"=") }) {
		t.Fatalf("etcd's second start in the pod: %v, forced %v, %v; want no %s (the ticket is consumed)", env, forced, err, membergate.EnvForceNewCluster)
	}
	// A gate that runs again and does not force takes back a ticket an earlier run left.
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != 0 {
		t.Fatalf("forced start again: exit %d, message %q", code, message())
	}
	e[membergate.EnvForceNewClusterMember] = "m-0"
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != membergate.HoldExitCode {
		t.Fatalf("forced start of another member: exit %d, message %q", code, message())
	}
	noTicket("a gate run after the instruction changed")
	// etcd's own setting in the members' configuration is refused: every member's etcd would read it.
	e[membergate.EnvForceNewCluster] = "true"
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != 1 {
		t.Fatalf("force in the configuration: exit %d, message %q; want 1", code, message())
	}
	for _, k := range []string{membergate.EnvForceNewCluster, membergate.EnvForceNewClusterMember, membergate.EnvForceNewClusterOldPod, membergate.EnvPodUID} {
		delete(e, k)
	}

	delete(e, "ETCD_DATA_DIR")
	if code := memberGate(getenv, msgPath, 10*time.Millisecond, tickets, zap.NewNop()); code != 1 || strings.HasPrefix(message(), membergate.RefusalMarker) {
		t.Fatalf("bad configuration: exit %d, message %q; want 1 and no refusal", code, message())
	}
}
