// Package membership decides the next safe step that moves an etcd cluster's membership, version and
// health towards the spec. Plan is a pure function of what was observed: no memory between calls, so a
// restarted operator continues exactly where a killed one stopped. etcd's member list is the source of
// truth; the only intent persisted elsewhere is a "replace this volume" mark on a member's claim, because
// once a member is removed nothing else tells its stale data apart from retained data.
package membership

import (
	"fmt"
	"slices"
	"time"
)

// Member is an etcd member as observed, mapped to a StatefulSet ordinal.
type Member struct {
	ID uint64
	// Ordinal is the member's StatefulSet ordinal, or -1 for a member the operator does not know.
	Ordinal int
	Name    string
	Learner bool
	// Started is false for a member added to the cluster whose process has not joined yet.
	Started bool
	Healthy bool
	Leader  bool
	// RaftIndex the member reports; learners are promotable once close to the leader's.
	RaftIndex uint64
	// UnhealthySince is when the member was first seen unhealthy (zero when healthy).
	UnhealthySince time.Time
	// ClaimReplaced is true when the member's ordinal has another volume claim than the one recorded as
	// holding its data: etcd lets a member whose data directory is empty rejoin under its old ID (it
	// finds itself by its peer URL), healthy but without the raft state it had acknowledged.
	ClaimReplaced bool
}

// Pod is a member pod as observed.
type Pod struct {
	Ready       bool
	UpToDate    bool // runs the desired image and template
	Terminating bool
}

// Volume is a member's data claim as observed.
type Volume struct {
	// MemberID is the etcd member whose data the claim holds (0 if never recorded).
	MemberID uint64
	// Replace marks the claim's data for replacement (a heal in progress).
	Replace bool
	// Deleting is true once the claim has a deletion timestamp: its data goes with it, irrevocably.
	Deleting bool
	// Created is when the claim was created (zero if unknown).
	Created time.Time
}

// Observed is everything Plan needs.
type Observed struct {
	Desired int
	// StatefulSetReplicas is the current replica count (-1 when the StatefulSet does not exist).
	StatefulSetReplicas int
	// Formed is true once the cluster has ever had quorum (it then never bootstraps again).
	Formed bool
	// Reachable is true when etcd answered the member list.
	Reachable bool
	Members   []Member
	Pods      map[int]Pod
	Volumes   map[int]Volume
	Now       time.Time
	// HealAfter is how long a member may stay unhealthy before it is replaced.
	HealAfter time.Duration
	// TargetVersion is the spec's etcd version, for progress messages.
	TargetVersion string
}

// ActionType names one step.
type ActionType string

// Steps, each exactly one mutating call.
const (
	ActionNone         ActionType = ""
	ActionAddLearner   ActionType = "AddLearner"
	ActionPromote      ActionType = "Promote"
	ActionMoveLeader   ActionType = "MoveLeader"
	ActionRemove       ActionType = "Remove"
	ActionDeletePod    ActionType = "DeletePod"
	ActionMarkReplace  ActionType = "MarkVolumeForReplacement"
	ActionDeleteVolume ActionType = "DeleteVolume"
)

// Action is the one mutating step to take now.
type Action struct {
	Type    ActionType
	Ordinal int    // member ordinal the step is about
	ID      uint64 // member ID (Promote, Remove, MoveLeader target)
}

// Phase says what the cluster is doing, for status.
type Phase string

// Phases of a plan.
const (
	PhaseBootstrapping Phase = "Bootstrapping"
	PhaseScaling       Phase = "Scaling"
	PhaseUpgrading     Phase = "Upgrading"
	PhaseHealing       Phase = "Healing"
	PhaseBlocked       Phase = "Blocked"
	PhaseWaiting       Phase = "Waiting"
	PhaseStable        Phase = "Stable"
)

// Decision is the plan's output: the StatefulSet size, the configuration new members start with, and at
// most one mutating step.
type Decision struct {
	Replicas int
	// Config is nil when the current configuration must be left as it is (etcd unreachable).
	Config *Config
	Action Action
	Phase  Phase
	// Message explains the phase for status and events.
	Message string
	// Unknown lists members the operator does not manage; they are reported, never removed.
	Unknown []Member
}

