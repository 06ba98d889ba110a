package membership

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// observedFrom decodes fuzz bytes into an observation: a few members (voters, learners, unknown ones,
// healthy or not, one leader at most), their pods and claims.
func observedFrom(data []byte) Observed {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	now := time.Date(2026, 11, 22, 16, 0, 0, 0, time.UTC)
	desired, sts, formed := int(next()%8), int(next()%10)-1, next()
	o := Observed{
		Desired:              desired,
		StatefulSetReplicas:  sts,
		Formed:               formed&1 == 1,
		JoinGated:            formed&2 != 0,
		InitialClusterIntact: formed&4 != 0,
		Reachable:            next()&1 == 1,
		Pods:                 map[int]Pod{},
		Volumes:              map[int]Volume{},
		Now:                  now,
		HealAfter:            5 * time.Minute,
		TargetVersion:        "3.6.0",
		MaxLearners:          1 + int(formed>>3&3),
	}
	n := int(next() % 8)
	leader := int(next() % 9) // >= n: no leader
	for i := range n {
		flags := next()
		ord := int(next() % 9)
		if flags&0x80 != 0 {
			ord = -1
		}
		m := Member{ID: uint64(i + 1), Ordinal: ord, Name: "m", Learner: flags&1 != 0, Started: flags&2 != 0,
			Healthy: flags&4 != 0, Answered: flags&16 != 0, Leader: i == leader, RaftIndex: uint64(next()) * 100}
		if !m.Healthy && flags&8 != 0 {
			m.UnhealthySince = now.Add(-time.Duration(next()) * time.Minute)
		}
		o.Members = append(o.Members, m)
	}
	for range int(next() % 9) {
		f := next()
		p := Pod{Ready: f&16 != 0, UpToDate: f&32 != 0, Terminating: f&64 != 0}
		if f&128 != 0 {
			p.Created = now.Add(-time.Duration(next()) * time.Minute)
		}
		switch next() % 8 {
		case 1:
			p.CannotStart = "ImagePullBackOff"
		case 2:
			p.CannotStart = "CrashLoopBackOff"
		case 3:
			p.StaleData = "stale-data: member 1 was removed"
		case 4:
			p.NeverRan, p.CannotStart = true, "ErrImagePull"
		case 5:
			p.NeverRan = true // waiting for its init containers
		}
		o.Pods[int(f%9)] = p
	}
	if next()&1 == 1 {
		o.QuorumSince = now.Add(-time.Duration(next()) * time.Minute)
	}
	for range int(next() % 4) {
		f := next()
		o.Volumes[int(f%9)] = Volume{MemberID: uint64(next() % 9), Replace: f&16 != 0}
	}
	// Quorum-loss recovery: off unless bytes are left for it (the older seeds end before).
	if f := next(); f&1 == 1 {
		rc := Recovery{FromSurvivor: f&2 != 0, TemplateGateHolds: f&4 != 0, After: time.Duration(next()) * time.Second,
			LostSince: now.Add(-time.Duration(next()) * time.Second), Survivors: map[int]Survivor{}}
		for i := range int(next() % 8) {
			vf := next()
			v := Voter{Ordinal: int(vf % 9), ID: uint64(100 + i), Name: fmt.Sprintf("v%d", vf%9), HasData: vf&16 != 0}
			if slices.ContainsFunc(rc.Voters, func(o Voter) bool { return o.Ordinal == v.Ordinal }) {
				continue // status lists one member per pod name
			}
			rc.Voters = append(rc.Voters, v)
			if vf&32 != 0 {
				id := v.ID
				if vf&64 != 0 {
					id++ // answers under another ID
				}
				rc.Survivors[v.Ordinal] = Survivor{ID: id, RaftIndex: uint64(next()), Learner: vf&128 != 0}
			}
		}
		if f&8 != 0 {
			rc.Forcing = &ForceNewCluster{Member: fmt.Sprintf("v%d", next()%9), OldPod: fmt.Sprintf("pod-%d", next()%9)}
		}
		holds := next()
		for ord, p := range o.Pods {
			p.UID, p.GateHoldsForRecovery = fmt.Sprintf("pod-%d", ord), holds&(1<<(ord%8)) != 0
			o.Pods[ord] = p
		}
		o.Recovery = rc
	}
	// The pods' nodes: all Ready unless bytes are left for them (the older seeds end before).
	for _, ord := range sortedOrdinals(o.Pods) {
		f := next()
		p := o.Pods[ord]
		p.Node = fmt.Sprintf("node-%d", f%4)
		switch f >> 2 % 4 {
		case 1:
			p.NodeDown = NodeNotReady
		case 2:
			p.NodeDown = NodeUnknown
		case 3:
			p.NodeDown = NodeGone
		}
		if p.NodeDown == NodeNotReady || p.NodeDown == NodeUnknown {
			p.NodeDownSince = now.Add(-time.Duration(next()) * 10 * time.Second)
		}
		o.Pods[ord] = p
	}
	// A strict spread, and the nodes the claims bind their pods to (the older seeds end before).
	o.StrictSpread = next()&1 != 0
	for _, ord := range slices.Sorted(maps.Keys(o.Volumes)) {
		if f := next(); f&1 != 0 {
			v := o.Volumes[ord]
			v.Node = fmt.Sprintf("node-%d", f>>1%4)
			o.Volumes[ord] = v
		}
	}
	return o
}

