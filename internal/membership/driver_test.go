package membership_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
)

// driver plays the operator's controller and the Kubernetes side around Plan, against real etcd
// processes: the "StatefulSet" is the set of running processes, a "volume" is a data directory plus the
// annotations the controller would keep on its claim, and a "pod restart" restarts a process. Everything
// it keeps is what Kubernetes would persist; a new driver over the same cluster is a restarted operator.
type driver struct {
	t         testing.TB
	c         *etcdtest.Cluster
	state     *persisted
	desired   int
	calls     int // mutating calls made by this driver
	maxCalls  int // crash after this many calls (0: never)
	healAfter time.Duration
	// unprovisioned ordinals have no volume yet: their "pods" do not start (a slow volume provisioner).
	unprovisioned map[int]bool
	// maxLearners is how many learners every member accepts at once (the controller reads it from the
	// members' pods; here every process starts with the cluster's Env).
	maxLearners int
}

// persisted is what survives an operator crash: the StatefulSet size, the ConfigMap, claim annotations,
// which binary each "pod" started with, and the unhealthy-since times kept in status.
type persisted struct {
	replicas       int
	config         *membership.Config
	volumes        map[int]membership.Volume
	startedWith    map[int]string
	unhealthySince map[uint64]time.Time
	steps          []string // mutating steps, each once in the order attempted
	attempts       []membership.Action
	refused        []string // calls etcd refused (retried by the next step)
	// restartedLeader is set if a pod was restarted while its member led the cluster.
	restartedLeader bool
}

func newPersisted() *persisted {
	return &persisted{replicas: -1, volumes: map[int]membership.Volume{}, startedWith: map[int]string{}, unhealthySince: map[uint64]time.Time{}}
}

var dialer = etcd.NewDialer(3 * time.Second)

type etcdView struct {
	members   []etcd.Member
	statuses  map[uint64]etcd.EndpointStatus
	clusterID uint64
}

func (d *driver) dial(ctx context.Context, ords []int) (etcd.Client, error) {
	var eps []string
	for _, i := range ords {
		eps = append(eps, d.c.ClientURL(i))
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no running members")
	}
	return dialer.Dial(ctx, eps, nil)
}

func (d *driver) view(ctx context.Context) (etcdView, bool) {
	v := etcdView{statuses: map[uint64]etcd.EndpointStatus{}}
	cli, err := d.dial(ctx, d.c.Ordinals())
	if err != nil {
		return v, false
	}
	defer func() { _ = cli.Close() }()
	if v.members, err = cli.MemberList(ctx); err != nil {
		return v, false
	}
	if v.clusterID, err = cli.ClusterID(ctx); err != nil {
		return v, false
	}
	for _, m := range v.members {
		if len(m.ClientURLs) == 0 {
			continue
		}
		if st, err := cli.Status(ctx, m.ClientURLs[0]); err == nil {
			v.statuses[m.ID] = st
		}
	}
	return v, true
}

func (d *driver) ordinalOf(m etcd.Member) int {
	for i := range 16 {
		if len(m.PeerURLs) > 0 && m.PeerURLs[0] == d.c.PeerURL(i) && (m.Name == "" || m.Name == d.c.MemberName(i)) {
			return i
		}
	}
	return -1
}