// Config is what a member with an empty data directory starts with.
type Config struct {
	// Ordinals of the members in the initial cluster list, in order; with State "existing" these are the
	// members currently in etcd (learners included).
	Ordinals []int
	State    string
}

// InProgress reports whether the cluster is still moving (the controller requeues soon).
func (d Decision) InProgress() bool { return d.Phase != PhaseStable }

// Quorum is the majority of n voters.
func Quorum(n int) int { return n/2 + 1 }

// Plan returns the next step. Rules, in order:
//  1. no StatefulSet yet, or never formed: bootstrap all members at once with a static member list;
//  2. etcd unreachable: change nothing;
//  3. finish a replacement in progress (remove the member, then its data);
//  4. promote a started learner once it has caught up, after giving it its pod;
//  5. replace a member unhealthy for longer than HealAfter, if quorum holds without it;
//  6. scale up by one learner, only while every member is healthy;
//  7. scale down one member, highest ordinal first, leader moved away first, never below quorum;
//  8. roll outdated pods one at a time, followers first and the leader last;
//  9. otherwise stable.
func Plan(o Observed) Decision {
	// 1. Bootstrap: a new cluster starts every member together from a static list (fast).
	if o.StatefulSetReplicas < 0 || (!o.Formed && !o.Reachable) {
		n := o.Desired
		if o.StatefulSetReplicas > 0 {
			n = o.StatefulSetReplicas // the bootstrap size is fixed once pods exist
		}
		return Decision{Replicas: n, Config: &Config{Ordinals: seq(n), State: "new"}, Phase: PhaseBootstrapping,
			Message: fmt.Sprintf("bootstrapping %d members", n)}
	}
	// 2. Unreachable after formation: nothing is safe to change.
	if !o.Reachable {
		return Decision{Replicas: o.StatefulSetReplicas, Phase: PhaseWaiting, Message: "etcd is unreachable; waiting"}
	}

	var ours, unknown []Member
	for _, m := range o.Members {
		if m.Ordinal < 0 {
			unknown = append(unknown, m)
		} else {
			ours = append(ours, m)
		}
	}
	slices.SortFunc(ours, func(a, b Member) int { return a.Ordinal - b.Ordinal })
	d := Decision{Config: configFor(ours), Unknown: unknown, Replicas: o.StatefulSetReplicas}
	maxOrdinal := -1
	for _, m := range ours {
		maxOrdinal = max(maxOrdinal, m.Ordinal)
	}
	// The StatefulSet covers every member; it shrinks only once members are gone.
	d.Replicas = maxOrdinal + 1
	voters, healthyVoters := 0, 0
	for _, m := range o.Members {
		if !m.Learner {
			voters++
			if m.Healthy {
				healthyVoters++
			}
		}
	}
	leader := leaderOf(o.Members)

	// canLose reports whether quorum survives losing voter m.
	canLose := func(m Member) (bool, string) {
		if m.Learner {
			return true, ""
		}
		remaining := healthyVoters
		if m.Healthy {
			remaining--
		}
		if need := Quorum(voters - 1); remaining < need {
			return false, fmt.Sprintf("removing %s would leave %d healthy of %d voting members; quorum needs %d", m.Name, remaining, voters-1, need)
		}
		return true, ""
	}
	// removeSafely moves leadership away first, then removes.
	removeSafely := func(m Member, phase Phase, why string) Decision {
		if ok, msg := canLose(m); !ok {
			d.Phase, d.Message = PhaseBlocked, msg
			return d
		}
		if m.Leader {
			if to, ok := transferTarget(ours, m); ok {
				d.Action, d.Phase, d.Message = Action{Type: ActionMoveLeader, Ordinal: to.Ordinal, ID: to.ID}, phase,
					fmt.Sprintf("moving leadership from %s to %s before removing it", m.Name, to.Name)
				return d
			}
		}
		d.Action, d.Phase, d.Message = Action{Type: ActionRemove, Ordinal: m.Ordinal, ID: m.ID}, phase, why
		return d
	}

	// 3. A replacement in progress: remove the member, then delete its data.
	for ord, v := range o.Volumes {
		if !v.Replace {
			continue
		}
		if m, ok := byOrdinal(ours, ord); ok {
			return removeSafely(m, PhaseHealing, fmt.Sprintf("removing %s to replace its data", m.Name))
		}
		d.Action, d.Phase, d.Message = Action{Type: ActionDeleteVolume, Ordinal: ord}, PhaseHealing,
			fmt.Sprintf("deleting the data of member %d to re-add it empty", ord)
		return d
	}

	// 4. Learners: give a learner its pod, then promote it once it caught up.
	for _, m := range ours {
		if !m.Learner {
			continue
		}
		switch {
		case !m.Started:
			d.Phase, d.Message = PhaseScaling, fmt.Sprintf("starting learner %s", nameOr(m))
		case leader != nil && m.RaftIndex+promoteLag < leader.RaftIndex:
			d.Phase, d.Message = PhaseScaling, fmt.Sprintf("learner %s catching up (raft index %d of %d)", m.Name, m.RaftIndex, leader.RaftIndex)
		default:
			d.Action, d.Phase, d.Message = Action{Type: ActionPromote, Ordinal: m.Ordinal, ID: m.ID}, PhaseScaling,
				fmt.Sprintf("promoting learner %s", m.Name)
		}
		return d
	}

	// 5. Heal: a voter unhealthy for too long, or whose data is provably gone, gets a fresh start.
	for _, m := range ours {
		v, hasVolume := o.Volumes[m.Ordinal]
		if hasVolume && v.Deleting && v.MemberID == m.ID {
			// The claim holding this member's data is being deleted: the data cannot come back, so the
			// member is removed now (no mark: the claim carrying it is going), then re-added empty.
			return removeSafely(m, PhaseHealing, fmt.Sprintf("removing %s: the volume claim holding its data is being deleted", m.Name))
		}
		dataLost := hasVolume && v.MemberID != 0 && v.MemberID != m.ID
		// A claim never recorded as holding a member's data, created after this started member was last
		// healthy (the controller records every healthy member's claim), cannot hold its data: the pod
		// came back with an empty volume, which etcd refuses for an existing member.
		dataLost = dataLost || (hasVolume && !v.Deleting && v.MemberID == 0 && m.Started && !m.Healthy &&
			!m.UnhealthySince.IsZero() && !v.Created.IsZero() && v.Created.After(m.UnhealthySince))
		dataLost = dataLost || (hasVolume && !v.Deleting && m.ClaimReplaced)
		tooLong := !m.Healthy && !m.UnhealthySince.IsZero() && o.Now.Sub(m.UnhealthySince) >= o.HealAfter
		if !dataLost && !tooLong {
			continue
		}
		if ok, msg := canLose(m); !ok {
			d.Phase, d.Message = PhaseBlocked, "cannot heal: "+msg
			return d
		}
		d.Action, d.Phase = Action{Type: ActionMarkReplace, Ordinal: m.Ordinal, ID: m.ID}, PhaseHealing
		d.Message = fmt.Sprintf("replacing %s: unhealthy since %s", m.Name, m.UnhealthySince.UTC().Format(time.RFC3339))
		if dataLost {
			d.Message = fmt.Sprintf("replacing %s: its data volume was replaced", m.Name)
		}
		return d
	}

	allHealthy := healthyVoters == voters
	// 6. Scale up by one learner at a time, into the lowest free ordinal.
	if len(ours) < o.Desired {
		if !allHealthy {
			d.Phase, d.Message = PhaseWaiting, fmt.Sprintf("waiting for all members to be healthy before adding one (%d of %d)", healthyVoters, voters)
			return d
		}
		k := 0
		for ; k < o.Desired; k++ {
			if _, ok := byOrdinal(ours, k); !ok {
				break
			}
		}
		if p, ok := o.Pods[k]; ok && !p.Terminating && k >= d.Replicas && o.StatefulSetReplicas > k {
			// A pod of a removed member still runs: shrink the StatefulSet before re-adding.
			d.Phase, d.Message = PhaseScaling, fmt.Sprintf("waiting for the old pod of member %d to go", k)
			return d
		}
		if v, ok := o.Volumes[k]; ok && v.Deleting && v.MemberID != 0 && !memberIDIn(o.Members, v.MemberID) &&
			(!podExists(o.Pods, k) || o.Pods[k].Terminating) {
			// The removed member's claim and pod are already going: wait for them instead of deleting again.
			d.Phase, d.Message = PhaseHealing, fmt.Sprintf("waiting for the old data of member %d to go", k)
			return d
		}
		if v, ok := o.Volumes[k]; ok && v.MemberID != 0 && !memberIDIn(o.Members, v.MemberID) {
			d.Action, d.Phase, d.Message = Action{Type: ActionDeleteVolume, Ordinal: k}, PhaseScaling,
				fmt.Sprintf("deleting stale data of removed member %d before re-adding it", k)
			return d
		}
		d.Action, d.Phase, d.Message = Action{Type: ActionAddLearner, Ordinal: k}, PhaseScaling,
			fmt.Sprintf("adding member %d as a learner (%d of %d members)", k, len(ours)+1, o.Desired)
		return d
	}

	// 7. Scale down one member at a time, highest ordinal first.
	if len(ours) > o.Desired {
		m := ours[len(ours)-1]
		return removeSafely(m, PhaseScaling, fmt.Sprintf("removing %s (%d to %d members)", m.Name, len(ours), o.Desired))
	}
	if o.StatefulSetReplicas > d.Replicas {
		d.Phase, d.Message = PhaseScaling, fmt.Sprintf("shrinking the StatefulSet to %d", d.Replicas)
		return d
	}

	// 8. Rolling restart onto the desired template: one pod at a time, each only when all are healthy.
	var outdated []Member
	for _, m := range ours {
		if p, ok := o.Pods[m.Ordinal]; ok && !p.UpToDate {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) > 0 {
		done := len(ours) - len(outdated)
		d.Phase = PhaseUpgrading
		notReady := false
		for _, m := range ours {
			if p := o.Pods[m.Ordinal]; !p.Ready || p.Terminating || !m.Healthy {
				notReady = true
			}
		}
		if notReady || !allHealthy {
			d.Message = fmt.Sprintf("upgrading to %s (%d/%d): waiting for every member to be healthy", o.TargetVersion, done, len(ours))
			return d
		}
		next := outdated[0]
		for _, m := range outdated {
			if !m.Leader {
				next = m
				break
			}
		}
		if next.Leader {
			if to, ok := transferTarget(ours, next); ok {
				d.Action = Action{Type: ActionMoveLeader, Ordinal: to.Ordinal, ID: to.ID}
				d.Message = fmt.Sprintf("upgrading to %s (%d/%d): moving leadership from %s to %s", o.TargetVersion, done, len(ours), next.Name, to.Name)
				return d
			}
		}
		d.Action = Action{Type: ActionDeletePod, Ordinal: next.Ordinal, ID: next.ID}
		d.Message = fmt.Sprintf("upgrading %s to %s (%d/%d)", next.Name, o.TargetVersion, done+1, len(ours))
		return d
	}

	d.Phase, d.Message = PhaseStable, fmt.Sprintf("%d members", len(ours))
	if !allHealthy {
		d.Phase, d.Message = PhaseWaiting, fmt.Sprintf("%d of %d voting members healthy", healthyVoters, voters)
	}
	return d
}

// promoteLag is how far (in raft entries) a learner may trail the leader and still be promoted; etcd
// itself refuses promotion until the learner is close enough.
const promoteLag = 1000

func configFor(ours []Member) *Config {
	c := &Config{State: "existing"}
	for _, m := range ours {
		c.Ordinals = append(c.Ordinals, m.Ordinal)
	}
	return c
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func leaderOf(ms []Member) *Member {
	for i := range ms {
		if ms[i].Leader {
			return &ms[i]
		}
	}
	return nil
}

func byOrdinal(ms []Member, ord int) (Member, bool) {
	for _, m := range ms {
		if m.Ordinal == ord {
			return m, true
		}
	}
	return Member{}, false
}

func podExists(pods map[int]Pod, ord int) bool {
	_, ok := pods[ord]
	return ok
}

func memberIDIn(ms []Member, id uint64) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// transferTarget picks the healthy started voter (not from) with the lowest ordinal, preferring members
// already up to date is left to the caller's order.
func transferTarget(ours []Member, from Member) (Member, bool) {
	for _, m := range ours {
		if m.ID != from.ID && !m.Learner && m.Started && m.Healthy {
			return m, true
		}
	}
	return Member{}, false
}

func nameOr(m Member) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("member %d", m.Ordinal)
}
