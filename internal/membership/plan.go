// Package membership decides the next safe step that moves an etcd cluster's membership, version and
// health towards the spec. Plan is a pure function of what was observed: no memory between calls, so a
// restarted operator continues exactly where a killed one stopped. etcd's member list is the source of
// truth; the only intent persisted elsewhere is a "replace this volume" mark on a member's claim, because
// once a member is removed nothing else tells its stale data apart from retained data.
//
// The decision is made by rules (rules.go), tried in a fixed order; the first that claims the situation
// decides. Each rule is a small pure function over the observation and the view derived from it.
package membership

import (
	"cmp"
	"slices"
	"time"
)

// Member is an etcd member as observed, mapped to a StatefulSet ordinal.
type Member struct {
	ID uint64
	// Ordinal is the member's StatefulSet ordinal, or -1 for a member the operator does not know.
	Ordinal int
	Name    string
	// PeerURL is the first peer URL etcd has registered for the member ("" when unknown).
	PeerURL string
	Learner bool
	// Started is false for a member added to the cluster whose process has not joined yet.
	Started bool
	Healthy bool
	Leader  bool
	// Answered: the member answered the operator's status call itself, so Version and RaftIndex are its own.
	Answered bool
	// Version is the etcd version the member reports ("" when it did not answer).
	Version string
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
	// CannotStart is the kubelet's reason why the etcd container cannot run (ImagePullBackOff,
	// CrashLoopBackOff, ...), "" while it runs or is merely being created.
	CannotStart string
	// NeverRan: etcd has never run in this pod (the kubelet reports its container waiting, never started
	// or restarted): the pod serves nothing and holds no vote, and replacing it leaves its volume as it is.
	NeverRan bool
	// Pending is the scheduler's reason why the pod is not placed on a node (Unschedulable: its message),
	// "" once it is scheduled.
	Pending string
	// StaleData is the member gate's refusal: the pod's volume holds the data of a member etcd no longer
	// has, so etcd must not start on it ("" when the gate did not refuse).
	StaleData string
	// Created is when the pod was created (zero if unknown): a member's heal clock never starts before
	// its current pod did.
	Created time.Time
	// UID tells one pod of an ordinal from the next.
	UID string
	// GateHoldsForRecovery: the pod's member gate keeps etcd from starting on its data while the
	// configuration forces another member to start alone (a gate from before quorum-loss recovery does not).
	GateHoldsForRecovery bool
	// RestoreRecovery is the recovery from a backup the pod's restore step is for ("" for none).
	RestoreRecovery string
	// Node is the node the pod is bound to ("" before it is scheduled).
	Node string
	// NodeDown says why that node does not run the pod as far as the API server knows: NodeNotReady,
	// NodeUnknown (its kubelet stopped reporting: powered off, or cut off from the API server) or NodeGone
	// (no Node object); "" while the node is Ready, and for a pod not scheduled.
	NodeDown string
	// NodeDownSince is when the node's Ready condition last changed (zero for a node that is gone).
	NodeDownSince time.Time
}

// Why a pod's node does not run it (Pod.NodeDown): its Ready condition, or its absence.
const (
	NodeNotReady = "NotReady"
	NodeUnknown  = "Unknown"
	NodeGone     = "Gone"
)

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
	// Node is the node a node-local volume binds the claim to (the scheduler's choice for a claim bound on
	// first use), "" when unknown: a pod of this claim can run there only.
	Node string
}

// Observed is everything Plan needs.
type Observed struct {
	Desired int
	// StatefulSetReplicas is the current replica count (-1 when the StatefulSet does not exist).
	StatefulSetReplicas int
	// Formed is true once the cluster has ever had quorum (it then never bootstraps again).
	Formed bool
	// KnownOrdinals are the ordinals of the members last reported in status; they size a StatefulSet
	// recreated while etcd cannot be asked.
	KnownOrdinals []int
	// Reachable is true when etcd answered the member list.
	Reachable bool
	// InitialClusterIntact: etcd's members are exactly those it bootstrapped with (their IDs and the
	// cluster's ID are those the bootstrap derives from their peer URLs and token; nothing added or
	// removed since). A member of it that never started may then still start as one of the bootstrap's.
	InitialClusterIntact bool
	// QuorumSince is when a quorum of healthy voters was last regained (zero if unknown): no member's
	// heal clock runs while the cluster itself is down.
	QuorumSince time.Time
	Members     []Member
	Pods        map[int]Pod
	Volumes     map[int]Volume
	Now         time.Time
	// HealAfter is how long a member may stay unhealthy before it is replaced.
	HealAfter time.Duration
	// TargetVersion is the spec's etcd version.
	TargetVersion string
	// JoinGated is true when new member pods run the member gate, which holds etcd back until the
	// operator has added the member: only then may a pod start before its member is in etcd.
	JoinGated bool
	// StrictSpread: the scheduler places a member only where nodes stay within one member of each other
	// (spread Required), so two members' pods never share a node for long.
	StrictSpread bool
	// MaxLearners is how many learners every member of etcd accepts at once (etcd's --max-learners, 1 by
	// default and on etcd 3.5): the lowest setting among the members' pods and the template new pods get.
	// Each member checks the limit when it applies a membership change, so a learner only some of them
	// accept would split their views of the cluster; the controller counts a member whose setting it
	// cannot see as 1.
	MaxLearners int
	// Recovery is what quorum-loss recovery needs (recovery.go).
	Recovery Recovery
}

