// Package maintenance decides the upkeep of a running cluster's database: recovery from etcd's NOSPACE alarm
// (PlanSpace, Apply), routine defragmentation of files that hold many free pages
// (PlanDefragmentation), and sweeps that defragment every member in turn (PlanSweep, LatestScheduled).
//
// NOSPACE: once a member's database file reaches the space quota, etcd raises the alarm and refuses every
// write in the cluster until it is disarmed, which takes a human at 3 a.m. unless the operator does it.
// Recovery is a series of steps, one per reconcile (a defragmentation may take minutes, and a reconcile
// holds a worker shared with every other cluster); each is idempotent, and the progress between them
// (RecoveryProgress) is the operator's memory only, so a restarted operator starts again from step 1:
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
	// QuotaBytes is the space quota the members run with (the smallest, if they differ).
	QuotaBytes int64
	// Progress is how far the recovery under way has come.
	Progress RecoveryProgress
	// QuotaAdvice says how a human raises the quota, for the Blocked reason ("raise the space quota" if
	// empty).
	QuotaAdvice string
}

// RecoveryProgress is a recovery under way: compacted at Revision (0: not yet), and the voters defragmented
// since.
type RecoveryProgress struct {
	Revision     int64
	Defragmented []uint64
}

// SpaceStepKind names a maintenance step.
type SpaceStepKind string

const (
	// SpaceNone: nothing to do.
	SpaceNone SpaceStepKind = ""
	// SpaceWait: NOSPACE recovery is due but must wait (Reason says for what).
	SpaceWait SpaceStepKind = "Wait"
	// SpaceRecover: compact at Revision, the first step of a recovery.
	SpaceRecover SpaceStepKind = "Recover"
	// SpaceRecoverDefragment: defragment Member, a step of the recovery compacted at Revision.
	SpaceRecoverDefragment SpaceStepKind = "RecoverDefragment"
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
	Revision int64        // SpaceRecover, SpaceRecoverDefragment
	Member   Member       // SpaceDefragment, SpaceRecoverDefragment
	Alarms   []etcd.Alarm // SpaceRecover, SpaceDisarm: the NOSPACE alarms
	// LimitBytes is the file size every member must be below for the alarm to be disarmed.
	LimitBytes int64
	// Recovered, on SpaceDisarm and SpaceBlocked, is the revision of the recovery that has just completed
	// (recorded as RecoveredRevision from then on); 0 if it was recorded before.
	Recovered int64
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
	var recovered int64
	if o.RecoveredRevision < o.Revision {
		if o.Progress.Revision != o.Revision {
			return SpaceStep{Kind: SpaceRecover, Revision: o.Revision, Alarms: noSpace, LimitBytes: limit,
				Reason: fmt.Sprintf("NOSPACE: compacting at revision %d, then defragmenting every member and disarming", o.Revision)}
		}
		if m, leader, ok := nextToDefragment(o.Members, o.Progress.Defragmented); ok {
			why := fmt.Sprintf("NOSPACE: compacted at revision %d; defragmenting member %s", o.Revision, m.Name)
			if leader {
				why += ", the leader, last"
			}
			return SpaceStep{Kind: SpaceRecoverDefragment, Revision: o.Revision, Member: m, Alarms: noSpace, LimitBytes: limit, Reason: why}
		}
		recovered = o.Revision
	}
	advice := o.QuotaAdvice
	if advice == "" {
		advice = "raise the space quota"
	}
	for _, m := range o.Members {
		if m.DBSize >= limit {
			return SpaceStep{Kind: SpaceBlocked, Recovered: recovered, Reason: fmt.Sprintf(
				"NOSPACE: member %s holds %s of data after compaction and defragmentation, above %d%% of the %s quota: "+
					"delete keys (etcd accepts deletes under NOSPACE), or %s, "+
					"then the operator compacts, defragments and disarms the alarm", m.Name, mib(m.DBSizeInUse), disarmBelowPercent, mib(o.QuotaBytes), advice)}
		}
	}
	return SpaceStep{Kind: SpaceDisarm, Alarms: noSpace, Recovered: recovered, Reason: fmt.Sprintf(
		"NOSPACE: every member's database is below %d%% of the %s quota after compaction and defragmentation: disarming the alarm",
		disarmBelowPercent, mib(o.QuotaBytes))}
}

// nextToDefragment is the next voter of a recovery not in done: followers by name, then the leader (a
// member serves nothing while it defragments: the leader's pause stalls every write, so it comes once,
// last). ok is false once every voter is done.
func nextToDefragment(members []Member, done []uint64) (m Member, leader, ok bool) {
	var last *Member
	for _, v := range byName(members) {
		switch {
		case v.Learner || slices.Contains(done, v.ID):
		case v.Leader:
			last = &v
		default:
			return v, false, true
		}
	}
	if last != nil {
		return *last, true, true
	}
	return Member{}, false, false
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
