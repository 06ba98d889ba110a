// Package maintenance decides the upkeep of a running cluster's database. Today that is recovery from etcd's
// NOSPACE alarm: once a member's database reaches the space quota, etcd raises the alarm and refuses every
// write in the cluster until it is disarmed, which takes a human at 3 a.m. unless the operator does it.
//
// Recovery, one step per call of PlanSpace, each step idempotent so a restarted operator resumes where the
// last one stopped:
//  1. compact the key-value history at the current revision (physically: the space of every older revision
//     becomes free pages);
//  2. defragment each member whose database file holds many free pages, one member at a time, followers
//     before the leader (a member serves nothing while it defragments; the leader's pause is an election's
//     worth of trouble, so it goes last, when the rest are done);
//  3. disarm the alarm once every member's database is well below the quota. If the data itself fills the
//     quota, nothing frees space: the alarm stays and the plan says what a human must do.
//
// Nothing is done while a member does not answer (its database may be the one that is full) or while the
// cluster is in the middle of a membership change. CORRUPT alarms are never disarmed here: they are
// reported, and a human decides.
package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seedops/etcd-operator/internal/etcd"
)

// Member is one etcd member as observed.
type Member struct {
	ID   uint64
	Name string
	// Answered is true when the member answered the status call: the sizes below are its answer.
	Answered bool
	Leader   bool
	// DBSize is the size of the member's database file; DBSizeInUse the part of it that holds data.
	DBSize      int64
	DBSizeInUse int64
}

// SpaceObserved is what PlanSpace needs.
type SpaceObserved struct {
	Members []Member
	Alarms  []etcd.Alarm
	// Revision is the cluster's current revision (the highest a member reported).
	Revision int64
	// CompactedRevision is the revision the operator last compacted at (0 if never).
	CompactedRevision int64
	// QuotaBytes is the space quota the members run with.
	QuotaBytes int64
}

// SpaceStepKind names a step of NOSPACE recovery.
type SpaceStepKind string

const (
	// SpaceNone: no NOSPACE alarm, nothing to do.
	SpaceNone SpaceStepKind = ""
	// SpaceWait: recovery is due but must wait (Reason says for what).
	SpaceWait SpaceStepKind = "Wait"
	// SpaceCompact: compact at Revision.
	SpaceCompact SpaceStepKind = "Compact"
	// SpaceDefragment: defragment Member.
	SpaceDefragment SpaceStepKind = "Defragment"
	// SpaceDisarm: disarm Alarms.
	SpaceDisarm SpaceStepKind = "Disarm"
	// SpaceBlocked: compaction and defragmentation are done and the data still fills the quota.
	SpaceBlocked SpaceStepKind = "Blocked"
)

// SpaceStep is the next step of NOSPACE recovery.
type SpaceStep struct {
	Kind     SpaceStepKind
	Revision int64        // SpaceCompact
	Member   Member       // SpaceDefragment
	Alarms   []etcd.Alarm // SpaceDisarm
	// Reason says why, for status and events.
	Reason string
}

// minFreeToDefragment is the least a member's file must hold in free pages, absolutely and as a share of
// the file, to be worth a defragmentation (which stops the member for as long as it rewrites the file).
const (
	minFreeToDefragment      = 1 << 20
	minFreeShareToDefragment = 10 // percent
)

// disarmBelowPercent: the alarm is disarmed only once every member's file is below this share of the
// quota, so that writes do not raise it again at once.
const disarmBelowPercent = 90

// PlanSpace returns the next step of NOSPACE recovery.
func PlanSpace(o SpaceObserved) SpaceStep {
	var noSpace []etcd.Alarm
	for _, a := range o.Alarms {
		if a.Type == etcd.AlarmNoSpace {
			noSpace = append(noSpace, a)
		}
	}
	if len(noSpace) == 0 {
		return SpaceStep{}
	}
	for _, m := range o.Members {
		if !m.Answered {
			return SpaceStep{Kind: SpaceWait, Reason: fmt.Sprintf("NOSPACE: waiting for member %s to answer before compacting and defragmenting", m.Name)}
		}
	}
	if o.CompactedRevision < o.Revision {
		return SpaceStep{Kind: SpaceCompact, Revision: o.Revision,
			Reason: fmt.Sprintf("NOSPACE: compacting the history at revision %d", o.Revision)}
	}
	limit := o.QuotaBytes * disarmBelowPercent / 100
	if m, ok := nextToDefragment(o.Members, limit); ok {
		return SpaceStep{Kind: SpaceDefragment, Member: m,
			Reason: fmt.Sprintf("NOSPACE: defragmenting member %s (%s in a file of %s)", m.Name, mib(m.DBSizeInUse), mib(m.DBSize))}
	}
	for _, m := range o.Members {
		if m.DBSize >= limit {
			return SpaceStep{Kind: SpaceBlocked, Reason: fmt.Sprintf(
				"NOSPACE: member %s holds %s of data after compaction and defragmentation, above %d%% of the %s quota: "+
					"delete keys (etcd accepts deletes under NOSPACE), or grow spec.storageSize (the quota follows it), "+
					"then the operator disarms the alarm", m.Name, mib(m.DBSizeInUse), disarmBelowPercent, mib(o.QuotaBytes))}
		}
	}
	return SpaceStep{Kind: SpaceDisarm, Alarms: noSpace,
		Reason: fmt.Sprintf("NOSPACE: every member's database is below %d%% of the %s quota after compaction and defragmentation: disarming the alarm", disarmBelowPercent, mib(o.QuotaBytes))}
}

// nextToDefragment picks a member whose file holds enough free pages, or whose file is above limit while its
// data is not: followers by name, then the leader.
func nextToDefragment(members []Member, limit int64) (Member, bool) {
	var due []Member
	for _, m := range members {
		free := m.DBSize - m.DBSizeInUse
		worthIt := free >= minFreeToDefragment && free*100 >= m.DBSize*minFreeShareToDefragment
		if worthIt || free > 0 && m.DBSize >= limit && m.DBSizeInUse < limit {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return Member{}, false
	}
	slices.SortFunc(due, func(a, b Member) int {
		if a.Leader != b.Leader {
			if a.Leader {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return due[0], true
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ApplySpace takes step through cli; endpoint maps a member ID to its client URL (for a defragmentation).
func ApplySpace(ctx context.Context, cli etcd.Client, endpoint map[uint64]string, step SpaceStep) error {
	switch step.Kind {
	case SpaceCompact:
		return cli.Compact(ctx, step.Revision)
	case SpaceDefragment:
		url, ok := endpoint[step.Member.ID]
		if !ok {
			return fmt.Errorf("defragment member %s: no client URL known", step.Member.Name)
		}
		return cli.Defragment(ctx, url)
	case SpaceDisarm:
		for _, a := range step.Alarms {
			if err := cli.DisarmAlarm(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}
