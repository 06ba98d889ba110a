package membership

import (
	"slices"
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
		Desired:             desired,
		StatefulSetReplicas: sts,
		Formed:              formed&1 == 1,
		JoinGated:           formed&2 != 0,
		Reachable:           next()&1 == 1,
		Pods:                map[int]Pod{},
		Volumes:             map[int]Volume{},
		Now:                 now,
		HealAfter:           5 * time.Minute,
		TargetVersion:       "3.6.0",
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
			Healthy: flags&4 != 0, Leader: i == leader, RaftIndex: uint64(next()) * 100}
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
	return o
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
	f.Fuzz(func(t *testing.T, data []byte) {
		o := observedFrom(data)
		d := Plan(o)
		if d.Replicas < 0 && o.StatefulSetReplicas >= 0 {
			t.Fatalf("negative replicas %d", d.Replicas)
		}
		if o.Formed && !o.Reachable && o.StatefulSetReplicas >= 0 && d.Action.Type != ActionNone {
			t.Fatalf("etcd unreachable, but the plan acts: %+v", d.Action)
		}
		if o.Formed && d.Config != nil && d.Config.State != "existing" {
			t.Fatalf("a formed cluster bootstraps again: %+v", d.Config)
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
			if healthy != voters {
				t.Fatalf("adding a member while %d of %d voters are healthy", healthy, voters)
			}
			for _, m := range o.Members {
				// (A learner the operator does not manage is left alone; etcd's default --max-learners=1
				// then refuses the add, and the operator retries: reported, not asserted here.)
				if m.Learner && m.Ordinal >= 0 {
					t.Fatalf("adding a second learner while %+v is one", m)
				}
				if m.Ordinal == a.Ordinal {
					t.Fatalf("adding ordinal %d, which member %+v has", a.Ordinal, m)
				}
			}
		case ActionDeletePod:
			if stuckPod(o, a.Ordinal) {
				if target != nil && target.Healthy {
					t.Fatalf("restarting healthy member %+v because its pod reported it cannot start", *target)
				}
				break // restarting a pod that runs no etcd costs no availability
			}
			for _, m := range o.Members {
				if m.Ordinal < 0 {
					continue
				}
				if p := o.Pods[m.Ordinal]; !m.Healthy || !p.Ready || p.Terminating {
					t.Fatalf("restarting %+v while %+v is not healthy and ready", *target, m)
				}
			}
		case ActionPromote:
			if !target.Learner || !target.Started {
				t.Fatalf("promoting %+v", *target)
			}
		}
	})
}

// stuckPod: the pod of ordinal ord exists, runs an outdated template and cannot run etcd.
func stuckPod(o Observed, ord int) bool {
	p, ok := o.Pods[ord]
	return ok && p.CannotStart != "" && !p.UpToDate && !p.Terminating
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