// checkRecoveryStep fails unless a decision about an unreachable (or forced) cluster is a step of
// quorum-loss recovery the evidence allows: a forced start only while etcd cannot answer, only when the
// spec asks for it (or one is under way), never while a quorum of the voters still holds its data or
// before the window is over, of an answering voter under its own ID, with every other pod (and the
// template) behind a gate that holds it back; and, under way, only a restart of the pod that started without the instruction.
func checkRecoveryStep(t *testing.T, o Observed, d Decision) {
	t.Helper()
	rc := o.Recovery
	forced := d.Config != nil && d.Config.ForceNewCluster != nil
	if o.Reachable && forced {
		t.Fatalf("forcing a new cluster while etcd answers: %+v", d.Config.ForceNewCluster)
	}
	if !o.Formed || o.Reachable || o.StatefulSetReplicas < 0 {
		return
	}
	if d.Action.Type == ActionNone && !forced {
		return
	}
	if d.Action.Type != ActionNone && d.Action.Type != ActionDeletePod {
		t.Fatalf("etcd unreachable, but the plan takes %+v", d.Action)
	}
	if !forced {
		if d.Action.Type == ActionDeletePod && stuckPod(o, d.Action.Ordinal) && o.Pods[d.Action.Ordinal].NeverRan {
			return // etcd never ran in it: it holds no vote, and its volume stays as it is
		}
		t.Fatalf("etcd unreachable, but the plan acts without forcing a new cluster: %+v (%q)", d.Action, d.Message)
	}
	voter := func(name string) (Voter, bool) {
		for _, v := range rc.Voters {
			if v.Name == name {
				return v, true
			}
		}
		return Voter{}, false
	}
	if rc.Forcing != nil {
		if *d.Config.ForceNewCluster != *rc.Forcing {
			t.Fatalf("the instruction changed while under way: %+v, was %+v", d.Config.ForceNewCluster, rc.Forcing)
		}
		if v, ok := voter(rc.Forcing.Member); d.Action.Type == ActionDeletePod && (!ok || d.Action.Ordinal != v.Ordinal || o.Pods[v.Ordinal].UID != rc.Forcing.OldPod) {
			t.Fatalf("under way, restarting pod %d (%s), not the pod %s of %s", d.Action.Ordinal, o.Pods[d.Action.Ordinal].UID, rc.Forcing.OldPod, rc.Forcing.Member)
		}
		return
	}
	if !rc.FromSurvivor {
		t.Fatalf("forcing a new cluster the spec did not ask for: %+v", d.Config.ForceNewCluster)
	}
	withData := 0
	for _, v := range rc.Voters {
		if _, answers := rc.Survivors[v.Ordinal]; answers || v.HasData {
			withData++
		}
	}
	if withData >= Quorum(len(rc.Voters)) {
		t.Fatalf("forcing a new cluster while %d of %d voters hold their data", withData, len(rc.Voters))
	}
	if o.Now.Before(rc.LostSince.Add(rc.After)) {
		t.Fatalf("forcing a new cluster %s after the loss, before the window of %s", o.Now.Sub(rc.LostSince), rc.After)
	}
	s, ok := voter(d.Config.ForceNewCluster.Member)
	if sv, answers := rc.Survivors[s.Ordinal]; !ok || !answers || sv.ID != s.ID || sv.Learner || d.Action.Ordinal != s.Ordinal {
		t.Fatalf("forcing %+v (restarting pod %d), which is no answering voter", s, d.Action.Ordinal)
	}
	if !rc.TemplateGateHolds {
		t.Fatalf("forcing %s while new pods come from a template whose gate does not hold them back", s.Name)
	}
	for ord, p := range o.Pods {
		if ord != s.Ordinal && !p.Terminating && !p.GateHoldsForRecovery {
			t.Fatalf("forcing %s while pod %d may start etcd without a gate holding it back", s.Name, ord)
		}
	}
}

