package membership

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Recovery is what quorum-loss recovery needs: the spec's choice, how long the majority has been lost, the
// voters last known and the members that still answer for themselves.
type Recovery struct {
	// FromSurvivor: the spec allows rebuilding the cluster from its best surviving member.
	FromSurvivor bool
	// FromBackup: the spec allows rebuilding the cluster from its newest backup (restore.go).
	FromBackup bool
	// Backup is the newest backup of the cluster that a restore can read (nil when there is none).
	Backup *Backup
	// Continuous is the newest point of the cluster's continuous backup a replay can restore (Replay; nil
	// when there is none), and ContinuousProblem why there is none while the cluster has one.
	Continuous        *Backup
	ContinuousProblem string
	// ReplayFailed says why the replay of the recorded recovery's continuous backup failed ("" while it
	// runs, once it succeeded, or when there is none).
	ReplayFailed string
	// Restoring is the configuration's record of a restore from a backup under way (nil when none).
	Restoring *RestoreRecovery
	// TemplateRestores is the recovery the members' pod template restores for ("" for none).
	TemplateRestores string
	// After is how long the majority must have been lost first.
	After time.Duration
	// LostSince is when the majority was found lost (zero while it is not).
	LostSince time.Time
	// Voters are the voting members last reported while etcd answered, with whether their data is still
	// on their volumes.
	Voters []Voter
	// Survivors are the members whose etcd answers for itself (its status needs no quorum), by ordinal.
	Survivors map[int]Survivor
	// TemplateGateHolds: pods the StatefulSet creates run a member gate that holds etcd back on its data
	// while another member is forced to start alone (Pod.GateHoldsForRecovery for pods that exist).
	TemplateGateHolds bool
	// Forcing is the configuration's instruction to restart a member with --force-new-cluster (nil when
	// none).
	Forcing *ForceNewCluster
}

// Voter is a voting member as last reported.
type Voter struct {
	Ordinal int
	ID      uint64
	Name    string
	// HasData: the member's volume claim is the one recorded as holding its data, and is not being deleted.
	HasData bool
}

// Survivor is a member's own answer while the member list cannot be read.
type Survivor struct {
	ID        uint64
	RaftIndex uint64
	Learner   bool
}

// ForceNewCluster is the configuration's one-shot instruction for a quorum-loss recovery: the member named
// restarts alone on its data (etcd's --force-new-cluster); every other member with data waits in its gate.
// The configuration records the decision, and must hold it before the pod is deleted, for the new pod's
// gate to read; the forced start itself reaches only that pod's etcd, once (a ticket in the pod's own
// volume, membergate.EtcdStart).
type ForceNewCluster struct {
	Member string
	// OldPod is the UID of the member's pod when the instruction was written: that pod started without it
	// and is restarted; any later pod runs with it. (A UID, not a time: no clock is compared.)
	OldPod string
}

