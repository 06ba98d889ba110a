package membership

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// voters builds n healthy started voters 0..n-1 with member 0 leading.
func voters(n int) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{ID: uint64(100 + i), Ordinal: i, Name: "c-" + string(rune('0'+i)), Started: true, Healthy: true, Answered: true, RaftIndex: 5000}
	}
	out[0].Leader = true
	return out
}

func pods(n int) map[int]Pod {
	out := map[int]Pod{}
	for i := range n {
		out[i] = Pod{Ready: true, UpToDate: true}
	}
	return out
}

func formed(desired, sts int, ms []Member) Observed {
	return Observed{Desired: desired, StatefulSetReplicas: sts, Formed: true, Reachable: true, Members: ms,
		Pods: pods(sts), Volumes: map[int]Volume{}, Now: now, HealAfter: time.Minute, TargetVersion: "3.5.17", JoinGated: true}
}

// besideMember is a 3-member cluster recovering with member 0 alone, on node n-0, where member 1's new pod is
// placed too; member 1's claim records memberID (0: none).
func besideMember(strict bool, memberID uint64) Observed {
	o := formed(3, 3, voters(1))
	o.StrictSpread = strict
	o.Pods[0] = Pod{Ready: true, UpToDate: true, Node: "n-0"}
	o.Pods[1] = Pod{Node: "n-0"}
	delete(o.Pods, 2)
	o.Volumes[1] = Volume{MemberID: memberID}
	return o
}

// planCase is one situation and the decision Plan must take in it.
type planCase struct {
	name     string
	in       Observed
	action   ActionType
	ordinal  int
	replicas int
	phase    Phase
	message  string
	// awaits: the decision is to look at a starting or catching-up learner again soon.
	awaits bool
	// force: the action deletes a pod on a lost node without waiting for its kubelet.
	force bool
}

