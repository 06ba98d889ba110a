package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// spaceRun observes the cluster the way the controller does and takes the plan's steps until it says there is
// nothing to do or it is blocked; it returns the steps taken.
type spaceRun struct {
	t         *testing.T
	c         *etcdtest.Cluster
	n         int
	compacted int64
}

func (r *spaceRun) observe(ctx context.Context, cli etcd.Client) (maintenance.SpaceObserved, map[uint64]string) {
	o := maintenance.SpaceObserved{QuotaBytes: quota, CompactedRevision: r.compacted}
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
			Leader: st.Leader == st.MemberID, DBSize: st.DBSize, DBSizeInUse: st.DBSizeInUse})
		o.Revision = max(o.Revision, st.Revision)
	}
	return o, endpoints
}

func (r *spaceRun) recover(ctx context.Context) []string {
	cli, err := etcd.NewDialer(5*time.Second).Dial(ctx, endpointsOf(r.c, r.n), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var steps []string
	for range 20 {
		o, endpoints := r.observe(ctx, cli)
		step := maintenance.PlanSpace(o)
		if step.Kind == maintenance.SpaceNone || step.Kind == maintenance.SpaceBlocked {
			return append(steps, string(step.Kind))
		}
		r.t.Log(step.Reason)
		desc := string(step.Kind)
		if step.Kind == maintenance.SpaceDefragment {
			desc += " " + step.Member.Name
			if step.Member.Leader {
				desc += " (leader)"
			}
		}
		steps = append(steps, desc)
		if err := maintenance.ApplySpace(ctx, cli, endpoints, step); err != nil {
			r.t.Fatal(err)
		}
		if step.Kind == maintenance.SpaceCompact {
			r.compacted = step.Revision
		}
	}
	r.t.Fatalf("no end after 20 steps: %v", steps)
	return nil
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
	steps := run.recover(ctx)
	t.Logf("steps: %v", steps)

	if steps[0] != "Compact" || steps[len(steps)-2] != "Disarm" || steps[len(steps)-1] != "" {
		t.Fatalf("steps %v: want Compact first, Disarm last", steps)
	}
	var defragmented []string
	for _, s := range steps {
		if name, ok := strings.CutPrefix(s, "Defragment "); ok {
			defragmented = append(defragmented, name)
		}
	}
	if len(defragmented) != 3 || !strings.HasSuffix(defragmented[2], "(leader)") {
		t.Fatalf("defragmented %v: want every member, the leader last", defragmented)
	}
	if _, err := cli.Put(ctx, "/after", "writable"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if got := pids(c, 3); !slices.Equal(got, before) {
		t.Fatalf("member processes %v, were %v: a member restarted", got, before)
	}
}

func TestNoSpaceFromLiveDataStaysUntilKeysAreDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.StartStatic(t, "full", 3, map[string]string{"ETCD_QUOTA_BACKEND_BYTES": fmt.Sprint(quota)})
	cli := c.Client(t, nil, 0, 1, 2)
	// Distinct keys: compaction frees nothing, the data itself fills the quota.
	fillUntilNoSpace(t, cli, func(i int) string { return fmt.Sprintf("/live/%04d", i) })

	run := &spaceRun{t: t, c: c, n: 3}
	steps := run.recover(ctx)
	if steps[len(steps)-1] != string(maintenance.SpaceBlocked) || slices.Contains(steps, "Disarm") {
		t.Fatalf("steps %v: want Blocked, no Disarm", steps)
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
	if steps[0] != "Compact" || !slices.Contains(steps, "Disarm") {
		t.Fatalf("steps after the delete %v: want a new compaction, then Disarm", steps)
	}
	if _, err := cli.Put(ctx, "/after", "writable"); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}