func (d *driver) observe(ctx context.Context) (membership.Observed, etcdView) {
	v, reachable := d.view(ctx)
	o := membership.Observed{
		Desired: d.desired, StatefulSetReplicas: d.state.replicas, Formed: d.state.config != nil && d.state.config.State == "existing" || reachable,
		Reachable: reachable, Pods: map[int]membership.Pod{}, Volumes: map[int]membership.Volume{},
		Now: time.Now(), HealAfter: d.healAfter, TargetVersion: "next", MaxLearners: d.maxLearners,
	}
	// A pod is Ready when its member is healthy (readiness is etcd's own /health, set below).
	for _, i := range d.c.Ordinals() {
		o.Pods[i] = membership.Pod{UpToDate: d.state.startedWith[i] == d.c.Bin}
	}
	for i, vol := range d.state.volumes {
		o.Volumes[i] = vol
	}
	var leader uint64
	for _, st := range v.statuses {
		leader = max(leader, st.Leader)
	}
	peers := map[uint64][]string{}
	for _, m := range v.members {
		peers[m.ID] = m.PeerURLs
	}
	o.InitialClusterIntact = reachable && membergate.IsInitialCluster(v.clusterID, peers, d.c.Name)
	for _, m := range v.members {
		st, ok := v.statuses[m.ID]
		healthy := ok && len(st.Errors) == 0
		pm := membership.Member{ID: m.ID, Ordinal: d.ordinalOf(m), Name: m.Name, Learner: m.IsLearner,
			Started: len(m.ClientURLs) > 0, Healthy: healthy, Leader: m.ID == leader, Answered: ok, RaftIndex: st.RaftIndex, Version: st.Version}
		if !healthy {
			if _, seen := d.state.unhealthySince[m.ID]; !seen {
				d.state.unhealthySince[m.ID] = o.Now
			}
			pm.UnhealthySince = d.state.unhealthySince[m.ID]
		} else {
			delete(d.state.unhealthySince, m.ID)
		}
		if p, ok := o.Pods[pm.Ordinal]; ok {
			p.Ready = healthy && !m.IsLearner
			o.Pods[pm.Ordinal] = p
		}
		o.Members = append(o.Members, pm)
	}
	return o, v
}

var errCrash = fmt.Errorf("operator crashed")

// step runs one reconcile: observe, plan, apply the StatefulSet size and configuration, take the step.
func (d *driver) step(ctx context.Context) (membership.Decision, error) {
	o, v := d.observe(ctx)
	dec := membership.Plan(o)
	if dec.Config != nil {
		d.state.config = dec.Config
	}
	// Record which member's data each volume holds (the controller's recordVolumes).
	for _, m := range o.Members {
		if vol := d.state.volumes[m.Ordinal]; m.Ordinal >= 0 && m.Healthy && vol.MemberID == 0 && d.c.HasData(m.Ordinal) {
			vol.MemberID = m.ID
			d.state.volumes[m.Ordinal] = vol
		}
	}
	// The StatefulSet: run ordinals below the size, stop the rest (their volumes stay, as with Retain).
	d.state.replicas = dec.Replicas
	for _, i := range d.c.Ordinals() {
		if i >= dec.Replicas {
			d.c.Stop(i)
		}
	}
	for i := range dec.Replicas {
		if d.state.volumes[i].Deleting || d.unprovisioned[i] {
			continue // no claim to start on: being deleted, or not provisioned yet
		}
		if !d.c.Running(i) {
			cfg := d.c.InitialCluster(d.state.config.Ordinals())
			if err := d.c.Start(i, cfg, d.state.config.State); err != nil {
				return dec, err
			}
			d.state.startedWith[i] = d.c.Bin
		}
	}
	if dec.Action.Type == membership.ActionNone {
		return dec, nil
	}
	if d.maxCalls > 0 && d.calls >= d.maxCalls {
		return dec, errCrash
	}
	d.calls++
	// steps records each step once, in the order attempted: a call etcd refused is retried as the same
	// step, and a call whose reply was lost (the removed member answering "server stopped") still counts,
	// because the next observation shows it took effect.
	if n := len(d.state.attempts); n == 0 || d.state.attempts[n-1] != dec.Action {
		d.state.attempts = append(d.state.attempts, dec.Action)
		d.state.steps = append(d.state.steps, string(dec.Action.Type))
	}
	err := d.do(ctx, dec.Action, v)
	if err != nil {
		d.state.refused = append(d.state.refused, string(dec.Action.Type)+": "+err.Error())
		return dec, err
	}
	return dec, nil
}