// runPlanCases checks each case's action, StatefulSet size, phase and message; a formed, reachable cluster
// must always start new members as "existing".
func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			if d.Action.Type != tc.action || (tc.action != ActionNone && d.Action.Ordinal != tc.ordinal) {
				t.Errorf("action %s on %d, want %s on %d (%q)", d.Action.Type, d.Action.Ordinal, tc.action, tc.ordinal, d.Message)
			}
			if d.Replicas != tc.replicas {
				t.Errorf("replicas %d, want %d", d.Replicas, tc.replicas)
			}
			if d.Phase != tc.phase {
				t.Errorf("phase %s, want %s (%q)", d.Phase, tc.phase, d.Message)
			}
			if !strings.Contains(d.Message, tc.message) {
				t.Errorf("message %q lacks %q", d.Message, tc.message)
			}
			if d.Action.Force != tc.force {
				t.Errorf("Force %v, want %v (%q)", d.Action.Force, tc.force, d.Message)
			}
			if d.AwaitsLearner != tc.awaits {
				t.Errorf("AwaitsLearner %v, want %v (%q)", d.AwaitsLearner, tc.awaits, d.Message)
			}
			if tc.in.Formed && tc.in.Reachable && (d.Config == nil || d.Config.State != StateExisting) {
				t.Errorf("config %+v: a formed cluster starts new members as existing", d.Config)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	cases := []planCase{
		{name: "new cluster bootstraps all members at once",
			in: Observed{Desired: 3, StatefulSetReplicas: -1}, replicas: 3, phase: PhaseBootstrapping},
		{name: "unreachable after formation changes nothing",
			in: Observed{Desired: 5, StatefulSetReplicas: 3, Formed: true}, replicas: 3, phase: PhaseWaiting, message: "unreachable"},
		{name: "stable", in: formed(3, 3, voters(3)), replicas: 3, phase: PhaseStable},
		{name: "scale up adds the next ordinal as a learner",
			in: formed(5, 3, voters(3)), action: ActionAddLearner, ordinal: 3, replicas: 5, phase: PhaseScaling},
		{name: "strict spread: a new member's pod on a member's node leaves it with its empty claim before it joins",
			in: besideMember(true, 0), action: ActionDeleteVolume, ordinal: 1, replicas: 3, phase: PhaseScaling,
			message: "member 1's pod shares node n-0 with member 0 while the spread is Required"},
		{name: "strict spread: a later ordinal's pod on a member's node leaves it while an earlier learner waits for a node",
			in: func() Observed {
				survivor := voters(3)[2]
				survivor.Leader = true
				o := formed(3, 3, []Member{{ID: 9, Ordinal: 0, Learner: true}, survivor})
				o.StrictSpread = true
				o.Pods = map[int]Pod{0: {}, 1: {Node: "n-0"}, 2: {Ready: true, UpToDate: true, Node: "n-0"}}
				return o
			}(),
			action: ActionDeleteVolume, ordinal: 1, replicas: 3, phase: PhaseScaling,
			message: "member 1's pod shares node n-0 with member 2 while the spread is Required"},
		{name: "preferred spread: a new member may join beside another",
			in: besideMember(false, 0), action: ActionAddLearner, ordinal: 1, replicas: 3, phase: PhaseScaling},
		{name: "strict spread: a claim that records a member's data is never deleted for placement",
			in: besideMember(true, 101), action: ActionDeleteVolume, ordinal: 1, replicas: 3, phase: PhaseScaling,
			message: "deleting stale data of removed member 1"},
		{name: "strict spread, a node of its own: it joins",
			in: func() Observed {
				o := besideMember(true, 0)
				o.Pods[1] = Pod{Node: "n-1"}
				return o
			}(),
			action: ActionAddLearner, ordinal: 1, replicas: 3, phase: PhaseScaling},
		{name: "scale up waits while a member is unhealthy",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Members[2].Healthy = false
				o.Members[2].UnhealthySince = now
				return o
			}(),
			replicas: 5, phase: PhaseWaiting, message: "healthy before adding"},
		{name: "an unstarted learner gets its pod slot",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Learner: true})
				return o
			}(),
			replicas: 5, phase: PhaseScaling, message: "starting learner", awaits: true},
		{name: "a lagging learner is not promoted",
			in: func() Observed {
				o := formed(5, 4, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Name: "c-3", Learner: true, Started: true, Healthy: true, Answered: true, RaftIndex: 10, Version: "3.5.17"})
				return o
			}(),
			replicas: 5, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "a started learner that does not answer for itself is left to etcd to promote",
			in: func() Observed {
				o := formed(5, 4, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Name: "c-3", Learner: true, Started: true})
				return o
			}(),
			action: ActionPromote, ordinal: 3, replicas: 5, phase: PhaseScaling},
		{name: "a caught-up learner is promoted",
			in: func() Observed {
				o := formed(5, 4, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Name: "c-3", Learner: true, Started: true, Healthy: true, Answered: true, RaftIndex: 4990})
				return o
			}(),
			action: ActionPromote, ordinal: 3, replicas: 5, phase: PhaseScaling},
		{name: "scale down removes the highest ordinal",
			in: formed(3, 5, voters(5)), action: ActionRemove, ordinal: 4, replicas: 5, phase: PhaseScaling},
		{name: "scale down moves leadership off the member first",
			in: func() Observed {
				o := formed(3, 5, voters(5))
				o.Members[0].Leader, o.Members[4].Leader = false, true
				return o
			}(),
			action: ActionMoveLeader, ordinal: 0, replicas: 5, phase: PhaseScaling},
		{name: "scale down refuses to break quorum",
			in: func() Observed {
				o := formed(1, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now
				return o
			}(),
			replicas: 3, phase: PhaseBlocked, message: "quorum needs 2"},
		{name: "the StatefulSet shrinks once the member is gone",
			in: formed(3, 4, voters(3)), replicas: 3, phase: PhaseScaling, message: "shrinking"},
		{name: "a member unhealthy too long is marked for replacement",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-2*time.Minute)
				return o
			}(),
			action: ActionMarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "a member whose volume holds another member's data is replaced at once",
			in:     func() Observed { o := formed(3, 3, voters(3)); o.Volumes[1] = Volume{MemberID: 77}; return o }(),
			action: ActionMarkReplace, ordinal: 1, replicas: 3, phase: PhaseHealing, message: "volume was replaced"},
		{name: "a member whose claim is being deleted is removed at once, without waiting HealAfter",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now
				o.Pods[1] = Pod{Terminating: true}
				o.Volumes[1] = Volume{MemberID: 101, Deleting: true}
				return o
			}(),
			action: ActionRemove, ordinal: 1, replicas: 3, phase: PhaseHealing, message: "being deleted"},
		{name: "a deleted claim of a healthy leader moves leadership before the removal",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Volumes[0] = Volume{MemberID: 100, Deleting: true}
				return o
			}(),
			action: ActionMoveLeader, ordinal: 1, replicas: 3, phase: PhaseHealing},
		{name: "a deleted claim never costs quorum",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now
				o.Volumes[1] = Volume{MemberID: 101, Deleting: true}
				return o
			}(),
			replicas: 3, phase: PhaseBlocked},
		{name: "the removed member's claim and pod are going: wait, do not delete again",
			in: func() Observed {
				o := formed(3, 3, []Member{voters(3)[0], voters(3)[2]})
				o.Pods[1] = Pod{Terminating: true}
				o.Volumes[1] = Volume{MemberID: 101, Deleting: true}
				return o
			}(),
			replicas: 3, phase: PhaseHealing, message: "old data of member 1"},
		{name: "a claim created after its member was last healthy, never recorded, is replaced at once",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-10*time.Second)
				o.Volumes[1] = Volume{Created: now.Add(-5 * time.Second)}
				return o
			}(),
			action: ActionMarkReplace, ordinal: 1, replicas: 3, phase: PhaseHealing, message: "volume was replaced"},
		{name: "a healthy member on another claim than the recorded one rejoined empty: replaced at once",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].ClaimReplaced = true
				o.Volumes[1] = Volume{Created: now.Add(-5 * time.Second)}
				return o
			}(),
			action: ActionMarkReplace, ordinal: 1, replicas: 3, phase: PhaseHealing, message: "volume was replaced"},
		{name: "a rejoined-empty member is not replaced at the cost of quorum",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].ClaimReplaced = true
				o.Volumes[1] = Volume{Created: now.Add(-5 * time.Second)}
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now
				return o
			}(),
			replicas: 3, phase: PhaseBlocked, message: "cannot heal"},
		{name: "a never-recorded claim older than the member's unhealthiness waits HealAfter (a slow first start)",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-10*time.Second)
				o.Volumes[1] = Volume{Created: now.Add(-20 * time.Second)}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting},
		{name: "a never-recorded claim of a member that never started waits HealAfter",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Started, o.Members[1].Healthy, o.Members[1].UnhealthySince = false, false, now.Add(-10*time.Second)
				o.Volumes[1] = Volume{Created: now.Add(-5 * time.Second)}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting},
		{name: "healing never costs quorum",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				for i := 1; i < 3; i++ {
					o.Members[i].Healthy, o.Members[i].UnhealthySince = false, now.Add(-time.Hour)
				}
				return o
			}(),
			replicas: 3, phase: PhaseBlocked, message: "cannot heal"},
		{name: "a marked member is removed",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-2*time.Minute)
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(),
			action: ActionRemove, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "a marked member that recovered before its removal keeps its data",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(),
			action: ActionUnmarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing, message: "recovered"},
		{name: "a marked member whose claim was replaced is removed even when it answers",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].ClaimReplaced = true
				o.Volumes[2] = Volume{Replace: true}
				return o
			}(),
			action: ActionRemove, ordinal: 2, replicas: 3, phase: PhaseHealing},
		// (The StatefulSet keeps the removed member's slot: its new pod waits in its member gate for the re-add.)
		{name: "a removed member's marked data is deleted",
			in: func() Observed {
				o := formed(3, 3, voters(3)[:2])
				o.Volumes[2] = Volume{MemberID: 102, Replace: true}
				return o
			}(),
			action: ActionDeleteVolume, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "stale data of a removed member is deleted before re-adding",
			in:     func() Observed { o := formed(3, 2, voters(2)); o.Volumes[2] = Volume{MemberID: 102}; return o }(),
			action: ActionDeleteVolume, ordinal: 2, replicas: 2, phase: PhaseScaling},
		{name: "upgrade restarts a follower first",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Pods = map[int]Pod{0: {Ready: true}, 1: {Ready: true}, 2: {Ready: true}}
				return o
			}(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseUpgrading, message: "upgrading c-1 to 3.5.17 (1/3)"},
		{name: "upgrade moves leadership before restarting the leader last",
			in:     func() Observed { o := formed(3, 3, voters(3)); o.Pods[0] = Pod{Ready: true}; return o }(),
			action: ActionMoveLeader, ordinal: 1, replicas: 3, phase: PhaseUpgrading, message: "(2/3)"},
		{name: "upgrade waits for every member to be healthy",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Pods[0] = Pod{Ready: true}
				o.Pods[2] = Pod{Ready: false, UpToDate: true}
				return o
			}(),
			replicas: 3, phase: PhaseUpgrading, message: "waiting"},
		{name: "unknown members are reported and left alone",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members = append(o.Members, Member{ID: 5, Ordinal: -1, Name: "stranger", Started: true, Healthy: true})
				return o
			}(),
			replicas: 3, phase: PhaseStable},
	}
	runPlanCases(t, cases)
}

