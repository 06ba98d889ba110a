package membership_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/membership"
)

// These scenarios run the planner against real etcd servers (local processes from the etcd binary the
// project builds). Each has a cluster of its own, so they run in parallel. Durations are logged with -v;
// `make bench` reports them as figures.

func TestScaleUpAddsLearnersAndPromotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	if got := d.members(ctx); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("bootstrap members %v", got)
	}
	start := time.Now()
	d = d.restart(5, 0)
	d.converge(ctx, 90*time.Second)
	t.Logf("scale 3->5: %s (%s per learner add+promote); refused calls: %v", time.Since(start), time.Since(start)/2, d.state.refused)
	if got := d.members(ctx); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("members after scale-up: %v", got)
	}
	want := []string{"AddLearner", "Promote", "AddLearner", "Promote"}
	if !slices.Equal(d.state.steps, want) {
		t.Fatalf("steps %v, want %v", d.state.steps, want)
	}
}

// TestLearnersJoinSideBySide: on etcd 3.6, every member accepting two learners at once (--max-learners=2,
// as the operator sets it), scaling 3 -> 5 adds the second learner as soon as the first has started, before
// either is promoted; etcd accepts it, and both become voters. The same step on etcd's default of one
// learner (TestScaleUpAddsLearnersAndPromotes) promotes each before the next joins.
func TestLearnersJoinSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := etcdtest.NextBinary()
	if err != nil {
		t.Fatal(err)
	}
	d, stop := newClusterOf(t, 3, bin, map[string]string{"ETCD_MAX_LEARNERS": "2"})
	defer stop()
	start := time.Now()
	d = d.restart(5, 0)
	d.converge(ctx, 90*time.Second)
	t.Logf("scale 3->5 with two learners at once: %s; refused calls: %v", time.Since(start), d.state.refused)
	if got := d.members(ctx); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("members after scale-up: %v", got)
	}
	want := []string{"AddLearner", "AddLearner", "Promote", "Promote"}
	if !slices.Equal(d.state.steps, want) {
		t.Fatalf("steps %v, want %v", d.state.steps, want)
	}
	// (etcd refuses any change for its first seconds, until every voter has been connected for a while:
	// "unhealthy cluster", retried. A learner beyond its limit would be "too many learner members".)
	for _, r := range d.state.refused {
		if !strings.Contains(r, "unhealthy cluster") && !strings.Contains(r, "rpc not supported for learner") {
			t.Fatalf("etcd refused %q (all refusals: %v)", r, d.state.refused)
		}
	}
}

