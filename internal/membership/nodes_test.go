package membership

import (
	"fmt"
	"testing"
	"time"
)

// onNodes places pod i on node-i, every node Ready.
func onNodes(o Observed) Observed {
	for ord, p := range o.Pods {
		p.Node = fmt.Sprintf("node-%d", ord)
		o.Pods[ord] = p
	}
	return o
}

// nodeDown makes ordinal ord's node report why since d ago (its pod goes unready, as the node controller
// marks it).
func nodeDown(o Observed, ord int, why string, d time.Duration) Observed {
	p := o.Pods[ord]
	p.Ready, p.NodeDown = false, why
	if why != NodeGone {
		p.NodeDownSince = now.Add(-d)
	}
	o.Pods[ord] = p
	return o
}

// unreachableFor makes member i unhealthy and silent since d ago.
func unreachableFor(o Observed, i int, d time.Duration) Observed {
	o.Members[i].Healthy, o.Members[i].Answered, o.Members[i].UnhealthySince = false, false, now.Add(-d)
	return o
}

// lostNode: member 2 unreachable for member, its node NotReady for node (HealAfter is 1m).
func lostNode(member, node time.Duration) Observed {
	o := unreachableFor(onNodes(formed(3, 3, voters(3))), 2, member)
	return nodeDown(o, 2, NodeNotReady, node)
}

// removedOnLostNode: member 2 was removed to be replaced; its pod is on node-2, down for d.
func removedOnLostNode(why string, d time.Duration) Observed {
	o := onNodes(formed(3, 3, voters(3)[:2]))
	o.Volumes[2] = Volume{MemberID: 102, Replace: true}
	return nodeDown(o, 2, why, d)
}