// checkLateBootstrap fails unless a formed cluster's "new" configuration is the bootstrap's own, for a
// member of it that never started: etcd's members are the initial cluster unchanged, none a learner or
// unknown, the list names each of them under its registered URL, and no member is being added.
func checkLateBootstrap(t *testing.T, o Observed, d Decision) {
	t.Helper()
	if d.Config.State != StateNew || !o.InitialClusterIntact || d.Action.Type == ActionAddLearner {
		t.Fatalf("a formed cluster bootstraps again: %+v (action %+v)", d.Config, d.Action)
	}
	var listed []ConfigMember
	var unstarted []int
	for _, m := range o.Members {
		if m.Learner || m.Ordinal < 0 {
			t.Fatalf("a formed cluster with learner or unknown member %+v bootstraps again: %+v", m, d.Config)
		}
		if !m.Started {
			unstarted = append(unstarted, m.Ordinal)
		}
		listed = append(listed, ConfigMember{Ordinal: m.Ordinal, Name: m.Name, PeerURL: m.PeerURL})
	}
	slices.SortFunc(listed, func(a, b ConfigMember) int { return a.Ordinal - b.Ordinal })
	slices.Sort(unstarted)
	if len(unstarted) == 0 || !slices.Equal(listed, d.Config.Members) {
		t.Fatalf("a formed cluster whose members %+v all started, or are not those listed, bootstraps again: %+v", o.Members, d.Config)
	}
	if !slices.Equal(unstarted, d.Config.Late) {
		t.Fatalf("members %v never started, but %v may bootstrap late", unstarted, d.Config.Late)
	}
}