// ActionType names one step.
type ActionType string

// Steps, each exactly one mutating call.
const (
	ActionNone          ActionType = ""
	ActionAddLearner    ActionType = "AddLearner"
	ActionPromote       ActionType = "Promote"
	ActionMoveLeader    ActionType = "MoveLeader"
	ActionRemove        ActionType = "Remove"
	ActionDeletePod     ActionType = "DeletePod"
	ActionMarkReplace   ActionType = "MarkVolumeForReplacement"
	ActionUnmarkReplace ActionType = "UnmarkVolumeForReplacement"
	ActionDeleteVolume  ActionType = "DeleteVolume"
	// ActionBindPod places a pod on the one node its volume allows, as the scheduler would (a binding).
	ActionBindPod ActionType = "BindPod"
)

// Action is the one mutating step to take now.
type Action struct {
	Type    ActionType
	Ordinal int    // member ordinal the step is about
	ID      uint64 // member ID (Promote, Remove, MoveLeader target)
	// Force (DeleteVolume): the pod is on a lost node (nodeLost) and is deleted with grace period 0. Its
	// kubelet does not confirm the end of a pod, and until the pod is gone, its claim stays (pvc-protection)
	// and the StatefulSet creates no pod in its place.
	Force bool
	// Node (BindPod) is the node to bind the pod to.
	Node string
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
	// PhaseStalled: a member pod cannot run etcd (its image does not pull, its container crash-loops
	// after a version change). Nothing more is changed until it runs or the spec changes.
	PhaseStalled Phase = "Stalled"
	PhaseWaiting Phase = "Waiting"
	// PhaseRecovering: a cluster that lost its majority for good is rebuilt from a survivor.
	PhaseRecovering Phase = "Recovering"
	PhaseStable     Phase = "Stable"
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
	// AwaitsLearner: a learner is starting or catching up, and nothing else is to be done. etcd's view of
	// it changes within a second, and no Kubernetes event says so (a learner's pod is never Ready), so the
	// controller looks again sooner than at its usual step interval.
	AwaitsLearner bool
}

// Initial cluster states etcd understands (ETCD_INITIAL_CLUSTER_STATE).
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// Config is what a member with an empty data directory starts with.
type Config struct {
	// Members of the initial cluster list, in order; with State "existing" these are every member
	// currently in etcd (learners and members the operator does not manage included), because etcd
	// refuses to join a cluster whose member list differs from its initial cluster.
	Members []ConfigMember
	State   string
	// ForceNewCluster, during a quorum-loss recovery, restarts one member alone (nil otherwise).
	ForceNewCluster *ForceNewCluster
	// Restore, during a quorum-loss recovery from a backup, restores every member (nil otherwise).
	Restore *RestoreRecovery
	// Late, with State "new" once the cluster formed, are the ordinals of the initial members that never
	// started: only they may still bootstrap; any other member found with an empty data directory lost
	// data it had, and its member gate holds it back.
	Late []int
}

// ConfigMember is one entry of the initial cluster list.
type ConfigMember struct {
	// Ordinal is the StatefulSet ordinal (-1 for a member the operator does not manage).
	Ordinal int
	// Name is the member's name in etcd ("" to use the ordinal's pod name).
	Name string
	// PeerURL is the URL etcd has registered ("" to use the ordinal's stable URL).
	PeerURL string
}

// Ordinals lists the ordinals of the managed members in the list.
func (c *Config) Ordinals() []int {
	var out []int
	for _, m := range c.Members {
		if m.Ordinal >= 0 {
			out = append(out, m.Ordinal)
		}
	}
	return out
}

// InProgress reports whether the cluster is still moving (the controller requeues soon).
func (d Decision) InProgress() bool { return d.Phase != PhaseStable }

// Quorum is the majority of n voters.
func Quorum(n int) int { return n/2 + 1 }

// Plan returns the next step: the decision of the first rule (rules.go) that claims the situation.
func Plan(o Observed) Decision {
	if d, ok := bootstrap(o); ok {
		return d
	}
	if d, ok := recoverQuorum(o); ok {
		return d
	}
	if d, ok := unreachable(o); ok {
		return d
	}
	v := newView(o)
	for _, r := range rules {
		if d, ok := r.decide(o, v); ok {
			d.Unknown = v.unknown
			if d.Config == nil {
				d.Config = v.config
			}
			return d
		}
	}
	panic("membership: the last rule always decides")
}