// Volumes are provisioned one after the other: three of five members start, elect a leader and the cluster
// forms before the last two have volumes. Those two are members of the bootstrap that never started: they
// start as such ("new", from the same list), not as joiners of an existing cluster (etcd 3.5 waits on its
// peers when told to join with an empty data directory), and no membership change is made.
func TestLateInitialMembersBootstrapWithTheFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.New("m", t.TempDir(), bin)
	defer c.Close()
	d := &driver{t: t, c: c, state: newPersisted(), desired: 5, healAfter: time.Hour, unprovisioned: map[int]bool{3: true, 4: true}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		dec, err := d.step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := d.observe(ctx); o.Formed {
			if !o.InitialClusterIntact {
				t.Fatalf("formed from its bootstrap, yet not recognised as its initial cluster: %+v", o.Members)
			}
			break
		}
		if dec.Config == nil || dec.Config.State != membership.StateNew {
			t.Fatalf("before any leader: plan %s %q with configuration %+v, want the bootstrap (state new)", dec.Phase, dec.Message, dec.Config)
		}
		if time.Now().After(deadline) {
			t.Fatalf("three of five members never elected a leader\n%s", d.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	dec, err := d.step(ctx)
	if err != nil || dec.Config == nil || dec.Config.State != membership.StateNew || !slices.Equal(dec.Config.Ordinals(), []int{0, 1, 2, 3, 4}) || dec.Action.Type != membership.ActionNone {
		t.Fatalf("formed with members 3 and 4 never started: plan %s %q, action %+v, configuration %+v (err %v); want the bootstrap's list, state new, no step",
			dec.Phase, dec.Message, dec.Action, dec.Config, err)
	}
	d.unprovisioned = nil
	d.converge(ctx, 60*time.Second)
	if got := d.members(ctx); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("members %v, want the initial five", got)
	}
	if len(d.state.steps) > 0 || d.state.config.State != membership.StateExisting {
		t.Fatalf("steps %v and configuration %+v: want no membership change, and state existing once every member started", d.state.steps, d.state.config)
	}
}

func TestScaleDownMovesLeadershipAndRemovesHighestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 5)
	defer stop()
	// Make the highest member the leader, so the scale-down must move leadership before removing it.
	o, v := d.observe(ctx)
	var top uint64
	for _, m := range o.Members {
		if m.Ordinal == 4 {
			top = m.ID
		}
	}
	cli, err := d.dial(ctx, d.c.Ordinals())
	if err != nil {
		t.Fatal(err)
	}
	for id, st := range v.statuses {
		if st.Leader == id && id != top {
			leaderCli, err := d.dial(ctx, []int{ordinalOfID(o, id)})
			if err != nil {
				t.Fatal(err)
			}
			if err := leaderCli.MoveLeader(ctx, top); err != nil {
				t.Fatal(err)
			}
			_ = leaderCli.Close()
		}
	}
	_ = cli.Close()

	start := time.Now()
	d = d.restart(3, 0)
	d.converge(ctx, 90*time.Second)
	t.Logf("scale 5->3: %s (%s per member removal); refused calls: %v", time.Since(start), time.Since(start)/2, d.state.refused)
	if got := d.members(ctx); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("members after scale-down: %v", got)
	}
	want := []string{"MoveLeader", "Remove", "Remove"}
	if !slices.Equal(d.state.steps, want) {
		t.Fatalf("steps %v, want %v (leadership moved away from member 4 first)", d.state.steps, want)
	}
	if slices.Contains(d.c.Ordinals(), 4) || slices.Contains(d.c.Ordinals(), 3) {
		t.Fatalf("removed members still run: %v", d.c.Ordinals())
	}
}

func TestRefusesToBreakQuorum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	d.c.Stop(1) // one member down
	d = d.restart(1, 0)
	dec := d.converge(ctx, 30*time.Second)
	if dec.Phase != membership.PhaseBlocked || !strings.Contains(dec.Message, "quorum needs 2") {
		t.Fatalf("plan %s %q; want Blocked explaining quorum", dec.Phase, dec.Message)
	}
	if len(d.state.steps) != 0 {
		t.Fatalf("steps taken while quorum was at risk: %v", d.state.steps)
	}
	if got := d.members(ctx); len(got) != 3 {
		t.Fatalf("members %v: nothing may be removed", got)
	}
}

func TestHealsMemberWhoseDataWasWiped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	before := d.members(ctx)
	// The member's volume is deleted: the pod comes back with an empty data directory (and its claim
	// without the operator's record).
	d.c.Stop(2)
	if err := d.c.Wipe(2); err != nil {
		t.Fatal(err)
	}
	delete(d.state.volumes, 2)
	d.healAfter = 2 * time.Second
	start := time.Now()
	d = d.restart(3, 0)
	d.converge(ctx, 120*time.Second)
	t.Logf("heal of a wiped member: %s", time.Since(start))
	if got := d.members(ctx); !slices.Equal(got, before) {
		t.Fatalf("members after heal %v, want %v", got, before)
	}
	for _, s := range []string{"MarkVolumeForReplacement", "Remove", "DeleteVolume", "AddLearner", "Promote"} {
		if !slices.Contains(d.state.steps, s) {
			t.Fatalf("heal steps %v lack %s", d.state.steps, s)
		}
	}
}