// TestLostNode: a member whose node is lost is replaced on heal's evidence alone (unhealthy for HealAfter,
// quorum holding without it), removed from etcd first; the node decides only how its pod goes: at once
// (grace period 0) from a node that has not been Ready for HealAfter or is gone, by its kubelet otherwise.
// Status says what is waited for, and a majority lost changes nothing.
func TestLostNode(t *testing.T) {
	cases := []planCase{
		{name: "a node NotReady for less than HealAfter: waiting, saying for what",
			in: lostNode(30*time.Second, 20*time.Second), replicas: 3, phase: PhaseWaiting,
			message: "2 of 3 voting members healthy; c-2 unreachable since 2026-11-22T11:59:30Z, replaced from 2026-11-22T12:00:30Z " +
				"if quorum holds without it; its node node-2 is NotReady since 2026-11-22T11:59:40Z"},
		{name: "a node that stopped reporting is named as such",
			in: func() Observed {
				o := unreachableFor(onNodes(formed(3, 3, voters(3))), 1, 10*time.Second)
				return nodeDown(o, 1, NodeUnknown, 5*time.Second)
			}(), replicas: 3, phase: PhaseWaiting, message: "its node node-1 stopped reporting (Ready Unknown) since 2026-11-22T11:59:55Z"},
		{name: "unreachable for HealAfter on a NotReady node, quorum holding: replaced",
			in: lostNode(2*time.Minute, 110*time.Second), action: ActionMarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing,
			message: "replacing c-2: unreachable since 2026-11-22T11:58:00Z; its node node-2 is NotReady since 2026-11-22T11:58:10Z"},
		{name: "a pod evicted from a NotReady node (Terminating for ever) does not stop the heal clock",
			in: func() Observed {
				o := lostNode(2*time.Minute, 110*time.Second)
				p := o.Pods[2]
				p.Terminating = true
				o.Pods[2] = p
				return o
			}(), action: ActionMarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "a pod Terminating on a Ready node is restarting: no heal clock runs",
			in: func() Observed {
				o := unreachableFor(onNodes(formed(3, 3, voters(3))), 2, 2*time.Minute)
				p := o.Pods[2]
				p.Ready, p.Terminating = false, true
				o.Pods[2] = p
				return o
			}(), replicas: 3, phase: PhaseWaiting, message: "c-2 unreachable since 2026-11-22T11:58:00Z"},
		{name: "marked on a lost node: removed from etcd before anything else",
			in: func() Observed {
				o := lostNode(3*time.Minute, 3*time.Minute)
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(), action: ActionRemove, ordinal: 2, replicas: 3, phase: PhaseHealing,
			message: "removing c-2 to replace its data; its node node-2 is NotReady since 2026-11-22T11:57:00Z"},
		{name: "removed, on a node NotReady for HealAfter: the claim is deleted and the pod at once",
			in: removedOnLostNode(NodeNotReady, 2*time.Minute), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing, force: true,
			message: "deleting the data of member 2 to re-add it empty; its node node-2 is NotReady since 2026-11-22T11:58:00Z, " +
				"so its pod is deleted without waiting for its kubelet"},
		{name: "removed, on a node that is gone: the pod is deleted at once",
			in: removedOnLostNode(NodeGone, 0), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing, force: true,
			message: "its node node-2 is gone"},
		{name: "removed, its pod already Terminating on the lost node and its claim going: the pod is deleted at once",
			in: func() Observed {
				o := removedOnLostNode(NodeUnknown, 5*time.Minute)
				o.Volumes[2] = Volume{MemberID: 102, Replace: true, Deleting: true}
				p := o.Pods[2]
				p.Terminating = true
				o.Pods[2] = p
				return o
			}(), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing, force: true},
		{name: "removed, on a node NotReady for less than HealAfter: deleted as usual, its kubelet may still confirm",
			in: removedOnLostNode(NodeNotReady, 30*time.Second), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing,
			message: "deleting the data of member 2 to re-add it empty"},
		{name: "and once its claim and pod are going, waiting for that node",
			in: func() Observed {
				o := removedOnLostNode(NodeNotReady, 30*time.Second)
				o.Volumes[2] = Volume{MemberID: 102, Replace: true, Deleting: true}
				p := o.Pods[2]
				p.Terminating = true
				o.Pods[2] = p
				return o
			}(), replicas: 3, phase: PhaseHealing,
			message: "waiting for the old data of member 2 to go; its node node-2 is NotReady since 2026-11-22T11:59:30Z: " +
				"its pod is deleted without its kubelet once the node is down for 1m0s"},
		{name: "removed, on a Ready node: deleted as usual",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)[:2]))
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "the pod deleted from the lost node, its claim waiting for pvc-protection: waiting",
			in: func() Observed {
				o := removedOnLostNode(NodeNotReady, 2*time.Minute)
				o.Volumes[2] = Volume{MemberID: 102, Replace: true, Deleting: true}
				delete(o.Pods, 2)
				return o
			}(), replicas: 3, phase: PhaseHealing, message: "waiting for the old data of member 2 to go"},
		{name: "a removed member's claim, not marked, with its pod stuck on a lost node: deleted at once before re-adding",
			in: func() Observed {
				o := removedOnLostNode(NodeUnknown, 10*time.Minute)
				o.Volumes[2] = Volume{MemberID: 102}
				p := o.Pods[2]
				p.Terminating = true
				o.Pods[2] = p
				return o
			}(), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing, force: true,
			message: "deleting stale data of removed member 2 before re-adding it; its node node-2 stopped reporting"},
		{name: "a lost node whose member's removal would cost quorum: blocked, nothing changes",
			in: func() Observed {
				o := lostNode(5*time.Minute, 5*time.Minute)
				return unreachableFor(o, 1, 10*time.Second)
			}(), replicas: 3, phase: PhaseBlocked,
			message: "cannot heal: removing c-2 would leave 1 healthy of 2 voting members; quorum needs 2; its node node-2 is NotReady"},
		{name: "two of three nodes lost while etcd still answers: blocked, nothing changes",
			in: func() Observed {
				o := lostNode(5*time.Minute, 5*time.Minute)
				o = unreachableFor(o, 1, 5*time.Minute)
				return nodeDown(o, 1, NodeUnknown, 5*time.Minute)
			}(), replicas: 3, phase: PhaseBlocked, message: "cannot heal"},
		{name: "two of three nodes lost, etcd without a majority: reported, nothing changes",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)))
				o.Reachable, o.Members = false, nil
				o = nodeDown(o, 1, NodeUnknown, 10*time.Minute)
				return nodeDown(o, 2, NodeGone, 0)
			}(), replicas: 3, phase: PhaseWaiting,
			message: "etcd is unreachable; waiting (member 1: its node node-1 stopped reporting (Ready Unknown) since 2026-11-22T11:50:00Z; " +
				"member 2: its node node-2 is gone)"},
		{name: "two of three nodes lost with recovery from a survivor allowed: their data may come back, nothing changes",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)))
				o.Reachable, o.Members = false, nil
				o = nodeDown(o, 1, NodeUnknown, 10*time.Minute)
				o = nodeDown(o, 2, NodeUnknown, 10*time.Minute)
				o.Recovery = Recovery{FromSurvivor: true, After: time.Minute, LostSince: now.Add(-10 * time.Minute),
					Voters:    []Voter{{Ordinal: 0, ID: 100, HasData: true}, {Ordinal: 1, ID: 101, HasData: true}, {Ordinal: 2, ID: 102, HasData: true}},
					Survivors: map[int]Survivor{0: {ID: 100, RaftIndex: 9}}}
				return o
			}(), replicas: 3, phase: PhaseWaiting, message: "so the majority may come back: no automatic recovery (member 1: its node node-1"},
		{name: "a partition healed before HealAfter: the same members, nothing changes",
			in: onNodes(formed(3, 3, voters(3))), replicas: 3, phase: PhaseStable, message: "3 members"},
		{name: "a node back before its member's removal: the member recovered and keeps its data",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)))
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(), action: ActionUnmarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing, message: "recovered"},
		{name: "a node back after the removal, before the data went: the old data is deleted (as usual), never re-added",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)[:2]))
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				o.Pods[2] = Pod{UpToDate: true, Node: "node-2", CannotStart: "CrashLoopBackOff: member removed"}
				return o
			}(), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "old data found again by a pod's member gate: deleted, never re-added",
			in: func() Observed {
				o := onNodes(formed(3, 3, voters(3)[:2]))
				o.Volumes[2] = Volume{MemberID: 102}
				o.Pods[2] = Pod{UpToDate: true, Node: "node-2", StaleData: "data of member 66, which peer c-0 does not list: the member was removed"}
				return o
			}(), action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing, message: "the member was removed"},
		{name: "a node back after the replacement: its new member runs elsewhere, nothing changes",
			in: func() Observed {
				ms := voters(3)
				ms[2].ID = 202
				o := onNodes(formed(3, 3, ms))
				o.Pods[2] = Pod{Ready: true, UpToDate: true, Node: "node-3"}
				o.Volumes[2] = Volume{MemberID: 202}
				return o
			}(), replicas: 3, phase: PhaseStable},
	}
	runPlanCases(t, cases)
}

