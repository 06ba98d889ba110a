package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/maintenance"
)

// These tests fill real etcd servers (ETCD_BIN_DIR, set by `make test`) up to a small space quota and let
// the plan recover them, as the controller does.

const quota = 16 << 20

// fillUntilNoSpace writes values of 256 KiB under keys from key(i) until etcd raises NOSPACE.
func fillUntilNoSpace(t *testing.T, cli *clientv3.Client, key func(i int) string) {
	t.Helper()
	value := strings.Repeat("x", 256<<10)
	for i := range 10 * quota / len(value) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, key(i), value)
		cancel()
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	t.Fatal("etcd never raised NOSPACE")
}

// waitServing waits until the cluster answers a linearizable read (its members restarted).
func waitServing(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Get(ctx, "/serving")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted cluster does not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// spaceRun observes the cluster the way the controller does and takes the plan's steps.
type spaceRun struct {
	t         *testing.T
	c         *etcdtest.Cluster
	n         int
	recovered int64
	progress  maintenance.RecoveryProgress
	// mostActions is the most actions one step took.
	mostActions int
}

func (r *spaceRun) observe(ctx context.Context, cli etcd.Client) (maintenance.SpaceObserved, map[uint64]string) {
	o := maintenance.SpaceObserved{QuotaBytes: quota, RecoveredRevision: r.recovered, Progress: r.progress}
	alarms, err := cli.Alarms(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	o.Alarms = alarms
	endpoints := map[uint64]string{}
	for i := range r.n {
		st, err := cli.Status(ctx, r.c.ClientURL(i))
		if err != nil {
			r.t.Fatal(err)
		}
		endpoints[st.MemberID] = r.c.ClientURL(i)
		o.Members = append(o.Members, maintenance.Member{ID: st.MemberID, Name: r.c.MemberName(i), Answered: true,
			Healthy: len(st.Errors) == 0, Leader: st.Leader == st.MemberID, DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse})
		o.Revision = max(o.Revision, st.Revision)
	}
	return o, endpoints
}

// recover takes PlanSpace's steps.
func (r *spaceRun) recover(ctx context.Context) []string {
	return r.run(ctx, maintenance.PlanSpace)
}

// run takes plan's steps, observing anew before each, as the controller's reconciles do, until the plan has
// said there is nothing to do, or Blocked, for 3 s. It returns what was done (the Report's outcomes, with
// the member), then how it ended ("" or "Blocked").
func (r *spaceRun) run(ctx context.Context, plan func(maintenance.SpaceObserved) maintenance.SpaceStep) []string {
	dialer := etcd.NewDialer(5 * time.Second)
	cli, err := dialer.Dial(ctx, endpointsOf(r.c, r.n), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var done []string
	report := func(outcome, message string) {
		r.t.Log(message)
		name := ""
		for i := range r.n {
			if strings.Contains(message, r.c.MemberName(i)) {
				name = " " + r.c.MemberName(i)
			}
		}
		done = append(done, outcome+name)
	}
	var idleSince time.Time
	for range 100 {
		o, endpoints := r.observe(ctx, cli)
		step := plan(o)
		if step.Kind == maintenance.SpaceNone || step.Kind == maintenance.SpaceBlocked {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) > 3*time.Second {
				return append(done, string(step.Kind))
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		idleSince = time.Time{}
		r.t.Log(step.Reason)
		cl := maintenance.Cluster{Voters: cli, Members: o.Members, Endpoint: endpoints}
		before := len(done)
		if step.Recovered > 0 {
			r.recovered = step.Recovered
		}
		if err := maintenance.Apply(ctx, cl, step, report); err != nil {
			r.t.Fatal(err)
		}
		r.mostActions = max(r.mostActions, len(done)-before)
		switch step.Kind {
		case maintenance.SpaceRecover:
			r.progress = maintenance.RecoveryProgress{Revision: step.Revision}
		case maintenance.SpaceRecoverDefragment:
			r.progress.Defragmented = append(r.progress.Defragmented, step.Member.ID)
		}
	}
	r.t.Fatalf("no end after 100 steps: %v", done)
	return nil
}

// waitUntilEveryMemberIsDue waits up to 30 s until the plan would defragment every member on its own.
func (r *spaceRun) waitUntilEveryMemberIsDue(ctx context.Context, p maintenance.DefragPolicy) {
	cli := etcdClient(r.t, r.c)
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, _ := r.observe(ctx, cli)
		due := 0
		for _, m := range o.Members {
			if step := maintenance.PlanDefragmentation([]maintenance.Member{m}, p); step.Kind != maintenance.SpaceNone {
				due++
			}
		}
		if due == len(o.Members) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after 30 s, %d of %d members report enough free pages to defragment: %+v", due, len(o.Members), o.Members)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// leader is the name of the member that leads now.
func (r *spaceRun) leader(ctx context.Context) string {
	o, _ := r.observe(ctx, etcdClient(r.t, r.c))
	for _, m := range o.Members {
		if m.Leader {
			return m.Name
		}
	}
	r.t.Fatal("no leader")
	return ""
}

// defragmentedLast is the member defragmented last.
func defragmentedLast(done []string) string {
	last := ""
	for _, s := range done {
		if name, ok := strings.CutPrefix(s, maintenance.Defragmented+" "); ok {
			last = name
		}
	}
	return last
}

// defragmented lists the members defragmented, each once, sorted.
func defragmented(done []string) []string {
	var out []string
	for _, s := range done {
		if name, ok := strings.CutPrefix(s, maintenance.Defragmented+" "); ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func endpointsOf(c *etcdtest.Cluster, n int) []string {
	var eps []string
	for i := range n {
		eps = append(eps, c.ClientURL(i))
	}
	return eps
}

func pids(c *etcdtest.Cluster, n int) []int {
	var out []int
	for i := range n {
		out = append(out, c.PID(i))
	}
	return out
}

func TestNoSpaceFromOverwrittenKeysIsRecoveredWithoutRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.StartStatic(t, "space", 3, map[string]string{"ETCD_QUOTA_BACKEND_BYTES": fmt.Sprint(quota)})
	cli := c.Client(t, nil, 0, 1, 2)
	before := pids(c, 3)
	// One key overwritten: all but its last revision are history, which compaction frees.
	fillUntilNoSpace(t, cli, func(int) string { return "/overwritten" })

	run := &spaceRun{t: t, c: c, n: 3}
	leaderBefore := run.leader(ctx)
	steps := run.recover(ctx)
	t.Logf("steps: %v", steps)

	if steps[0] != maintenance.Compacted || !slices.Contains(steps, maintenance.AlarmDisarmed) || steps[len(steps)-1] != "" {
		t.Fatalf("steps %v: want a compaction first and the alarm disarmed", steps)
	}
	if got := defragmented(steps); !slices.Equal(got, []string{"space-0", "space-1", "space-2"}) {
		t.Fatalf("defragmented %v: want every member", got)
	}
	if last := defragmentedLast(steps); last != leaderBefore {
		t.Fatalf("steps %v: the last member defragmented is %s, want the leader %s", steps, last, leaderBefore)
	}
	if _, err := cli.Put(ctx, "/after", "writable"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if got := pids(c, 3); !slices.Equal(got, before) {
		t.Fatalf("member processes %v, were %v: a member restarted", got, before)
	}
}

// TestNoSpaceRecoveryTakesOneActionPerStep: a recovery is a series of steps of one action each (a
// compaction, one member's defragmentation, the disarm), so that a reconcile never holds its worker for
// more than one member's defragmentation; it still ends writable, the leader defragmented last.
func TestNoSpaceRecoveryTakesOneActionPerStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.StartStatic(t, "steps", 3, map[string]string{"ETCD_QUOTA_BACKEND_BYTES": fmt.Sprint(quota)})
	cli := c.Client(t, nil, 0, 1, 2)
	fillUntilNoSpace(t, cli, func(int) string { return "/overwritten" })

	run := &spaceRun{t: t, c: c, n: 3}
	leaderBefore := run.leader(ctx)
	steps := run.recover(ctx)
	t.Logf("steps: %v", steps)
	if run.mostActions != 1 {
		t.Fatalf("a step took %d actions, want one each: %v", run.mostActions, steps)
	}
	want := []string{maintenance.Compacted}
	for i := range 3 {
		if name := c.MemberName(i); name != leaderBefore {
			want = append(want, maintenance.Defragmented+" "+name)
		}
	}
	want = append(want, maintenance.Defragmented+" "+leaderBefore, maintenance.AlarmDisarmed, "")
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	if _, err := cli.Put(ctx, "/after", "writable"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}

func TestNoSpaceFromLiveDataStaysUntilKeysAreDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Distinct keys: compaction frees nothing, the data itself fills the quota. They are written under etcd's
	// default quota first, then every member restarts with the test's: how far the database file outgrows its
	// data on the way (further on a loaded machine) cannot make NOSPACE come before the data fills the quota.
	c := etcdtest.StartStatic(t, "full", 3, nil)
	cli := c.Client(t, nil, 0, 1, 2)
	value := strings.Repeat("x", 256<<10)
	for i := range 15 * quota / 16 / len(value) {
		if _, err := cli.Put(ctx, fmt.Sprintf("/live/%04d", i), value); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for _, i := range etcdtest.Ordinals(3) {
		c.Stop(i)
		if err := c.StartWithEnv(i, c.InitialCluster(etcdtest.Ordinals(3)), "new", map[string]string{"ETCD_QUOTA_BACKEND_BYTES": fmt.Sprint(quota)}); err != nil {
			t.Fatal(err)
		}
	}
	waitServing(t, cli)
	fillUntilNoSpace(t, cli, func(i int) string { return fmt.Sprintf("/live/%04d", 1000+i) })

	run := &spaceRun{t: t, c: c, n: 3}
	steps := run.recover(ctx)
	if steps[len(steps)-1] != string(maintenance.SpaceBlocked) || slices.Contains(steps, maintenance.AlarmDisarmed) {
		t.Fatalf("steps %v: want Blocked, the alarm kept", steps)
	}
	if _, err := cli.Put(ctx, "/still-refused", "x"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("write while blocked: %v, want NOSPACE", err)
	}

	// etcd takes deletes under NOSPACE: a human deletes 30 keys, and the plan takes it from there.
	if _, err := cli.Delete(ctx, "/live/0000", clientv3.WithRange("/live/0030")); err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	steps = run.recover(ctx)
	t.Logf("steps after the delete: %v", steps)
	if steps[0] != maintenance.Compacted || !slices.Contains(steps, maintenance.AlarmDisarmed) {
		t.Fatalf("steps after the delete %v: want a new compaction, then the alarm disarmed", steps)
	}
	if _, err := cli.Put(ctx, "/after", "writable"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}

func TestRoutineDefragmentationShrinksEveryFileLeaderLastWhileWritesGoOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.StartStatic(t, "defrag", 3, nil)
	cli := c.Client(t, nil, 0, 1, 2)
	value := strings.Repeat("x", 256<<10)
	for i := range 40 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/fragment/%04d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, "/fragment/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// etcd's periodic auto-compaction would do this within its retention; the test does not wait for it.
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	var failed, acked atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := cli.Put(wctx, fmt.Sprintf("/writer/%d", i), "v"); err != nil {
				failed.Add(1)
			} else {
				acked.Add(1)
			}
			cancel()
		}
	}()

	run := &spaceRun{t: t, c: c, n: 3}
	sizes := func() []int64 {
		o, _ := run.observe(ctx, etcdClient(t, c))
		var out []int64
		for _, m := range o.Members {
			out = append(out, m.DBSize)
		}
		return out
	}
	policy := maintenance.DefragPolicy{FreePercent: 50, MinFreeBytes: 1 << 20}
	// A member reports the pages the compaction freed only after its next write transaction, so the plan
	// would otherwise see some followers as already compact and defragment them after the leader.
	run.waitUntilEveryMemberIsDue(ctx, policy)
	before := sizes()
	leaderBefore := run.leader(ctx)
	steps := run.run(ctx, func(o maintenance.SpaceObserved) maintenance.SpaceStep {
		return maintenance.PlanDefragmentation(o.Members, policy)
	})
	close(stop)
	<-done
	after := sizes()
	t.Logf("steps %v; file sizes %v -> %v; writer: %d acknowledged, %d failed", steps, before, after, acked.Load(), failed.Load())
	if got := defragmented(steps); !slices.Equal(got, []string{"defrag-0", "defrag-1", "defrag-2"}) {
		t.Fatalf("steps %v: want every member defragmented", steps)
	}
	if last := defragmentedLast(steps); last != leaderBefore {
		t.Fatalf("steps %v: the last member defragmented is %s, want the leader %s", steps, last, leaderBefore)
	}
	for i := range after {
		if after[i] > before[i]/2 {
			t.Errorf("member %d's file %d -> %d bytes: not returned to the file system", i, before[i], after[i])
		}
	}
	if failed.Load() > 0 || acked.Load() == 0 {
		t.Errorf("writer: %d acknowledged, %d failed during the defragmentations", acked.Load(), failed.Load())
	}
}

func etcdClient(t *testing.T, c *etcdtest.Cluster) etcd.Client {
	t.Helper()
	cli, err := etcd.NewDialer(5*time.Second).Dial(context.Background(), endpointsOf(c, 3), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}
