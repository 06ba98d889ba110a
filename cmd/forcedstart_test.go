package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// memberPod plays one member pod with real etcd: the environment its containers read (the members'
// configuration, then the container's own variables, as the kubelet resolves them at each start) and its own
// ticket volume, which lives as long as the pod.
type memberPod struct {
	c       *etcdtest.Cluster
	i       int
	uid     string
	tickets string
}

func newMemberPod(t *testing.T, c *etcdtest.Cluster, i int, uid string) *memberPod {
	return &memberPod{c: c, i: i, uid: uid, tickets: t.TempDir()}
}

func (p *memberPod) environ(config map[string]string) map[string]string {
	e := map[string]string{}
	for k, v := range config {
		e[k] = v
	}
	e["ETCD_NAME"], e["ETCD_DATA_DIR"] = p.c.MemberName(p.i), p.c.DataDir(p.i)
	e["ETCD_INITIAL_ADVERTISE_PEER_URLS"], e[membergate.EnvPodUID] = p.c.PeerURL(p.i), p.uid
	return e
}

// gate runs the pod's member gate (only when the pod starts) and reports its exit code.
func (p *memberPod) gate(t *testing.T, config map[string]string) int {
	t.Helper()
	e := p.environ(config)
	return memberGate(func(k string) string { return e[k] }, filepath.Join(t.TempDir(), "termination-log"), 50*time.Millisecond, p.tickets, zap.NewNop())
}

// startEtcd starts the pod's etcd container through its entry (membergate.EtcdStart) with the configuration
// as it is now, and reports whether the start forces a new cluster.
func (p *memberPod) startEtcd(t *testing.T, config map[string]string) bool {
	t.Helper()
	var environ []string
	for k, v := range p.environ(config) {
		environ = append(environ, k+"="+v)
	}
	environ, forced, err := membergate.EtcdStart(environ, p.tickets)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "ETCD_NAME", "ETCD_DATA_DIR", "ETCD_LISTEN_PEER_URLS", "ETCD_LISTEN_CLIENT_URLS", "ETCD_LISTEN_METRICS_URLS",
			"ETCD_INITIAL_ADVERTISE_PEER_URLS", "ETCD_ADVERTISE_CLIENT_URLS", "ETCD_INITIAL_CLUSTER", "ETCD_INITIAL_CLUSTER_STATE",
			"ETCD_INITIAL_CLUSTER_TOKEN":
			// Set as flags, to the same values but each member's own ports on one host (etcd refuses both).
		default:
			env[k] = v
		}
	}
	if err := p.c.StartWithEnv(p.i, config["ETCD_INITIAL_CLUSTER"], config["ETCD_INITIAL_CLUSTER_STATE"], env); err != nil {
		t.Fatal(err)
	}
	return forced
}

// TestForcedStartReachesOnlyTheNamedMember: of 5 members, 3 lost their claims; 0 and 1 still run. The
// operator names member 0 to start alone (FromSurvivor) and replaces its pod. Member 1's pod passed its
// gate long ago; its etcd exits (member 0, alone, no longer lists it) and the kubelet restarts the
// container, not the gate, with the configuration as it is now, instruction included. It must not come up
// as a second one-member cluster; and the forced member's own etcd, restarted while the instruction still
// stands, must not force again.
func TestForcedStartReachesOnlyTheNamedMember(t *testing.T) {
	c := etcdtest.NewForTest(t, "forced")
	c.StartNew(t, 5)
	cli := c.Client(t, nil, 0, 1, 2, 3, 4)
	ctx := context.Background()
	const keys = 20
	for i := range keys {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[int]uint64{}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		for i := range 5 {
			if m.Name == c.MemberName(i) {
				ids[i] = m.ID
			}
		}
	}
	// Let every member apply every write, then lose the majority's claims.
	time.Sleep(time.Second)
	for _, i := range []int{2, 3, 4} {
		c.Stop(i)
		if err := c.Wipe(i); err != nil {
			t.Fatal(err)
		}
	}
	pod1 := newMemberPod(t, c, 1, "pod-1") // running since before the instruction

	// The configuration the operator writes before it deletes member 0's pod (forceConfig).
	cluster := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "forced", Namespace: "ns", UID: "u"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", StorageSize: resource.MustParse("1Gi"), TLS: etcdv1beta1.TLSSpec{Enabled: new(bool)}}}
	config := resources.ConfigMap(cluster, resources.MemberConfig{InitialCluster: c.InitialCluster([]int{0}),
		InitialClusterState: membership.StateExisting,
		ForceNewCluster:     &membership.ForceNewCluster{Member: c.MemberName(0), OldPod: "pod-0-old"}}).Data
	for k := range config {
		if strings.EqualFold(k, membergate.EnvForceNewCluster) {
			t.Fatalf("the members' configuration has %s: every member's etcd reads it at every start", k)
		}
	}

	// Member 0's new pod: its gate passes, and its etcd forces once.
	c.Stop(0)
	pod0 := newMemberPod(t, c, 0, "pod-0-new")
	if code := pod0.gate(t, config); code != 0 {
		t.Fatalf("gate of the forced member's new pod: exit %d, want 0", code)
	}
	if !pod0.startEtcd(t, config) {
		t.Fatal("the forced member's etcd started without --force-new-cluster")
	}
	alone := c.Client(t, nil, 0)
	onlyMember0 := func() {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := alone.MemberList(rctx)
		if err != nil || len(resp.Members) != 1 || resp.Members[0].ID != ids[0] {
			t.Fatalf("member 0's member list: %v, %v; want member 0 (%x) alone", resp, err, ids[0])
		}
		got, err := alone.Get(rctx, "k", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || got.Count != keys {
			t.Fatalf("member 0 holds %v keys (%v); want %d", got, err, keys)
		}
	}
	onlyMember0()

	// Member 1's etcd exits once it learns it was removed, or the kubelet kills it (liveness, OOM): the
	// container restarts with the configuration as it is now, and no gate runs.
	deadline := time.Now().Add(30 * time.Second)
	for c.Running(1) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	c.Stop(1)
	for restart := range 2 {
		if pod1.startEtcd(t, config) {
			t.Fatalf("restart %d of member 1's etcd: started with --force-new-cluster while member 0 is forced", restart)
		}
		notAlone(t, c, 1, ids[1], 10*time.Second)
		c.Stop(1)
	}

	// Member 0's own container restarts while the instruction stands: its ticket was consumed.
	c.Stop(0)
	if pod0.startEtcd(t, config) {
		t.Fatal("a restart of the forced member's etcd forced again")
	}
	alone = c.Client(t, nil, 0)
	onlyMember0()
}

// notAlone fails the test if member i, for the time given, answers as the leader of a cluster of its own
// (one member, itself): that is a second cluster beside the recovered one, under the same cluster ID.
func notAlone(t *testing.T, c *etcdtest.Cluster, i int, id uint64, d time.Duration) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL(i)}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, serr := cli.Status(ctx, c.ClientURL(i))
		list, lerr := cli.MemberList(ctx)
		cancel()
		if serr == nil && st.Leader == id {
			t.Fatalf("member %d (%x) leads a cluster of its own: %+v\n%s", i, id, st, c.Log(i))
		}
		if lerr == nil && len(list.Members) == 1 && list.Members[0].ID == id {
			t.Fatalf("member %d (%x) answers as a one-member cluster\n%s", i, id, c.Log(i))
		}
	}
}