func TestPlanReportsUnknownMembers(t *testing.T) {
	o := formed(3, 3, voters(3))
	o.Members = append(o.Members, Member{ID: 5, Ordinal: -1, Name: "stranger"})
	if d := Plan(o); len(d.Unknown) != 1 || d.Unknown[0].Name != "stranger" {
		t.Fatalf("unknown %v", d.Unknown)
	}
}

func TestConfigListsCurrentMembersAsExisting(t *testing.T) {
	o := formed(5, 3, voters(3))
	o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Learner: true})
	d := Plan(o)
	if d.Config == nil || d.Config.State != "existing" || len(d.Config.Ordinals()) != 4 {
		t.Fatalf("config %+v: a new member must start with the current member list, learner included", d.Config)
	}
}

// TestStartAhead: while the cluster grows, the pods of members yet to be added start at once (each waits
// in its member gate), but only on fresh ordinals: data a member once held, a pod going away or refused
// by its gate, members the operator cannot place and a StatefulSet being recreated keep the serial shape.
func TestStartAhead(t *testing.T) {
	cases := []planCase{
		{name: "every new member's pod starts while the first learner is added",
			in: formed(5, 3, voters(3)), action: ActionAddLearner, ordinal: 3, replicas: 5, phase: PhaseScaling},
		{name: "a claim recorded as holding a removed member's data stops the start ahead there",
			in: func() Observed {
				o := formed(6, 3, voters(3))
				o.Volumes[4] = Volume{MemberID: 77}
				return o
			}(),
			action: ActionAddLearner, ordinal: 3, replicas: 4, phase: PhaseScaling},
		{name: "a claim being deleted stops the start ahead there",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Volumes[3] = Volume{Deleting: true}
				return o
			}(),
			action: ActionAddLearner, ordinal: 3, replicas: 3, phase: PhaseScaling},
		{name: "a pod refused by its member gate is not started ahead",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Pods[4] = Pod{UpToDate: true, StaleData: "WAL of removed member 4d"}
				return o
			}(),
			action: ActionDeleteVolume, ordinal: 4, replicas: 4, phase: PhaseHealing},
		{name: "a terminating pod is not started ahead",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Pods[3] = Pod{UpToDate: true, Terminating: true}
				return o
			}(),
			action: ActionAddLearner, ordinal: 3, replicas: 3, phase: PhaseScaling},
		{name: "nothing starts ahead while etcd holds a member the operator cannot place",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.Members = append(o.Members, Member{ID: 77, Ordinal: -1, Name: "stranger", Started: true, Healthy: true})
				return o
			}(),
			action: ActionAddLearner, ordinal: 3, replicas: 3, phase: PhaseScaling},
		{name: "nothing starts ahead on a template without the member gate",
			in: func() Observed {
				o := formed(5, 3, voters(3))
				o.JoinGated = false
				return o
			}(),
			action: ActionAddLearner, ordinal: 3, replicas: 3, phase: PhaseScaling},
		{name: "nothing starts ahead at the desired size",
			in: formed(3, 3, voters(3)), replicas: 3, phase: PhaseStable},
		{name: "scaling down is not held by a start ahead",
			in: formed(3, 5, voters(3)), replicas: 3, phase: PhaseScaling, message: "shrinking the StatefulSet to 3"},
	}
	runPlanCases(t, cases)
}