// FuzzPlan: Plan never panics, and whatever it observes, its one step never costs quorum: it only removes
// or replaces a member the remaining healthy voters can do without, never removes a leader that could
// hand over first, never touches members it does not manage, adds only while all voters are healthy,
// restarts pods only when every member is healthy and ready, and changes nothing while etcd is unreachable.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 3, 1, 1, 3, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0, 3, 0x30, 0x31, 0x32})
	f.Add([]byte{3, 3, 1, 1, 3, 1, 6, 0, 0, 0x0c, 1, 200, 6, 2, 0, 0})
	f.Add([]byte{5, 3, 1, 1, 3, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0, 0, 0})
	f.Add([]byte{1, 3, 1, 1, 3, 2, 6, 0, 0, 6, 1, 0, 6, 2, 0, 0, 1, 0x12, 1})
	f.Add([]byte{3, 4, 1, 1, 4, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0, 3, 3, 0, 0x30, 0x31, 0x32})
	f.Add([]byte{3, 3, 1, 0, 3, 0, 6, 0, 0, 6, 1, 0, 6, 2, 0})
	// Unreachable, 3 voters of which member 0 answers with its data and 1, 2 lost theirs, past the
	// window: a forced start of member 0.
	f.Add([]byte{3, 4, 1, 0, 0, 0, 3, 0x00, 0, 0x01, 0, 0x02, 0, 0, 0, 0x07, 30, 200, 3, 0x36, 50, 0x01, 0x02, 0xff})
	// Member 2 removed, its claim marked, its pod Terminating on a node NotReady for 30 minutes: the pod is
	// deleted at once.
	f.Add([]byte{3, 4, 1, 1, 2, 0, 0x16, 0, 0, 0x16, 1, 0, 1, 0x65, 0, 0, 1, 0x14, 3, 0, 6, 180})
	f.Fuzz(func(t *testing.T, data []byte) {
		o := observedFrom(data)
		d := Plan(o)
		if d.Replicas < 0 && o.StatefulSetReplicas >= 0 {
			t.Fatalf("negative replicas %d", d.Replicas)
		}
		checkForcedDeletion(t, o, d)
		checkRecoveryStep(t, o, d)
		if o.Formed && !o.Reachable && o.StatefulSetReplicas >= 0 {
			return // the member list is unknown: checkRecoveryStep judged the step against what status last knew
		}
		// The one step a cluster that never formed takes: a pod in which etcd never ran, on an outdated
		// template, is restarted on the current one (it holds no vote).
		restartsNeverRan := d.Action.Type == ActionDeletePod && stuckPod(o, d.Action.Ordinal) && o.Pods[d.Action.Ordinal].NeverRan
		if !o.Formed && !o.Reachable && (d.Action.Type != ActionNone && !restartsNeverRan || d.Config == nil || d.Config.State != StateNew) {
			t.Fatalf("a cluster that never formed changes membership or leaves its bootstrap: %+v, %+v", d.Action, d.Config)
		}
		if o.Formed && d.Config != nil && d.Config.State != StateExisting {
			checkLateBootstrap(t, o, d)
		}
		if o.Reachable && o.StatefulSetReplicas >= 0 {
			for _, m := range o.Members {
				if m.Ordinal >= 0 && d.Replicas < m.Ordinal+1 {
					t.Fatalf("StatefulSet of %d would drop member %+v", d.Replicas, m)
				}
				if m.Ordinal < 0 && d.Replicas < o.StatefulSetReplicas {
					t.Fatalf("StatefulSet shrinks from %d to %d while etcd has a member the operator cannot place: %+v", o.StatefulSetReplicas, d.Replicas, m)
				}
			}
		}
		if o.Reachable && o.StatefulSetReplicas >= 0 {
			// The StatefulSet covers the members, the spec and what exists; starting pods ahead adds none beyond.
			limit := max(o.Desired, o.StatefulSetReplicas)
			for _, m := range o.Members {
				limit = max(limit, m.Ordinal+1)
			}
			if d.Replicas > limit {
				t.Fatalf("StatefulSet of %d: more than the spec (%d), the members and the current size (%d) need", d.Replicas, o.Desired, o.StatefulSetReplicas)
			}
		}
		if o.Formed && o.Reachable && o.StatefulSetReplicas >= 0 {
			checkHealPrecedence(t, o, d)
		}
		a := d.Action
		if a.Type == ActionNone {
			return
		}
		if a.Type == ActionAddLearner && (d.Config == nil || !slices.Contains(d.Config.Ordinals(), a.Ordinal)) {
			t.Fatalf("adding member %d with a configuration that does not list it: %+v", a.Ordinal, d.Config)
		}
		// (A terminating pod's state does not describe the pod that will run; a member whose data is
		// provably lost, by its claim's record, is replaced whatever its pod does.)
		if p := o.Pods[a.Ordinal]; a.Type == ActionMarkReplace && imageFailure(p.CannotStart) && !p.Terminating && !claimSaysDataLost(o, a) {
			t.Fatalf("healing member %d, whose pod cannot pull its image (%s): the replacement would not start either", a.Ordinal, o.Pods[a.Ordinal].CannotStart)
		}
		voters, healthy := 0, 0
		var target *Member
		for i, m := range o.Members {
			if !m.Learner {
				voters++
				if m.Healthy {
					healthy++
				}
			}
			if a.ID != 0 && m.ID == a.ID {
				target = &o.Members[i]
			}
		}
		switch a.Type {
		case ActionRemove, ActionMarkReplace, ActionPromote, ActionMoveLeader, ActionDeletePod:
			if a.Type == ActionDeletePod && stuckPod(o, a.Ordinal) {
				break // a pod that cannot run etcd is restarted whoever it belongs to (checked below)
			}
			if target == nil {
				t.Fatalf("%s of member %d, which etcd does not list", a.Type, a.ID)
			}
			if target.Ordinal < 0 {
				t.Fatalf("%s of a member the operator does not manage: %+v", a.Type, *target)
			}
		}
		switch a.Type {
		case ActionRemove, ActionMarkReplace:
			if !target.Learner {
				left := healthy
				if target.Healthy {
					left--
				}
				if left < Quorum(voters-1) {
					t.Fatalf("%s %+v leaves %d healthy of %d voters (quorum %d)", a.Type, *target, left, voters-1, Quorum(voters-1))
				}
			}
			if a.Type == ActionRemove && target.Leader {
				for _, m := range o.Members {
					if m.ID != target.ID && m.Ordinal >= 0 && !m.Learner && m.Started && m.Healthy {
						t.Fatalf("removing leader %+v although %+v could take over first", *target, m)
					}
				}
			}
		case ActionMoveLeader:
			if target.Learner || !target.Healthy || target.Leader {
				t.Fatalf("moving leadership to %+v", *target)
			}
		case ActionAddLearner:
			// Only a member removed before is re-added beside unhealthy voters, and only where the healthy
			// ones hold a quorum once it votes.
			if healthy != voters && (healthy < Quorum(voters+1) || !reAddPending(o)) {
				t.Fatalf("adding a member while %d of %d voters are healthy", healthy, voters)
			}
			learners, unknown := 0, false
			for _, m := range o.Members {
				if m.Ordinal < 0 {
					unknown = true
				}
				if m.Learner && m.Ordinal >= 0 {
					learners++
					if !m.Started {
						t.Fatalf("adding a member while learner %+v has not started (it reads the member list when it does)", m)
					}
				}
				if m.Ordinal == a.Ordinal {
					t.Fatalf("adding ordinal %d, which member %+v has", a.Ordinal, m)
				}
			}
			// (A learner the operator does not manage is left alone; where etcd's limit is reached, it
			// refuses the add, and the operator retries: reported, not asserted here.)
			if learners > 0 && (learners >= o.MaxLearners || unknown) {
				t.Fatalf("adding a learner beside %d (every member accepts %d at once; a member the operator cannot place: %v)", learners, o.MaxLearners, unknown)
			}
		case ActionDeletePod:
			// A restart is a rolling step when every member is healthy and ready, whatever else its pod
			// reports; otherwise only a stuck pod of a member that is not healthy may be restarted.
			var notReady *Member
			for i, m := range o.Members {
				if m.Ordinal < 0 {
					continue
				}
				if p := o.Pods[m.Ordinal]; !m.Healthy || !p.Ready || p.Terminating {
					notReady = &o.Members[i]
					break
				}
			}
			if notReady == nil {
				break
			}
			if stuckPod(o, a.Ordinal) {
				if target != nil && target.Healthy {
					t.Fatalf("restarting healthy member %+v because its pod reported it cannot start: %s", *target, d.Message)
				}
				break // restarting a pod that runs no etcd costs no availability
			}
			t.Fatalf("restarting %+v while %+v is not healthy and ready: %s", *target, *notReady, d.Message)
		case ActionPromote:
			if !target.Learner || !target.Started {
				t.Fatalf("promoting %+v", *target)
			}
		}
	})
}