// TestLostNodeReplacement follows one lost node through the plans, each observation what the controller's
// step leaves: the member is removed from etcd before its pod or claim is touched, the pod stuck on the lost
// node is deleted at once with its claim, and the member comes back as a new learner under a new ID.
func TestLostNodeReplacement(t *testing.T) {
	o := lostNode(2*time.Minute, 2*time.Minute)
	var steps []string
	for range 8 {
		d := Plan(o)
		a := d.Action
		if a.Type == ActionNone {
			break
		}
		steps = append(steps, fmt.Sprintf("%s %d force=%v", a.Type, a.Ordinal, a.Force))
		switch a.Type {
		case ActionMarkReplace:
			o.Volumes[2] = Volume{MemberID: 102, Replace: true}
		case ActionRemove:
			o.Members = o.Members[:2]
		case ActionDeleteVolume:
			if !a.Force {
				t.Fatalf("the pod on the lost node is left to its kubelet: %q", d.Message)
			}
			// The pod goes at once; the claim, its finalizer released, right after; then the StatefulSet's
			// new pod, on another node, with a new claim.
			delete(o.Volumes, 2)
			o.Pods[2] = Pod{UpToDate: true, Node: "node-3"}
		case ActionAddLearner:
			o.Members = append(o.Members, Member{ID: 202, Ordinal: 2, Learner: true})
		default:
			t.Fatalf("unexpected step %s (%q)", a.Type, d.Message)
		}
	}
	want := []string{"MarkVolumeForReplacement 2 force=false", "Remove 2 force=false", "DeleteVolume 2 force=true", "AddLearner 2 force=false"}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for _, m := range o.Members {
		if m.ID == 102 {
			t.Fatalf("the removed member's ID is back: %+v", o.Members)
		}
	}
}

// Rules that wait for unhealthy members say, too, what each is waited for.
func TestWaitsSayWhatFor(t *testing.T) {
	const waits = "c-2 unreachable since 2026-11-22T11:59:30Z, replaced from 2026-11-22T12:00:30Z if quorum holds without it; " +
		"its node node-2 is NotReady since 2026-11-22T11:59:40Z"
	cases := []planCase{
		{name: "scale up", in: func() Observed { o := lostNode(30*time.Second, 20*time.Second); o.Desired = 5; return o }(),
			replicas: 5, phase: PhaseWaiting, message: "before adding one (2 of 3); " + waits},
		{name: "roll", in: func() Observed {
			o := lostNode(30*time.Second, 20*time.Second)
			p := o.Pods[0]
			p.UpToDate = false
			o.Pods[0] = p
			return o
		}(), replicas: 3, phase: PhaseUpgrading, message: "waiting for every member to be healthy; " + waits},
	}
	runPlanCases(t, cases)
}