// TestLearnersAtOnce: where every member accepts two learners, the next member joins once the learner
// before it has started, not once it is promoted; never before it started (its etcd reads the member list
// it joins with when it starts), never beyond the limit, never beside a member the operator cannot place.
func TestLearnersAtOnce(t *testing.T) {
	withLearners := func(limit int, learners ...Member) Observed {
		o := formed(5, 3, voters(3))
		o.MaxLearners = limit
		for _, l := range learners {
			o.Members = append(o.Members, l)
			o.Pods[l.Ordinal] = Pod{UpToDate: true}
		}
		return o
	}
	catchingUp := func(ord int) Member {
		return Member{ID: uint64(10 + ord), Ordinal: ord, Name: "c-" + string(rune('0'+ord)), Learner: true, Started: true, Healthy: true, Answered: true, RaftIndex: 10}
	}
	notStarted := func(ord int) Member { return Member{ID: uint64(10 + ord), Ordinal: ord, Learner: true} }
	caughtUp := func(ord int) Member {
		m := catchingUp(ord)
		m.RaftIndex = 5000
		return m
	}
	cases := []planCase{
		{name: "a second learner joins beside one catching up",
			in: withLearners(2, catchingUp(3)), action: ActionAddLearner, ordinal: 4, replicas: 5, phase: PhaseScaling,
			message: "adding member 4 as a learner (5 of 5 members), beside 1 learner(s)", awaits: true},
		{name: "no second learner beside one that has not started",
			in: withLearners(2, notStarted(3)), replicas: 5, phase: PhaseScaling, message: "starting learner", awaits: true},
		{name: "no second learner where a member accepts only one",
			in: withLearners(1, catchingUp(3)), replicas: 5, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "no second learner where the limit is unknown",
			in: withLearners(0, catchingUp(3)), replicas: 5, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "no third learner beyond a limit of two",
			in: func() Observed {
				o := withLearners(2, catchingUp(3), catchingUp(4))
				o.Desired = 7
				return o
			}(), replicas: 7, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "the next member joins before a caught-up learner is promoted, so its pod starts meanwhile",
			in: withLearners(2, caughtUp(3)), action: ActionAddLearner, ordinal: 4, replicas: 5, phase: PhaseScaling,
			message: "beside 1 learner(s)", awaits: true},
		{name: "a caught-up learner is promoted where no other may join",
			in: withLearners(1, caughtUp(3)), action: ActionPromote, ordinal: 3, replicas: 5, phase: PhaseScaling},
		{name: "the learner that caught up first is promoted first",
			in: withLearners(2, catchingUp(3), caughtUp(4)), action: ActionPromote, ordinal: 4, replicas: 5, phase: PhaseScaling},
		{name: "no second learner while a voter is unhealthy",
			in: func() Observed {
				o := withLearners(2, catchingUp(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now
				return o
			}(), replicas: 5, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "no second learner beside a member the operator cannot place",
			in: func() Observed {
				o := withLearners(2, catchingUp(3))
				o.Members = append(o.Members, Member{ID: 77, Ordinal: -1, Name: "stranger", Started: true, Healthy: true})
				return o
			}(), replicas: 4, phase: PhaseScaling, message: "catching up", awaits: true},
		{name: "no second learner at the desired size",
			in: func() Observed {
				o := withLearners(2, catchingUp(3))
				o.Desired = 4
				return o
			}(), replicas: 4, phase: PhaseScaling, message: "catching up", awaits: true},
	}
	runPlanCases(t, cases)
	d := Plan(withLearners(2, catchingUp(3)))
	if got := d.Config.Ordinals(); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("the second learner's configuration lists %v: it must list every member etcd will have, the first learner included", got)
	}
}

// TestAddLearnerListsTheNewMemberFirst: the configuration written before AddLearner already lists the
// member being added, so a pod that waited in its member gate starts etcd with an initial cluster that
// matches etcd's member list once the learner is in it.
func TestAddLearnerListsTheNewMemberFirst(t *testing.T) {
	o := formed(5, 3, voters(3))
	o.Members[1], o.Members[2] = o.Members[2], o.Members[1] // member order must not matter
	d := Plan(o)
	if d.Action.Type != ActionAddLearner || d.Action.Ordinal != 3 {
		t.Fatalf("action %+v, want AddLearner on 3", d.Action)
	}
	if got := d.Config.Ordinals(); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("config ordinals %v, want [0 1 2 3]", got)
	}
	// Filling a hole lists the new member in ordinal order too.
	o = formed(3, 3, []Member{voters(3)[0], voters(3)[2]})
	o.Pods[1] = Pod{UpToDate: true}
	d = Plan(o)
	if d.Action.Type != ActionAddLearner || d.Action.Ordinal != 1 {
		t.Fatalf("action %+v, want AddLearner on 1", d.Action)
	}
	if got := d.Config.Ordinals(); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("config ordinals %v, want [0 1 2]", got)
	}
}