// checkHealPrecedence fails when a heal sheds a member (a voter removed, or marked for removal, while a
// member removed before has not come back as a voter: the voters would fall below the desired count minus
// one), or when a rule that only waits hides a heal that is due and safe: a member whose claim is going or
// records another member, or that stayed unhealthy past HealAfter, with quorum holding without it.
func checkHealPrecedence(t *testing.T, o Observed, d Decision) {
	t.Helper()
	a := d.Action
	var target *Member
	for i, m := range o.Members {
		if a.ID != 0 && m.ID == a.ID {
			target = &o.Members[i]
		}
	}
	if (a.Type == ActionRemove || a.Type == ActionMarkReplace) && d.Phase == PhaseHealing && target != nil && !target.Learner && reAddPending(o) {
		t.Fatalf("%s of voter %+v while a member removed before awaits its re-add: %s", a.Type, *target, d.Message)
	}
	// (A quorum-loss recovery in progress has steps of its own, checked by checkRecoveryStep.)
	if a.Type != ActionNone || d.Phase == PhaseBlocked || d.Phase == PhaseRecovering || reAddPending(o) {
		return
	}
	for _, m := range o.Members {
		if m.Ordinal < 0 || m.Learner {
			continue
		}
		vol, hasVolume := o.Volumes[m.Ordinal]
		p, hasPod := o.Pods[m.Ordinal]
		due := hasVolume && (vol.Deleting && vol.MemberID == m.ID || !vol.Deleting && vol.MemberID != 0 && vol.MemberID != m.ID)
		if !due && !m.Healthy && !m.UnhealthySince.IsZero() && m.UnhealthySince.Before(o.QuorumSince) == false &&
			o.Now.Sub(m.UnhealthySince) >= o.HealAfter && (!hasPod || p.CannotStart == "" && !p.Terminating && p.Created.Before(m.UnhealthySince)) {
			due = true
		}
		if !due {
			continue
		}
		left, voters := 0, 0
		for _, x := range o.Members {
			if !x.Learner {
				voters++
				if x.Healthy && x.ID != m.ID {
					left++
				}
			}
		}
		if left >= Quorum(voters-1) {
			t.Fatalf("member %+v is due for healing and quorum holds without it, but the decision waits: %s (%s)", m, d.Phase, d.Message)
		}
	}
}