// recoverQuorum rebuilds a cluster that lost its majority for good, from the surviving voter with the
// highest raft index, when the spec allows it:
//  1. choose the survivor, name it in the configuration, and then restart its pod (the new pod's gate, which
//     reads the configuration once, hands --force-new-cluster to that pod's etcd alone);
//  2. wait for it to come back alone (then etcd answers again, and endForcedStart clears the instruction);
//  3. the others rejoin empty as learners, through the ordinary rules (scale up, stale data).
//
// It never acts while a majority may still come back: members that still hold their data (answering or
// not: a node that is down, a pod that is slow) count towards it, and only when fewer than a quorum of
// the voters last known remain, for longer than After, is the survivor forced.
func recoverQuorum(o Observed) (Decision, bool) {
	rc := o.Recovery
	if o.Reachable || !o.Formed || o.StatefulSetReplicas < 0 {
		return Decision{}, false // (a missing StatefulSet is recreated first: unreachable)
	}
	if rc.Forcing != nil {
		return continueForcedStart(o), true
	}
	if rc.Restoring != nil {
		return continueRestore(o, *rc.Restoring), true
	}
	if !rc.FromSurvivor && !rc.FromBackup || rc.LostSince.IsZero() || len(rc.Voters) == 0 {
		return Decision{}, false
	}
	wait, _ := unreachable(o)
	withData := 0
	for _, v := range rc.Voters {
		if _, answers := rc.Survivors[v.Ordinal]; answers || v.HasData {
			withData++
		}
	}
	if need := Quorum(len(rc.Voters)); withData >= need {
		wait.Message = fmt.Sprintf("etcd has no quorum; %d of %d voters still hold their data (quorum %d), so the majority may come back: no automatic recovery",
			withData, len(rc.Voters), need)
		if down := nodesDown(o); down != "" {
			// A lost node's data is still its member's: it may come back with the node.
			wait.Message += " (" + down + ")"
		}
		return wait, true
	}
	if at := rc.LostSince.Add(rc.After); o.Now.Before(at) {
		from := "a survivor"
		if rc.FromBackup {
			from = "the newest backup"
		}
		wait.Message = fmt.Sprintf("etcd has no quorum and only %d of %d voters hold their data; recovering from %s at %s unless the majority comes back",
			withData, len(rc.Voters), from, at.UTC().Format(time.RFC3339))
		return wait, true
	}
	if rc.FromBackup {
		return startRestore(o, wait), true
	}
	s, ok := bestSurvivor(rc)
	if !ok {
		wait.Message = "etcd has no quorum and no voter answers: nothing to recover from; restore the cluster from a backup"
		return wait, true
	}
	if unguarded := unguarded(o, s); len(unguarded) > 0 {
		wait.Message = fmt.Sprintf("etcd has no quorum; recovering from %s needs every other member pod behind a member gate that holds it back "+
			"meanwhile, and these have a gate from before quorum-loss recovery, or none: %s; recover by hand (the gate comes with the next version change)",
			s.Name, strings.Join(unguarded, ", "))
		return wait, true
	}
	p, ok := o.Pods[s.Ordinal]
	if !ok || p.Terminating {
		wait.Message = fmt.Sprintf("recovering from %s: waiting for its pod", s.Name)
		return wait, true
	}
	var others []string
	for _, v := range rc.Voters {
		if v.Ordinal != s.Ordinal {
			others = append(others, v.Name)
		}
	}
	return Decision{
		Replicas: wait.Replicas,
		Config:   forceConfig(s.Ordinal, ForceNewCluster{Member: s.Name, OldPod: p.UID}),
		Action:   Action{Type: ActionDeletePod, Ordinal: s.Ordinal, ID: s.ID},
		Phase:    PhaseRecovering,
		Message: fmt.Sprintf("quorum lost for good: restarting %s alone (raft index %d, the highest of the members that answer) with --force-new-cluster; %s rejoin empty",
			s.Name, rc.Survivors[s.Ordinal].RaftIndex, strings.Join(others, ", ")),
	}, true
}

// continueForcedStart waits for the forced member to come back alone, restarting its pod if the old one
// still runs (the operator stopped between naming it and restarting it).
func continueForcedStart(o Observed) Decision {
	f := *o.Recovery.Forcing
	wait, _ := unreachable(o)
	d := Decision{Replicas: wait.Replicas, Phase: PhaseRecovering}
	ord := -1
	for _, v := range o.Recovery.Voters {
		if v.Name == f.Member {
			ord = v.Ordinal
		}
	}
	if ord < 0 {
		// The configuration names a member status no longer lists: the configuration stays as it is (with
		// the instruction, and the initial cluster the forced member was given), and status says so.
		d.Message = fmt.Sprintf("recovering from %s: it is not among the voters last known; waiting for it to answer", f.Member)
		return d
	}
	d.Config = forceConfig(ord, f)
	p, ok := o.Pods[ord]
	switch {
	case !ok || p.Terminating:
		d.Message = fmt.Sprintf("recovering from %s: restarting it alone with --force-new-cluster", f.Member)
	case p.UID == f.OldPod:
		d.Action = Action{Type: ActionDeletePod, Ordinal: ord}
		d.Message = fmt.Sprintf("recovering from %s: restarting it alone with --force-new-cluster", f.Member)
	case p.CannotStart != "":
		d.Message = fmt.Sprintf("recovering from %s: it cannot start (%s)", f.Member, p.CannotStart)
	case p.Pending != "":
		d.Message = fmt.Sprintf("recovering from %s: its pod is not scheduled (%s)", f.Member, p.Pending)
		if taker, ok := survivorNodeTaken(o, ord); ok {
			// Freeing the node would not do: a pod that waits longer than the survivor's takes it again
			// first (seen: the empty members took turns). The survivor can run nowhere else. Under a strict
			// spread, the empty member leaves the node before it joins (scaleUp).
			node := o.Volumes[ord].Node
			d.Action = Action{Type: ActionBindPod, Ordinal: ord, Node: node}
			d.Message = fmt.Sprintf("recovering from %s: its volume binds it to node %s, where member %d's pod, which holds no data, took its place; "+
				"binding %s's pod to %s", f.Member, node, taker, f.Member, node)
		}
	default:
		d.Message = fmt.Sprintf("recovering from %s: waiting for it to start alone", f.Member)
	}
	return d
}