// TestPlanSafety: the paths where an ordinary event (an image that does not start, an outage, a changed
// operator setting, a missing StatefulSet) must not make the planner remove, wipe or re-bootstrap.
func TestPlanSafety(t *testing.T) {
	upgrading := func(o Observed) Observed {
		for ord, p := range o.Pods {
			p.UpToDate = false
			o.Pods[ord] = p
		}
		return o
	}
	cases := []planCase{
		{name: "members the operator cannot place never shrink the StatefulSet",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				for i := range o.Members {
					o.Members[i].Ordinal = -1
				}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "not adding member 0"},
		{name: "a formed cluster whose StatefulSet is gone is recreated at its membership, not bootstrapped",
			in: func() Observed {
				o := formed(5, -1, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Learner: true})
				return o
			}(),
			replicas: 4, phase: PhaseScaling, message: "starting learner", awaits: true},
		{name: "a formed cluster whose StatefulSet and pods are gone comes back at the members last seen",
			in: func() Observed {
				o := formed(5, -1, nil)
				o.Reachable, o.KnownOrdinals = false, []int{0, 1, 2, 3}
				return o
			}(),
			replicas: 4, phase: PhaseWaiting, message: "unreachable"},
		{name: "a member whose new image cannot be pulled is never healed; the upgrade stalls",
			in: func() Observed {
				o := upgrading(formed(3, 3, voters(3)))
				o.Members[1].Healthy, o.Members[1].Started, o.Members[1].UnhealthySince = false, true, now.Add(-time.Hour)
				o.Pods[1] = Pod{UpToDate: true, CannotStart: "ImagePullBackOff"}
				return o
			}(),
			replicas: 3, phase: PhaseStalled, message: "member 1 (ImagePullBackOff)"},
		{name: "a member crash-looping on its new version is never healed while the version rolls",
			in: func() Observed {
				o := upgrading(formed(3, 3, voters(3)))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-time.Hour)
				o.Pods[1] = Pod{UpToDate: true, CannotStart: "CrashLoopBackOff"}
				return o
			}(),
			replicas: 3, phase: PhaseStalled, message: "CrashLoopBackOff"},
		{name: "a reverted version restarts the stuck pod on the previous image",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-time.Hour)
				o.Pods[1] = Pod{UpToDate: false, CannotStart: "ImagePullBackOff"}
				return o
			}(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseUpgrading, message: "cannot run etcd"},
		{name: "a learner whose image cannot be pulled is reported as stalled",
			in: func() Observed {
				o := formed(5, 4, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Learner: true})
				o.Pods[3] = Pod{UpToDate: true, CannotStart: "ErrImagePull"}
				return o
			}(),
			replicas: 5, phase: PhaseStalled, message: "member 3 (ErrImagePull)"},
		{name: "a member whose image cannot be pulled is never healed, with no version change in flight either",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Hour)
				o.Pods[2] = Pod{UpToDate: true, CannotStart: `ImagePullBackOff: Back-off pulling image "localhost:5000/etcd:v3.5.35"`}
				return o
			}(),
			replicas: 3, phase: PhaseStalled, message: "member 2 (ImagePullBackOff: Back-off"},
		{name: "a crash loop with no version change in flight is healed after the window",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-2*time.Minute)
				o.Pods[2] = Pod{UpToDate: true, CannotStart: "CrashLoopBackOff"}
				return o
			}(),
			action: ActionMarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "a member restarted after a long stall gets a whole window from its new pod",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].Started, o.Members[1].UnhealthySince = false, true, now.Add(-time.Hour)
				o.Pods[1] = Pod{UpToDate: true, Created: now.Add(-10 * time.Second)}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "2 of 3"},
		{name: "a member whose stuck pod is being restarted is not healed on time",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[1].Healthy, o.Members[1].Started, o.Members[1].UnhealthySince = false, true, now.Add(-time.Hour)
				o.Pods[1] = Pod{Terminating: true, CannotStart: "ImagePullBackOff"}
				return o
			}(),
			replicas: 3, phase: PhaseUpgrading, message: "waiting for every member to be healthy"},
		{name: "no heal clock runs while the cluster had no quorum",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].Started, o.Members[2].UnhealthySince = false, true, now.Add(-time.Hour)
				o.QuorumSince = now.Add(-30 * time.Second)
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "2 of 3"},
		{name: "the heal clock runs from when quorum came back",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].Started, o.Members[2].UnhealthySince = false, true, now.Add(-time.Hour)
				o.QuorumSince = now.Add(-90 * time.Second)
				return o
			}(),
			action: ActionMarkReplace, ordinal: 2, replicas: 3, phase: PhaseHealing},
		{name: "a volume the member gate refused is wiped before the learner can start",
			in: func() Observed {
				o := formed(4, 4, voters(3))
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Learner: true})
				o.Pods[3] = Pod{UpToDate: true, StaleData: "stale-data: member 18fe7025b5699ed0 was removed"}
				return o
			}(),
			action: ActionDeleteVolume, ordinal: 3, replicas: 4, phase: PhaseHealing, message: "18fe7025b5699ed0"},
		{name: "a move to 3.6 waits until every member runs 3.5.26 or later",
			in: func() Observed {
				o := upgrading(formed(3, 3, voters(3)))
				o.TargetVersion = "3.6.0"
				for i := range o.Members {
					o.Members[i].Version = "3.5.26"
				}
				o.Members[1].Version = "3.5.21"
				return o
			}(),
			replicas: 3, phase: PhaseBlocked, message: "runs 3.5.21"},
		{name: "a move to 3.6 from 3.5.26 rolls",
			in: func() Observed {
				o := upgrading(formed(3, 3, voters(3)))
				o.TargetVersion = "3.6.0"
				for i := range o.Members {
					o.Members[i].Version = "3.5.26"
				}
				return o
			}(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseUpgrading},
	}
	runPlanCases(t, cases)
}