// checkForcedDeletion fails when a pod is deleted without waiting for its kubelet other than to delete the
// data of a member etcd no longer lists, from a node that is gone or has not been Ready for HealAfter.
func checkForcedDeletion(t *testing.T, o Observed, d Decision) {
	t.Helper()
	a := d.Action
	if !a.Force {
		return
	}
	p, ok := o.Pods[a.Ordinal]
	if a.Type != ActionDeleteVolume || !ok {
		t.Fatalf("forced %s of ordinal %d (pod %v): %s", a.Type, a.Ordinal, ok, d.Message)
	}
	if p.NodeDown != NodeGone && (p.NodeDown == "" || p.NodeDownSince.IsZero() || o.Now.Sub(p.NodeDownSince) < o.HealAfter) {
		t.Fatalf("deleting pod %d at once while its node %s is %q since %s (HealAfter %s): %s", a.Ordinal, p.Node, p.NodeDown,
			p.NodeDownSince, o.HealAfter, d.Message)
	}
	for _, m := range o.Members {
		if m.Ordinal == a.Ordinal {
			t.Fatalf("deleting the pod of %+v at once while etcd still lists it: %s", m, d.Message)
		}
	}
}

// reAddPending: a managed learner, or an ordinal below the highest member's that etcd does not list, or one
// whose claim records a member etcd no longer has (or is marked, or going).
func reAddPending(o Observed) bool {
	top, have := -1, map[int]bool{}
	for _, m := range o.Members {
		if m.Ordinal < 0 {
			continue
		}
		if m.Learner {
			return true
		}
		have[m.Ordinal], top = true, max(top, m.Ordinal)
	}
	for ord := 0; ord < max(top, o.Desired); ord++ {
		if have[ord] {
			continue
		}
		vol, ok := o.Volumes[ord]
		if ord < top || ok && (vol.Replace || vol.Deleting || vol.MemberID != 0 && !slices.ContainsFunc(o.Members, func(m Member) bool { return m.ID == vol.MemberID })) {
			return true
		}
	}
	return false
}

// stuckPod: the pod of ordinal ord exists, runs an outdated template and cannot run etcd, or etcd never ran in it.
func stuckPod(o Observed, ord int) bool {
	p, ok := o.Pods[ord]
	return ok && (p.CannotStart != "" || p.NeverRan && !p.Ready) && !p.UpToDate && !p.Terminating
}

// claimSaysDataLost: the claim of the action's ordinal records another member's data, or the member's
// recorded claim was replaced.
func claimSaysDataLost(o Observed, a Action) bool {
	vol := o.Volumes[a.Ordinal]
	for _, m := range o.Members {
		if m.ID == a.ID {
			return m.ClaimReplaced || (vol.MemberID != 0 && vol.MemberID != m.ID)
		}
	}
	return false
}

// FuzzVersionLess: VersionLess is a strict order on any strings (never both a<b and b<a, never a<a), and
// on X.Y.Z versions it agrees with numeric comparison (status.currentVersion is the lowest member's).
func FuzzVersionLess(f *testing.F) {
	for _, p := range [][2]string{{"3.5.9", "3.5.17"}, {"3.5.17", "3.6.0"}, {"3.5", "3.5.0"}, {"3.5.x", "3.5.0"}, {"", "3"}, {"10.0.0", "9.9.9"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if VersionLess(a, a) {
			t.Fatalf("VersionLess(%q, %q)", a, a)
		}
		if VersionLess(a, b) && VersionLess(b, a) {
			t.Fatalf("%q < %q and %q < %q", a, b, b, a)
		}
		pa, okA := numeric(a)
		pb, okB := numeric(b)
		if !okA || !okB {
			return
		}
		want := false
		for i := range 3 {
			if pa[i] != pb[i] {
				want = pa[i] < pb[i]
				break
			}
		}
		if got := VersionLess(a, b); got != want {
			t.Fatalf("VersionLess(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}

func numeric(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
