package membership

import (
	"strings"
	"testing"
	"time"
)

// lostMajority is a 3-member cluster whose members 1 and 2 lost their pods and claims: member 0 answers for
// itself, etcd answers no member list, and the majority was lost lostFor ago.
func lostMajority(lostFor time.Duration) Observed {
	o := Observed{Desired: 3, StatefulSetReplicas: 3, Formed: true, Now: now, HealAfter: time.Minute, TargetVersion: "3.5.17", JoinGated: true,
		Pods: map[int]Pod{}, Volumes: map[int]Volume{}}
	for i := range 3 {
		o.Pods[i] = Pod{UID: "pod-" + string(rune('0'+i)), GateHoldsForRecovery: true, Created: now.Add(-time.Hour)}
	}
	o.Recovery = Recovery{FromSurvivor: true, After: 5 * time.Minute, LostSince: now.Add(-lostFor), TemplateGateHolds: true,
		Voters: []Voter{
			{Ordinal: 0, ID: 100, Name: "c-0", HasData: true},
			{Ordinal: 1, ID: 101, Name: "c-1"},
			{Ordinal: 2, ID: 102, Name: "c-2"},
		},
		Survivors: map[int]Survivor{0: {ID: 100, RaftIndex: 5000}},
	}
	return o
}

// lostFive is a 5-member cluster of which members 0 and 3 answer (raft indexes i0 and i3) and the others'
// data is gone, lost long ago.
func lostFive(i0, i3 uint64) Observed {
	o := lostMajority(time.Hour)
	o.Desired, o.StatefulSetReplicas = 5, 5
	for i := 3; i < 5; i++ {
		o.Pods[i] = Pod{UID: "pod-" + string(rune('0'+i)), GateHoldsForRecovery: true}
	}
	o.Recovery.Voters = append(o.Recovery.Voters, Voter{Ordinal: 3, ID: 103, Name: "c-3", HasData: true}, Voter{Ordinal: 4, ID: 104, Name: "c-4"})
	o.Recovery.Survivors = map[int]Survivor{0: {ID: 100, RaftIndex: i0}, 3: {ID: 103, RaftIndex: i3}}
	return o
}

// survivorNodeTakenBy is a forced start of member 0 whose new pod waits for a node while member ord's pod
// runs on n-0, the node member 0's volume is bound to; holdsData says whether member ord still has its data.
func survivorNodeTakenBy(ord int, holdsData bool) Observed {
	o := forcing(lostMajority(time.Hour), Pod{UID: "pod-0b", Pending: "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints"})
	o.Volumes[0] = Volume{MemberID: 100, Node: "n-0"}
	p := o.Pods[ord]
	p.Node = "n-0"
	o.Pods[ord] = p
	o.Recovery.Voters[ord].HasData = holdsData
	return o
}