// TestConfigListsEveryMemberEtcdHas: a joining member's initial cluster must match etcd's member list, so
// members the operator cannot place are listed under the URL etcd has for them.
func TestConfigListsEveryMemberEtcdHas(t *testing.T) {
	o := formed(5, 3, voters(3))
	o.Members[0].PeerURL = "https://c-0.c.ns.svc.old.domain:2380"
	o.Members = append(o.Members, Member{ID: 77, Ordinal: -1, Name: "stranger", PeerURL: "https://stranger:2380", Started: true, Healthy: true})
	d := Plan(o)
	if d.Config == nil || len(d.Config.Members) != 5 {
		t.Fatalf("config %+v lacks a member", d.Config)
	}
	want := []ConfigMember{
		{Ordinal: 0, Name: "c-0", PeerURL: "https://c-0.c.ns.svc.old.domain:2380"}, {Ordinal: 1, Name: "c-1"}, {Ordinal: 2, Name: "c-2"},
		// The learner being added is listed already, under its ordinal's stable URL.
		{Ordinal: 3},
		{Ordinal: -1, Name: "stranger", PeerURL: "https://stranger:2380"},
	}
	for i, m := range want {
		if d.Config.Members[i] != m {
			t.Errorf("entry %d = %+v, want %+v", i, d.Config.Members[i], m)
		}
	}
}

// TestPlanDoesNotDependOnMapOrder: the same observation, with its pod and volume maps built in other
// orders (and Go's randomised map iteration), always gets the same decision.
func TestPlanDoesNotDependOnMapOrder(t *testing.T) {
	seeds := [][]byte{
		{3, 3, 1, 1, 3, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0, 5, 0x30, 1, 0x31, 2, 0x32, 3, 0x33, 0, 0x34, 1, 3, 0x10, 1, 0x11, 2, 0x12, 3},
		{5, 5, 1, 1, 5, 9, 6, 0, 0, 4, 1, 0, 4, 2, 0, 6, 3, 0, 6, 4, 0, 6, 0x20, 2, 0x21, 1, 0x22, 2, 0x23, 1, 0x24, 3, 3, 0x10, 1, 0x13, 4, 0x14, 5},
		{3, 4, 1, 1, 4, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0, 3, 3, 0, 4, 0x30, 3, 0x31, 3, 0x32, 0, 0x33, 3, 3, 0x10, 1, 0x11, 2, 0x12, 9},
	}
	for _, seed := range seeds {
		o := observedFrom(seed)
		want := Plan(o)
		for try := range 200 {
			shuffled := o
			shuffled.Pods, shuffled.Volumes = map[int]Pod{}, map[int]Volume{}
			keys := sortedOrdinals(o.Pods)
			for i := range keys {
				k := keys[(i+try)%len(keys)]
				shuffled.Pods[k] = o.Pods[k]
			}
			for k, v := range o.Volumes {
				shuffled.Volumes[k] = v
			}
			if got := Plan(shuffled); got.Action != want.Action || got.Phase != want.Phase || got.Message != want.Message || got.Replicas != want.Replicas {
				t.Fatalf("seed %v try %d: %+v, first %+v", seed, try, got, want)
			}
		}
	}
}

// TestPlanLateInitialMembers: members of the bootstrap that never started (their volumes came after the
// cluster formed) keep the bootstrap's configuration; anything that shows the membership changed since,
// or a member being added, makes it "existing" again.
func TestPlanLateInitialMembers(t *testing.T) {
	late := func(mutate func(o *Observed)) Observed {
		o := formed(5, 5, voters(5))
		o.InitialClusterIntact = true
		for _, i := range []int{3, 4} {
			o.Members[i].Started, o.Members[i].Healthy, o.Members[i].Answered = false, false, false
			o.Members[i].UnhealthySince = now
			o.Pods[i] = Pod{}
		}
		if mutate != nil {
			mutate(&o)
		}
		return o
	}
	for _, tc := range []struct {
		name  string
		in    Observed
		state string
	}{
		{"two of five never started", late(nil), StateNew},
		{"not the initial cluster (a member was added or removed since)", late(func(o *Observed) { o.InitialClusterIntact = false }), StateExisting},
		{"every member started", late(func(o *Observed) {
			for i := range o.Members {
				o.Members[i].Started = true
			}
		}), StateExisting},
		{"a learner", late(func(o *Observed) { o.Members[4].Learner = true }), StateExisting},
		{"a member the operator cannot place", late(func(o *Observed) { o.Members[4].Ordinal = -1 }), StateExisting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			if d.Config == nil || d.Config.State != tc.state || d.Action.Type != ActionNone {
				t.Fatalf("configuration %+v, action %+v (%s %q): want state %s and no step", d.Config, d.Action, d.Phase, d.Message, tc.state)
			}
			if got := d.Config.Ordinals(); tc.state == StateNew && (!slices.Equal(got, []int{0, 1, 2, 3, 4}) || !slices.Equal(d.Config.Late, []int{3, 4})) {
				t.Fatalf("bootstrap list %v, late %v: want every initial member, and only 3 and 4 to bootstrap late", got, d.Config.Late)
			}
			if tc.state == StateExisting && len(d.Config.Late) > 0 {
				t.Fatalf("late bootstrap %v with state existing", d.Config.Late)
			}
		})
	}
}