// survivorNodeTaken finds the pod that took the survivor's place while the survivor's pod was being restarted:
// the survivor's volume binds it to one node, and a strict spread (or any limit of one member per node) lets
// another member's new pod, waiting for a node of its own, take that node the moment the survivor's old pod
// is gone. That pod must hold no data, which the evidence of recovery already says of every other voter that
// is not answering; it is the one to go, or the cluster never comes back.
func survivorNodeTaken(o Observed, survivor int) (int, bool) {
	node := o.Volumes[survivor].Node
	if node == "" {
		return 0, false
	}
	holdsData := map[int]bool{}
	for _, v := range o.Recovery.Voters {
		_, answers := o.Recovery.Survivors[v.Ordinal]
		holdsData[v.Ordinal] = v.HasData || answers
	}
	for _, ord := range sortedOrdinals(o.Pods) {
		p := o.Pods[ord]
		if ord == survivor || p.Node != node || p.Terminating || holdsData[ord] {
			continue
		}
		return ord, true
	}
	return 0, false
}

// endForcedStart: etcd answers again after a forced start; the instruction is taken out of the
// configuration before anything else happens, so that no later start of the member forces again (which
// would drop every member added since).
func endForcedStart(o Observed, v view) (Decision, bool) {
	if o.Recovery.Forcing == nil {
		return Decision{}, false
	}
	return Decision{Replicas: v.replicas, Phase: PhaseRecovering,
		Message: fmt.Sprintf("%s restarted alone (%d members now); the others rejoin empty, one at a time", o.Recovery.Forcing.Member, len(v.ours))}, true
}

// unguarded names what could start etcd beside s while the configuration forces s: a pod without a gate
// that holds it back would start on its data, and an empty one would join the old cluster by its peer URL
// (finding the member it replaces still listed). So every pod but s's, and the template future pods come
// from (s's new pod among them, whose gate hands it the forced start), must run a gate that holds.
func unguarded(o Observed, s Voter) []string {
	var out []string
	if !o.Recovery.TemplateGateHolds {
		out = append(out, "the pod template")
	}
	for _, ord := range sortedOrdinals(o.Pods) {
		if p := o.Pods[ord]; ord != s.Ordinal && !p.Terminating && !p.GateHoldsForRecovery {
			out = append(out, fmt.Sprintf("member %d's pod", ord))
		}
	}
	return out
}

// bestSurvivor is the answering voter with the highest raft index (then the lowest ordinal): the one with
// the most of the committed log, and so the fewest acknowledged writes lost.
func bestSurvivor(rc Recovery) (Voter, bool) {
	var candidates []Voter
	for _, v := range rc.Voters {
		if s, ok := rc.Survivors[v.Ordinal]; ok && !s.Learner && s.ID == v.ID {
			candidates = append(candidates, v)
		}
	}
	if len(candidates) == 0 {
		return Voter{}, false
	}
	return slices.MinFunc(candidates, func(a, b Voter) int {
		if c := cmp.Compare(rc.Survivors[b.Ordinal].RaftIndex, rc.Survivors[a.Ordinal].RaftIndex); c != 0 {
			return c
		}
		return cmp.Compare(a.Ordinal, b.Ordinal)
	}), true
}

// forceConfig lists only the forced member: a member that starts empty meanwhile finds it alone.
func forceConfig(ord int, f ForceNewCluster) *Config {
	return &Config{State: StateExisting, Members: []ConfigMember{{Ordinal: ord, Name: f.Member}}, ForceNewCluster: &f}
}