func TestQuorumLossRecovery(t *testing.T) {
	cases := []planCase{
		{name: "report only: nothing changes",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Recovery.FromSurvivor = false
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "unreachable"},
		{name: "members down with their data: the majority may come back",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Recovery.Voters[1].HasData, o.Recovery.Voters[2].HasData = true, true
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "3 of 3 voters still hold their data (quorum 2), so the majority may come back"},
		{name: "one member down with its data, one lost: still a majority with data",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Recovery.Voters[2].HasData = true
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "2 of 3 voters still hold their data"},
		{name: "within the window: waits, saying until when",
			in: lostMajority(time.Minute), replicas: 3, phase: PhaseWaiting,
			message: "recovering from a survivor at 2026-11-22T12:04:00Z unless the majority comes back"},
		{name: "past the window: restarts the survivor alone",
			in: lostMajority(5 * time.Minute), action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering,
			message: "restarting c-0 alone (raft index 5000, the highest of the members that answer) with --force-new-cluster; c-1, c-2 rejoin empty"},
		{name: "the survivor with the highest raft index",
			in: lostFive(5000, 5001), action: ActionDeletePod, ordinal: 3, replicas: 5, phase: PhaseRecovering, message: "restarting c-3 alone (raft index 5001"},
		{name: "equal raft indexes: the lowest ordinal",
			in: lostFive(5000, 5000), action: ActionDeletePod, ordinal: 0, replicas: 5, phase: PhaseRecovering, message: "restarting c-0 alone"},
		{name: "a learner that answers is no survivor",
			in: func() Observed {
				o := lostFive(5000, 9000)
				o.Recovery.Survivors[3] = Survivor{ID: 103, RaftIndex: 9000, Learner: true}
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 5, phase: PhaseRecovering, message: "restarting c-0 alone"},
		{name: "a member answering under another ID is no survivor",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Recovery.Survivors[0] = Survivor{ID: 999, RaftIndex: 5000}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "no voter answers: nothing to recover from; restore the cluster from a backup"},
		{name: "another member with data behind a gate from before recovery: by hand",
			in: func() Observed {
				o := lostFive(5000, 4000)
				p := o.Pods[3]
				p.GateHoldsForRecovery = false
				o.Pods[3] = p
				return o
			}(),
			replicas: 5, phase: PhaseWaiting, message: "these have a gate from before quorum-loss recovery, or none: member 3's pod; recover by hand"},
		{name: "an empty member without a holding gate: it would join the old cluster, then force one of its own",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Pods[2] = Pod{UID: "pod-2"}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "or none: member 2's pod;"},
		{name: "a template whose gate predates recovery: future pods would not hold",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Recovery.TemplateGateHolds = false
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "or none: the pod template;"},
		{name: "a terminating pod without a holding gate does not count: its replacement comes from the template",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Pods[2] = Pod{UID: "pod-2", Terminating: true}
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering, message: "restarting c-0 alone"},
		{name: "the survivor's pod is going: waits for it",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Pods[0] = Pod{UID: "pod-0", Terminating: true}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "recovering from c-0: waiting for its pod"},
		{name: "forcing: the pod from before the instruction is restarted",
			in: forcing(lostMajority(time.Hour), Pod{UID: "pod-0"}), action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering,
			message: "restarting it alone"},
		{name: "forcing: a new pod starts with the instruction",
			in: forcing(lostMajority(time.Hour), Pod{UID: "pod-0b"}), replicas: 3, phase: PhaseRecovering, message: "waiting for it to start alone"},
		{name: "forcing: a new pod that cannot start says why",
			in: forcing(lostMajority(time.Hour), Pod{UID: "pod-0b", CannotStart: "CrashLoopBackOff"}), replicas: 3, phase: PhaseRecovering,
			message: "it cannot start (CrashLoopBackOff)"},
		{name: "forcing: a new pod not scheduled says why",
			in: forcing(lostMajority(time.Hour), Pod{UID: "pod-0b", Pending: "0/3 nodes are available"}), replicas: 3, phase: PhaseRecovering,
			message: "its pod is not scheduled (0/3 nodes are available)"},
		{name: "forcing: an empty member's pod took the node the survivor's volume binds it to: it goes",
			in: survivorNodeTakenBy(2, false), action: ActionBindPod, ordinal: 0, replicas: 3, phase: PhaseRecovering,
			message: "its volume binds it to node n-0, where member 2's pod, which holds no data, took its place; binding c-0's pod to n-0"},
		{name: "forcing: a pod on that node whose member holds data is never the one to go",
			in: survivorNodeTakenBy(2, true), replicas: 3, phase: PhaseRecovering, message: "its pod is not scheduled"},
		{name: "forcing: nothing on the survivor's node: it waits for the scheduler",
			in: func() Observed {
				o := survivorNodeTakenBy(2, false)
				p := o.Pods[2]
				p.Node = "n-2"
				o.Pods[2] = p
				return o
			}(),
			replicas: 3, phase: PhaseRecovering, message: "its pod is not scheduled"},
		{name: "forcing continues even with recovery turned off meanwhile: a half-done start is worse",
			in: func() Observed {
				o := forcing(lostMajority(time.Hour), Pod{UID: "pod-0"})
				o.Recovery.FromSurvivor = false
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering, message: "restarting it alone"},
		{name: "the survivor answers alone: the instruction goes before anything else",
			in: func() Observed {
				o := formed(3, 3, voters(1))
				o.Recovery.Forcing = &ForceNewCluster{Member: "c-0", OldPod: "pod-0"}
				return o
			}(),
			replicas: 3, phase: PhaseRecovering, message: "c-0 restarted alone (1 members now)"},
		{name: "never before the cluster formed",
			in: func() Observed {
				o := lostMajority(time.Hour)
				o.Formed = false
				o.StatefulSetReplicas = 0
				return o
			}(),
			replicas: 3, phase: PhaseBootstrapping},
	}
	runPlanCases(t, cases)
}

// survivorAlone is the cluster after the forced start: member 0 alone, the others' pods waiting in their
// gates on empty claims.
func survivorAlone() Observed {
	o := formed(3, 3, voters(1))
	o.Pods[1], o.Pods[2] = Pod{UpToDate: true}, Pod{UpToDate: true}
	return o
}

func forcing(o Observed, survivorPod Pod) Observed {
	o.Pods[0] = survivorPod
	o.Recovery.Forcing = &ForceNewCluster{Member: "c-0", OldPod: "pod-0"}
	delete(o.Recovery.Survivors, 0)
	return o
}

// TestForcedStartConfiguration: the step that restarts the survivor names it, and the pod it replaces, in
// the configuration; a member that starts empty meanwhile finds the survivor alone; and once etcd answers,
// the configuration no longer forces anything.
func TestForcedStartConfiguration(t *testing.T) {
	d := Plan(lostMajority(time.Hour))
	if d.Config == nil || d.Config.ForceNewCluster == nil || *d.Config.ForceNewCluster != (ForceNewCluster{Member: "c-0", OldPod: "pod-0"}) {
		t.Fatalf("config %+v: want c-0 forced, replacing pod-0", d.Config)
	}
	if got := d.Config.Ordinals(); len(got) != 1 || got[0] != 0 || d.Config.State != StateExisting {
		t.Fatalf("initial cluster %v (%s): want the survivor alone, existing", got, d.Config.State)
	}
	// The next reconcile, before the pod is gone, keeps the same configuration: nothing to write.
	again := Plan(forcing(lostMajority(time.Hour), Pod{UID: "pod-0"}))
	if again.Config == nil || again.Config.ForceNewCluster == nil || *again.Config.ForceNewCluster != *d.Config.ForceNewCluster {
		t.Fatalf("config %+v: want the same instruction", again.Config)
	}
	o := survivorAlone()
	o.Recovery.Forcing = d.Config.ForceNewCluster
	if done := Plan(o); done.Config == nil || done.Config.ForceNewCluster != nil || done.Action.Type != ActionNone {
		t.Fatalf("after the forced start: %+v, %+v; want the instruction gone and no step", done.Config, done.Action)
	}
	// An instruction naming a member status no longer lists keeps the configuration as it is: rewritten, it
	// would list no member at all.
	lost := forcing(lostMajority(time.Hour), Pod{UID: "pod-0"})
	lost.Recovery.Forcing = &ForceNewCluster{Member: "c-9", OldPod: "pod-9"}
	if kept := Plan(lost); kept.Config != nil || kept.Action.Type != ActionNone || !strings.Contains(kept.Message, "not among the voters last known") {
		t.Fatalf("instruction for an unknown member: %+v, %+v (%q); want the configuration kept, no step", kept.Config, kept.Action, kept.Message)
	}
	// Then the others rejoin, one learner at a time.
	if next := Plan(survivorAlone()); next.Action.Type != ActionAddLearner || next.Action.Ordinal != 1 {
		t.Fatalf("next step %+v (%q): want member 1 added as a learner", next.Action, next.Message)
	}
}

// TestRecoveryNeverWhileAMajorityHoldsData: whatever the window, the survivors and the forcing state, no
// forced start is planned while at least a quorum of the voters hold their data.
func TestRecoveryNeverWhileAMajorityHoldsData(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for withData := Quorum(n); withData <= n; withData++ {
			o := lostMajority(24 * time.Hour)
			o.Recovery.Voters, o.Recovery.Survivors = nil, map[int]Survivor{0: {ID: 100, RaftIndex: 1}}
			for i := range n {
				o.Pods[i] = Pod{UID: "p", GateHoldsForRecovery: true}
				o.Recovery.Voters = append(o.Recovery.Voters, Voter{Ordinal: i, ID: uint64(100 + i), Name: "c", HasData: i < withData})
			}
			d := Plan(o)
			if d.Action.Type != ActionNone || d.Config != nil {
				t.Fatalf("%d voters, %d with data: %+v %+v (%q); want no step and no configuration change", n, withData, d.Action, d.Config, d.Message)
			}
			if !strings.Contains(d.Message, "may come back") {
				t.Fatalf("%d voters, %d with data: message %q", n, withData, d.Message)
			}
		}
	}
}