// TestHealReplacesNotSheds: a heal replaces a member, it does not shed it. With every claim deleted while the
// pods run (their data goes at the pods' next restart), the first member is removed, and no second one
// before the first is back as a voter: the voters never fall below the desired count minus one.
func TestHealReplacesNotSheds(t *testing.T) {
	allClaimsGoing := func(o Observed) Observed {
		for _, m := range o.Members {
			o.Volumes[m.Ordinal] = Volume{MemberID: m.ID, Deleting: true}
		}
		return o
	}
	runPlanCases(t, []planCase{
		{name: "every claim deleted: the first member is removed (leadership moved first)",
			in:     allClaimsGoing(formed(3, 3, voters(3))),
			action: ActionMoveLeader, ordinal: 1, replicas: 3, phase: PhaseHealing},
		{name: "every claim deleted, a follower first",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)))
				o.Members[0].Leader, o.Members[2].Leader = false, true
				return o
			}(),
			action: ActionRemove, ordinal: 0, replicas: 3, phase: PhaseHealing},
		{name: "member 0 removed, its claim and pod going: member 1 is not removed too",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)[1:]))
				o.Members[0].Leader = true
				o.Volumes[0] = Volume{MemberID: 100, Deleting: true}
				o.Pods[0] = Pod{Terminating: true}
				return o
			}(),
			replicas: 3, phase: PhaseHealing, message: "old data of member 0"},
		{name: "member 0 removed, its new pod on a new claim: member 0 is re-added before member 1 is removed",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)[1:]))
				o.Members[0].Leader = true
				o.Volumes[0] = Volume{Created: now}
				o.Pods[0] = Pod{UpToDate: true}
				return o
			}(),
			action: ActionAddLearner, ordinal: 0, replicas: 3, phase: PhaseScaling},
		{name: "member 0 re-added as a learner: member 1 waits for its promotion",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)[1:]))
				o.Members[0].Leader = true
				o.Members = append(o.Members, Member{ID: 9, Ordinal: 0, Name: "c-0", Learner: true, Started: true})
				o.Volumes[0] = Volume{Created: now}
				return o
			}(),
			action: ActionPromote, ordinal: 0, replicas: 3, phase: PhaseScaling},
		{name: "a member unhealthy too long while another awaits its re-add is not removed",
			in: func() Observed {
				o := formed(3, 3, voters(3)[1:])
				o.Members[0].Leader = true
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-time.Hour)
				o.Volumes[0] = Volume{MemberID: 100}
				return o
			}(),
			replicas: 3, phase: PhaseWaiting},
		{name: "the highest member removed: its pod slot stays while it awaits its re-add",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)[:2]))
				o.Volumes[2] = Volume{MemberID: 102, Deleting: true}
				o.Pods[2] = Pod{Terminating: true}
				return o
			}(),
			replicas: 3, phase: PhaseHealing, message: "old data of member 2"},
		{name: "member 0 back as a voter: member 1's going claim is next",
			in: func() Observed {
				o := allClaimsGoing(formed(3, 3, voters(3)))
				o.Members[0].ID, o.Members[0].Leader, o.Members[2].Leader = 9, false, true
				o.Volumes[0] = Volume{MemberID: 9}
				return o
			}(),
			action: ActionRemove, ordinal: 1, replicas: 3, phase: PhaseHealing},
		{name: "growing 3 to 4 with a voter unhealthy too long: healed, 3 voters to 2, as before",
			in: func() Observed {
				o := formed(4, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Hour)
				return o
			}(),
			action: ActionMarkReplace, ordinal: 2, replicas: 4, phase: PhaseHealing},
	})
}

// TestUnstartableLearner: a learner whose pod cannot start never hides what outranks waiting for it. It is
// reported with the scheduler's or kubelet's reason, and removed once the spec no longer wants it or a voter
// is due for healing.
func TestUnstartableLearner(t *testing.T) {
	pending := func(desired int) Observed {
		o := formed(desired, 4, voters(3))
		o.Members = append(o.Members, Member{ID: 9, Ordinal: 3, Name: "", Learner: true})
		o.Pods[3] = Pod{UpToDate: true, Pending: "Unschedulable: 0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules"}
		return o
	}
	runPlanCases(t, []planCase{
		{name: "a learner whose pod cannot be scheduled is reported with the scheduler's reason",
			in: pending(4), replicas: 4, phase: PhaseScaling, message: "cannot start: Unschedulable: 0/3 nodes", awaits: true},
		{name: "a spec that no longer wants the learner removes it",
			in:     pending(3),
			action: ActionRemove, ordinal: 3, replicas: 4, phase: PhaseScaling, message: "Unschedulable"},
		{name: "a voter due for healing removes the learner that cannot start",
			in: func() Observed {
				o := pending(4)
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Hour)
				return o
			}(),
			action: ActionRemove, ordinal: 3, replicas: 4, phase: PhaseHealing, message: "Unschedulable"},
		{name: "a voter due for healing removes a learner that crash-loops",
			in: func() Observed {
				o := pending(4)
				o.Pods[3] = Pod{UpToDate: true, CannotStart: "CrashLoopBackOff"}
				o.Members[1].Healthy, o.Members[1].UnhealthySince = false, now.Add(-time.Hour)
				return o
			}(),
			action: ActionRemove, ordinal: 3, replicas: 4, phase: PhaseHealing, message: "CrashLoopBackOff"},
		{name: "once the learner is gone, the voter is healed",
			in: func() Observed {
				o := formed(4, 4, voters(3))
				o.Pods[3] = Pod{UpToDate: true, Pending: "Unschedulable: 0/3 nodes are available"}
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Hour)
				return o
			}(),
			action: ActionMarkReplace, ordinal: 2, replicas: 4, phase: PhaseHealing},
		{name: "desired 3, an unstarted learner and a voter unhealthy past HealAfter: the learner goes first",
			in: func() Observed {
				o := pending(3)
				o.Pods[3] = Pod{UpToDate: true}
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Hour)
				return o
			}(),
			action: ActionRemove, ordinal: 3, replicas: 4, phase: PhaseScaling},
		{name: "a learner whose pod is merely being created is waited for",
			in: func() Observed {
				o := pending(4)
				o.Pods[3] = Pod{UpToDate: true}
				return o
			}(),
			replicas: 4, phase: PhaseScaling, message: "starting learner", awaits: true},
	})
}

