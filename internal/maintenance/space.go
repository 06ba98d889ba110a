// Package maintenance decides the upkeep of a running cluster's database: recovery from etcd's NOSPACE alarm
// (PlanSpace, RecoverSpace), routine defragmentation of files that hold many free pages
// (PlanDefragmentation), and sweeps that defragment every member in turn (PlanSweep, LatestScheduled).
//
// NOSPACE: once a member's database file reaches the space quota, etcd raises the alarm and refuses every
// write in the cluster until it is disarmed, which takes a human at 3 a.m. unless the operator does it.
// Recovery is one procedure (RecoverSpace), idempotent, so a restarted operator simply runs it again:
//  1. compact the key-value history at the current revision;
//  2. defragment every voter, one at a time: followers by name, then the leader (a member serves nothing
//     while it defragments: the leader's pause stalls every write, so it comes once, last; moving its
//     leadership away first would fail the writes in flight with "leader changed" instead);
//  3. disarm the alarm once every member's file is well below the quota. If the data itself fills the
//     quota, nothing frees space: the alarm stays, and the plan says what a human must do.
//
// Every member is defragmented, not only those that report free pages: a follower's report lags. The pages a
// compaction frees on a member only count as free once that member starts its next write transaction, and
// under NOSPACE there are none; a defragmentation rewrites the file from the data alone either way.
//
// Nothing is done while a member does not answer (its database may be the one that is full), while a
// learner is joining, or while a membership change is under way. CORRUPT alarms are never disarmed here:
// they are reported, and a human decides.
package maintenance

import (
	"cmp"
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
	// Healthy: the member answers without errors and its pod is ready.
	Healthy bool
	Leader  bool
	// Learner: a learner refuses maintenance calls; it is defragmented once it is a voter.
	Learner bool
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
	// RecoveredRevision is the revision of the operator's last complete recovery: compacted there, and every
	// voter defragmented after (0 if never).
	RecoveredRevision int64
	// QuotaBytes is the space quota the members run with.
	QuotaBytes int64
}

// SpaceStepKind names a maintenance step.
type SpaceStepKind string

const (
	// SpaceNone: nothing to do.
	SpaceNone SpaceStepKind = ""
	// SpaceWait: NOSPACE recovery is due but must wait (Reason says for what).
	SpaceWait SpaceStepKind = "Wait"
	// SpaceRecover: run RecoverSpace at Revision.
	SpaceRecover SpaceStepKind = "Recover"
	// SpaceDisarm: a recovery at the current revision is complete and every file is small: disarm Alarms.
	SpaceDisarm SpaceStepKind = "Disarm"
	// SpaceBlocked: a recovery at the current revision is complete and the data still fills the quota.
	SpaceBlocked SpaceStepKind = "Blocked"
	// SpaceDefragment: defragment Member (routine).
	SpaceDefragment SpaceStepKind = "Defragment"
	// SpaceSweepDefragment: defragment Member, one step of a sweep (sweep.go).
	SpaceSweepDefragment SpaceStepKind = "SweepDefragment"
)

// SpaceStep is the next maintenance step.
type SpaceStep struct {
	Kind     SpaceStepKind
	Revision int64        // SpaceRecover
	Member   Member       // SpaceDefragment
	Alarms   []etcd.Alarm // SpaceRecover, SpaceDisarm: the NOSPACE alarms
	// LimitBytes is the file size every member must be below for the alarm to be disarmed.
	LimitBytes int64
	// Reason says why, for status and events.
	Reason string
}

// disarmBelowPercent: the alarm is disarmed only once every member's file is below this share of the
// quota, so that writes do not raise it again at once.
const disarmBelowPercent = 80

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
		if m.Learner {
			return SpaceStep{Kind: SpaceWait, Reason: fmt.Sprintf("NOSPACE: waiting for learner %s to be promoted before compacting and defragmenting", m.Name)}
		}
	}
	limit := o.QuotaBytes * disarmBelowPercent / 100
	if o.RecoveredRevision < o.Revision {
		return SpaceStep{Kind: SpaceRecover, Revision: o.Revision, Alarms: noSpace, LimitBytes: limit,
			Reason: fmt.Sprintf("NOSPACE: compacting at revision %d, defragmenting every member, then disarming", o.Revision)}
	}
	for _, m := range o.Members {
		if m.DBSize >= limit {
			return SpaceStep{Kind: SpaceBlocked, Reason: fmt.Sprintf(
				"NOSPACE: member %s holds %s of data after compaction and defragmentation, above %d%% of the %s quota: "+
					"delete keys (etcd accepts deletes under NOSPACE), or grow spec.storageSize (the quota follows it), "+
					"then the operator compacts, defragments and disarms the alarm", m.Name, mib(m.DBSizeInUse), disarmBelowPercent, mib(o.QuotaBytes))}
		}
	}
	return SpaceStep{Kind: SpaceDisarm, Alarms: noSpace, Reason: fmt.Sprintf(
		"NOSPACE: every member's database is below %d%% of the %s quota after compaction and defragmentation: disarming the alarm",
		disarmBelowPercent, mib(o.QuotaBytes))}
}

// DefragPolicy is when a member's database is defragmented routinely (spec.defragmentation).
type DefragPolicy struct {
	// FreePercent: the least share of the file that is free pages; 0 turns routine defragmentation off.
	FreePercent int64
	// MinFreeBytes: the least free space, absolutely.
	MinFreeBytes int64
}

// PlanDefragmentation returns the next routine defragmentation: a member whose file holds at least the
// policy's share and size of free pages, followers by name before the leader, and only while every member answers and is healthy (a member serves nothing while it
// defragments: with another one down, that could cost quorum). SpaceNone when none is due.
func PlanDefragmentation(members []Member, p DefragPolicy) SpaceStep {
	if p.FreePercent <= 0 || len(members) == 0 {
		return SpaceStep{}
	}
	var due []Member
	for _, m := range members {
		if !m.Answered || !m.Healthy {
			return SpaceStep{}
		}
		if free := m.DBSize - m.DBSizeInUse; !m.Learner && free >= p.MinFreeBytes && free*100 >= m.DBSize*p.FreePercent {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return SpaceStep{}
	}
	prefix := fmt.Sprintf("free pages above %d%% (spec.defragmentation): ", p.FreePercent)
	followers := slices.DeleteFunc(slices.Clone(due), func(m Member) bool { return m.Leader })
	if len(followers) > 0 {
		m := byName(followers)[0]
		return SpaceStep{Kind: SpaceDefragment, Member: m, Reason: fmt.Sprintf("%sdefragmenting member %s (%s of data in a file of %s)",
			prefix, m.Name, mib(m.DBSizeInUse), mib(m.DBSize))}
	}
	m := due[0]
	return SpaceStep{Kind: SpaceDefragment, Member: m, Reason: fmt.Sprintf("%sdefragmenting member %s, the leader, last (%s of data in a file of %s)",
		prefix, m.Name, mib(m.DBSizeInUse), mib(m.DBSize))}
}

func byName(members []Member) []Member {
	out := slices.Clone(members)
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