func (d *driver) do(ctx context.Context, a membership.Action, v etcdView) error {
	switch a.Type {
	case membership.ActionDeletePod:
		for _, m := range v.members {
			if d.ordinalOf(m) == a.Ordinal && v.statuses[m.ID].Leader == m.ID {
				d.state.restartedLeader = true
			}
		}
		d.c.Stop(a.Ordinal)
		return nil
	case membership.ActionMarkReplace:
		vol := d.state.volumes[a.Ordinal]
		vol.Replace = true
		d.state.volumes[a.Ordinal] = vol
		return nil
	case membership.ActionDeleteVolume:
		d.c.Stop(a.Ordinal)
		delete(d.state.volumes, a.Ordinal)
		return d.c.Wipe(a.Ordinal)
	}
	ords := d.c.Ordinals()
	if a.Type == membership.ActionMoveLeader {
		ords = nil
		for id, st := range v.statuses {
			if st.Leader == id {
				for _, m := range v.members {
					if m.ID == id {
						ords = []int{d.ordinalOf(m)}
					}
				}
			}
		}
	}
	cli, err := d.dial(ctx, ords)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	return a.ApplyToEtcd(ctx, cli, d.c.PeerURL(a.Ordinal))
}

// converge steps until the plan is stable and every member of 0..desired-1 is a healthy voter.
func (d *driver) converge(ctx context.Context, timeout time.Duration) membership.Decision {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	var dec membership.Decision
	var err error
	for time.Now().Before(deadline) {
		dec, err = d.step(ctx)
		if err == errCrash {
			return dec
		}
		if err == nil && dec.Phase == membership.PhaseStable && d.healthyVoters(ctx) == d.desired {
			return dec
		}
		if dec.Phase == membership.PhaseBlocked {
			return dec
		}
		time.Sleep(200 * time.Millisecond) // the controller's short requeue between steps
	}
	d.t.Fatalf("did not converge to %d members in %s: last plan %s %q (err %v); steps %v\nlogs:\n%s",
		d.desired, timeout, dec.Phase, dec.Message, err, d.state.steps, d.logs())
	return dec
}

func (d *driver) healthyVoters(ctx context.Context) int {
	o, _ := d.observe(ctx)
	n := 0
	for _, m := range o.Members {
		if !m.Learner && m.Healthy && m.Ordinal >= 0 && m.Ordinal < d.desired {
			n++
		}
	}
	if n != len(o.Members) {
		return -1 // learners or extra members remain
	}
	return n
}

func (d *driver) logs() string {
	var b strings.Builder
	for i := range 8 {
		if l := d.c.Log(i); l != "" {
			fmt.Fprintf(&b, "--- member %d\n%s\n", i, l)
		}
	}
	return b.String()
}

// members returns the sorted ordinals in etcd's member list, learners marked with an L.
func (d *driver) members(ctx context.Context) []string {
	v, ok := d.view(ctx)
	if !ok {
		d.t.Fatal("etcd unreachable")
	}
	var out []string
	for _, m := range v.members {
		s := fmt.Sprint(d.ordinalOf(m))
		if m.IsLearner {
			s += "L"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// expectMembers fails the test unless etcd's members are want after what, crashed after k calls.
func (d *driver) expectMembers(ctx context.Context, what string, k int, want []string) {
	d.t.Helper()
	if got := d.members(ctx); !slices.Equal(got, want) {
		d.t.Fatalf("%s, crash after %d calls: members %v, want %v (steps %v)", what, k, got, want, d.state.steps)
	}
}

// newCluster bootstraps n members through the planner and waits until they are healthy voters.
func newCluster(t testing.TB, n int) (*driver, func()) {
	t.Helper()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return newClusterOf(t, n, bin, nil)
}

// newClusterOf is newCluster from the given etcd binary, every member started with env; the driver reads
// the learners they accept at once from it, as the controller does from the members' pods.
func newClusterOf(t testing.TB, n int, bin string, env map[string]string) (*driver, func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "etcd-membership-")
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.New("m", dir, bin)
	c.Env = env
	maxLearners, _ := strconv.Atoi(env["ETCD_MAX_LEARNERS"])
	d := &driver{t: t, c: c, state: newPersisted(), desired: n, healAfter: time.Hour, maxLearners: maxLearners}
	d.converge(context.Background(), 60*time.Second)
	return d, func() { c.Close(); _ = os.RemoveAll(dir) }
}

// restart is a new operator over the same cluster and persisted state.
func (d *driver) restart(desired, maxCalls int) *driver {
	return &driver{t: d.t, c: d.c, state: d.state, desired: desired, maxCalls: maxCalls, healAfter: d.healAfter, maxLearners: d.maxLearners}
}