// memberIDAt is the etcd member ID of ordinal i, or 0.
func (d *driver) memberIDAt(ctx context.Context, i int) uint64 {
	v, _ := d.view(ctx)
	for _, m := range v.members {
		if d.ordinalOf(m) == i {
			return m.ID
		}
	}
	return 0
}

// A member's claim is deleted (with its pod): the member is removed at once, long before HealAfter,
// and re-added with an empty volume once the old claim is gone.
func TestHealsMemberWhoseClaimIsDeletedWithoutWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	before, oldID := d.members(ctx), d.memberIDAt(ctx, 2)
	if d.state.volumes[2].MemberID != oldID {
		t.Fatalf("claim of member 2 records %x, want %x", d.state.volumes[2].MemberID, oldID)
	}
	// The claim is deleted, then its pod: the claim stays (Terminating) until the pod is gone.
	vol := d.state.volumes[2]
	vol.Deleting = true
	d.state.volumes[2] = vol
	d.c.Stop(2)
	start := time.Now()
	d = d.restart(3, 0) // healAfter stays an hour
	for !slices.Contains(d.state.steps, "Remove") {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("member 2 not removed after its claim was deleted; steps %v", d.state.steps)
		}
		if dec, err := d.step(ctx); err == nil && dec.Phase == membership.PhaseBlocked {
			t.Fatalf("blocked: %s", dec.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The pod is gone, so is the old claim and its data; the StatefulSet creates a new, empty claim.
	if err := d.c.Wipe(2); err != nil {
		t.Fatal(err)
	}
	delete(d.state.volumes, 2)
	d.converge(ctx, 120*time.Second)
	t.Logf("heal of a member whose claim was deleted: %s (HealAfter %s)", time.Since(start), d.healAfter)
	if got := d.members(ctx); !slices.Equal(got, before) {
		t.Fatalf("members after heal %v, want %v", got, before)
	}
	if d.memberIDAt(ctx, 2) == oldID {
		t.Fatal("member 2 kept its old ID: it was not re-added")
	}
	if slices.Contains(d.state.steps, "MarkVolumeForReplacement") {
		t.Fatalf("steps %v: a claim being deleted needs no mark", d.state.steps)
	}
}

// The operator missed the claim's deletion: the member's pod is back on a new, empty claim created after
// the member was seen unhealthy, and etcd refuses the member. It is replaced at once, not after HealAfter.
func TestHealsMemberOnNewEmptyClaimWithoutWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	before, oldID := d.members(ctx), d.memberIDAt(ctx, 2)
	d.c.Stop(2)
	if err := d.c.Wipe(2); err != nil {
		t.Fatal(err)
	}
	d.state.unhealthySince[oldID] = time.Now() // status: seen unhealthy when its pod went
	time.Sleep(10 * time.Millisecond)
	d.state.volumes[2] = membership.Volume{Created: time.Now()} // the new claim, never recorded
	start := time.Now()
	d = d.restart(3, 0) // healAfter stays an hour
	d.converge(ctx, 120*time.Second)
	t.Logf("heal of a member back on an empty claim: %s (HealAfter %s)", time.Since(start), d.healAfter)
	if got := d.members(ctx); !slices.Equal(got, before) {
		t.Fatalf("members after heal %v, want %v", got, before)
	}
	if d.memberIDAt(ctx, 2) == oldID {
		t.Fatal("member 2 kept its old ID: it was not replaced")
	}
	for _, s := range []string{"MarkVolumeForReplacement", "Remove", "DeleteVolume", "AddLearner", "Promote"} {
		if !slices.Contains(d.state.steps, s) {
			t.Fatalf("heal steps %v lack %s", d.state.steps, s)
		}
	}
}

func TestUnknownMemberIsReportedNotRemoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	cli, err := d.dial(ctx, d.c.Ordinals())
	if err != nil {
		t.Fatal(err)
	}
	// etcd accepts a member change once every member has been connected for a few seconds.
	deadline := time.Now().Add(30 * time.Second)
	for _, err = cli.AddLearner(ctx, "http://127.0.0.1:9"); err != nil; _, err = cli.AddLearner(ctx, "http://127.0.0.1:9") {
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = cli.Close()
	d = d.restart(3, 0)
	for range 5 {
		dec, err := d.step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(dec.Unknown) != 1 {
			t.Fatalf("unknown members %v, want the foreign learner", dec.Unknown)
		}
	}
	if len(d.state.steps) != 0 {
		t.Fatalf("steps taken about an unknown member: %v", d.state.steps)
	}
}

func TestRollingRestartFollowersFirstLeaderLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	// A new "version": the same etcd under another path, so every member runs an outdated binary.
	next := filepath.Join(d.c.Dir, "etcd-next")
	copyFile(t, d.c.Bin, next)
	d.c.Bin = next
	start := time.Now()
	d = d.restart(3, 0)
	d.converge(ctx, 120*time.Second)
	t.Logf("rolling restart of 3 members: %s", time.Since(start))
	restarts := 0
	for _, s := range d.state.steps {
		if s == "DeletePod" {
			restarts++
		}
	}
	if restarts != 3 {
		t.Fatalf("steps %v: want exactly one restart per member", d.state.steps)
	}
	if d.state.restartedLeader {
		t.Fatalf("steps %v: the leader was restarted without moving leadership first", d.state.steps)
	}
	for i := range 3 {
		if d.state.startedWith[i] != next {
			t.Fatalf("member %d not restarted onto the new binary", i)
		}
	}
}

// TestCrashBetweenEveryStep kills the operator before each mutating call of a scale-up, scale-down,
// rolling restart and heal, then lets a fresh operator converge: no orphan learners, no double adds, no
// wrong removals.
// The crash tests stop the driver after its k-th etcd call at every step of a change, then check that a
// restarted driver converges to the same members from whatever it finds.

func TestCrashBetweenScaleSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	for k := 1; k <= 4; k++ {
		d.state.steps = nil
		d.restart(5, k).converge(ctx, 90*time.Second)
		d = d.restart(5, 0)
		d.converge(ctx, 90*time.Second)
		d.expectMembers(ctx, "scale-up", k, []string{"0", "1", "2", "3", "4"})

		d.state.steps = nil
		d.restart(3, k%3+1).converge(ctx, 90*time.Second)
		d = d.restart(3, 0)
		d.converge(ctx, 90*time.Second)
		d.expectMembers(ctx, "scale-down", k, []string{"0", "1", "2"})
	}
}

func TestCrashBetweenHealSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	for k := 1; k <= 5; k++ {
		d.state.steps = nil
		d.c.Stop(1)
		if err := d.c.Wipe(1); err != nil {
			t.Fatal(err)
		}
		delete(d.state.volumes, 1)
		d.healAfter = time.Second
		d.restart(3, k).converge(ctx, 60*time.Second)
		d = d.restart(3, 0)
		d.converge(ctx, 120*time.Second)
		d.expectMembers(ctx, "heal", k, []string{"0", "1", "2"})
	}
}

func TestCrashBetweenRollingRestartSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, stop := newCluster(t, 3)
	defer stop()
	next := filepath.Join(d.c.Dir, "etcd-next")
	copyFile(t, d.c.Bin, next)
	d.c.Bin = next
	for k := 1; k <= 2; k++ {
		d.restart(3, k).converge(ctx, 60*time.Second)
	}
	d = d.restart(3, 0)
	d.converge(ctx, 120*time.Second)
	d.expectMembers(ctx, "rolling restart", 2, []string{"0", "1", "2"})
}

func ordinalOfID(o membership.Observed, id uint64) int {
	for _, m := range o.Members {
		if m.ID == id {
			return m.Ordinal
		}
	}
	return -1
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