// view is what every rule derives from a reachable cluster's observation, computed once.
type view struct {
	ours    []Member // managed members, by ordinal
	unknown []Member
	// replicas is the StatefulSet size that covers every member.
	replicas      int
	voters        int
	healthyVoters int
	leader        *Member
	config        *Config
	// healClockStart is the earliest a heal clock may start: when quorum was last regained.
	healClockStart time.Time
}

func newView(o Observed) view {
	v := view{healClockStart: o.QuorumSince}
	for _, m := range o.Members {
		if m.Ordinal < 0 {
			v.unknown = append(v.unknown, m)
		} else {
			v.ours = append(v.ours, m)
		}
		if !m.Learner {
			v.voters++
			if m.Healthy {
				v.healthyVoters++
			}
		}
	}
	slices.SortFunc(v.ours, compareOrdinals)
	slices.SortFunc(v.unknown, compareIDs)
	v.leader = leaderOf(v.ours, v.unknown)
	// The StatefulSet covers every member; it shrinks only once members are gone. While etcd holds
	// members the operator cannot place (their URLs match no ordinal), it never shrinks at all: they may
	// be its own members under a name it no longer recognises.
	v.replicas = 0
	for _, m := range v.ours {
		v.replicas = max(v.replicas, m.Ordinal+1)
	}
	if len(v.unknown) > 0 {
		v.replicas = max(v.replicas, o.StatefulSetReplicas)
	}
	v.replicas = max(v.replicas, startAhead(o, v))
	if _, ok := awaitingReAdd(o, v); ok && o.StatefulSetReplicas >= 0 {
		// A member being replaced keeps its pod slot, even the highest ordinal's: the StatefulSet does not
		// shrink below the spec's size while a removed member awaits its re-add.
		v.replicas = max(v.replicas, min(o.Desired, o.StatefulSetReplicas))
	}
	v.config = existingConfig(v.ours, v.unknown)
	if late := lateBootstrap(o, v); len(late) > 0 {
		v.config.State, v.config.Late = StateNew, late
	}
	return v
}

// lateBootstrap returns the initial members that never started in a cluster that formed without them
// (their volumes came late), while etcd's members are still exactly those it bootstrapped with. They start
// as members of the bootstrap, from the same list ("new"): told to join an "existing" cluster, etcd 3.5
// waits on its peers with an empty data directory until the member is replaced. Only they may: the list
// lets the member gate hold back any other member whose data directory is empty (data it had is lost).
func lateBootstrap(o Observed, v view) []int {
	if !o.InitialClusterIntact || len(v.unknown) > 0 {
		return nil
	}
	var late []int
	for _, m := range v.ours {
		if m.Learner {
			return nil
		}
		if !m.Started {
			late = append(late, m.Ordinal)
		}
	}
	return late
}

// startAhead is the StatefulSet size that starts the pods of members yet to be added: while the cluster
// grows, a new pod is scheduled, gets its volume and pulls its image while earlier members join, then
// waits in its member gate until the operator adds its member (as many learners at once as etcd
// accepts). Only fresh ordinals start ahead: a claim recorded as holding a member's data, or being
// deleted, and a pod going away or refused by its gate are left to scaleUp, nothing starts ahead while
// etcd holds members the operator cannot place, nor while the StatefulSet is being recreated.
func startAhead(o Observed, v view) int {
	if !o.JoinGated || len(v.unknown) > 0 || len(v.ours) >= o.Desired || o.StatefulSetReplicas < 0 {
		return 0
	}
	n := v.replicas
	for ord := v.replicas; ord < o.Desired; ord++ {
		if vol, ok := o.Volumes[ord]; ok && (vol.MemberID != 0 || vol.Deleting) {
			break
		}
		if p, ok := o.Pods[ord]; ok && (p.Terminating || p.StaleData != "") {
			break
		}
		n = ord + 1
	}
	return n
}

func (v view) allHealthy() bool { return v.healthyVoters == v.voters }

func existingConfig(ours, unknown []Member) *Config {
	c := &Config{State: StateExisting}
	for _, m := range ours {
		c.Members = append(c.Members, ConfigMember{Ordinal: m.Ordinal, Name: m.Name, PeerURL: m.PeerURL})
	}
	for _, m := range unknown {
		c.Members = append(c.Members, ConfigMember{Ordinal: -1, Name: m.Name, PeerURL: m.PeerURL})
	}
	return c
}

// compareOrdinals orders members by ordinal; compareIDs by etcd member ID.
func compareOrdinals(a, b Member) int { return cmp.Compare(a.Ordinal, b.Ordinal) }

func compareIDs(a, b Member) int { return cmp.Compare(a.ID, b.ID) }

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func leaderOf(lists ...[]Member) *Member {
	for _, ms := range lists {
		for i := range ms {
			if ms[i].Leader {
				return &ms[i]
			}
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

func memberIDIn(ms []Member, id uint64) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// sortedOrdinals returns the keys of an ordinal-keyed map in order, so no rule depends on map order.
func sortedOrdinals[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