// TestPlanReplacesPodsWhereEtcdNeverRan: a pod on an outdated template in which etcd never ran (a version
// whose image does not exist, corrected since) is restarted on the current template at once, whatever the
// cluster's health; a pod in which etcd has run is left to the rules that know its member.
func TestPlanReplacesPodsWhereEtcdNeverRan(t *testing.T) {
	const pullFailure = `ErrImagePull: failed to pull image "gcr.io/etcd-development/etcd:v3.5.99": not found`
	stuck := Pod{NeverRan: true, CannotStart: pullFailure}
	bootstrapping := func(ps ...Pod) Observed {
		o := Observed{Desired: 3, StatefulSetReplicas: 3, Pods: map[int]Pod{}, Volumes: map[int]Volume{}, Now: now, TargetVersion: "3.5.17"}
		for i, p := range ps {
			o.Pods[i] = p
		}
		return o
	}
	upToDate := func(p Pod) Pod { p.UpToDate = true; return p }
	cases := []planCase{
		{name: "a new cluster whose pods never ran on the corrected version: the first is restarted",
			in: bootstrapping(stuck, stuck, stuck), action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseBootstrapping,
			message: "restarting member 0 onto the current template: etcd never ran in it (ErrImagePull"},
		{name: "then the next, while the first starts on the new template",
			in: bootstrapping(Pod{UpToDate: true}, stuck, stuck), action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseBootstrapping},
		{name: "a pod waiting for its init containers counts as never ran",
			in: bootstrapping(Pod{UpToDate: true}, Pod{UpToDate: true}, Pod{NeverRan: true}), action: ActionDeletePod, ordinal: 2, replicas: 3, phase: PhaseBootstrapping},
		{name: "a pod already going is not deleted again",
			in: bootstrapping(Pod{UpToDate: true}, Pod{UpToDate: true}, Pod{NeverRan: true, Terminating: true}), replicas: 3, phase: PhaseBootstrapping},
		{name: "a new cluster whose image does not exist stalls and says how to go on",
			in: bootstrapping(upToDate(stuck), upToDate(stuck), upToDate(stuck)), replicas: 3, phase: PhaseStalled,
			message: "member 0 (" + pullFailure + "), member 1 ("},
		{name: "the stall of a new cluster asks for a correction, not a revert",
			in: bootstrapping(upToDate(stuck), Pod{UpToDate: true}, Pod{UpToDate: true}), replicas: 3, phase: PhaseStalled,
			message: "correct spec.version"},
		{name: "a new cluster's outdated pod in which etcd ran is never deleted",
			in: bootstrapping(Pod{CannotStart: "CrashLoopBackOff"}, Pod{}, Pod{}), replicas: 3, phase: PhaseStalled, message: "member 0 (CrashLoopBackOff)"},
		{name: "a new cluster's outdated pods that run etcd are left to start",
			in: bootstrapping(Pod{}, Pod{}, Pod{}), replicas: 3, phase: PhaseBootstrapping, message: "bootstrapping 3 members"},
		{name: "a member etcd cannot be asked about, whose pod never ran on a corrected version, is restarted",
			in: func() Observed {
				o := formed(1, 1, nil)
				o.Reachable, o.Pods[0] = false, stuck
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 1, phase: PhaseUpgrading, message: "restarting member 0"},
		{name: "a member etcd cannot be asked about, whose outdated pod ran, is left alone",
			in: func() Observed {
				o := formed(1, 1, nil)
				o.Reachable, o.Pods[0] = false, Pod{CannotStart: "CrashLoopBackOff"}
				return o
			}(),
			replicas: 1, phase: PhaseWaiting, message: "unreachable"},
		{name: "an unhealthy member whose outdated pod waits in its init containers is restarted",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				o.Members[2].Healthy, o.Members[2].UnhealthySince = false, now.Add(-time.Minute)
				o.Pods[2] = Pod{NeverRan: true}
				return o
			}(),
			action: ActionDeletePod, ordinal: 2, replicas: 3, phase: PhaseUpgrading, message: "etcd never ran in it"},
		{name: "a rolling upgrade of running members goes on one at a time, followers first",
			in: func() Observed {
				o := formed(3, 3, voters(3))
				for i := range 3 {
					o.Pods[i] = Pod{Ready: true}
				}
				return o
			}(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseUpgrading, message: "upgrading c-1"},
	}
	runPlanCases(t, cases)
}
