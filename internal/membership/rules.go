package membership

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// rule is one piece of etcd operational knowledge: it returns its decision and true when the situation is
// its to decide, or false to let the next rule look.
type rule struct {
	name   string
	decide func(o Observed, v view) (Decision, bool)
}

// rules of a reachable cluster, in the order they are tried (bootstrap, quorum-loss recovery and unreachable
// come first, in Plan):
//  0. end a quorum-loss recovery: once every member restored from the backup and is healthy, or the
//     forced member answers, the recovery's record leaves the configuration;
//  1. restart a pod that cannot run etcd on an outdated template (a reverted version), or one in which etcd
//     never ran (restartNeverRan), onto the current one;
//  2. finish a replacement in progress (remove the member, then its data: a pod on a lost node is deleted
//     without waiting for its kubelet), or call it off if it recovered;
//  3. wipe a volume the member gate refused (it holds a removed member's data);
//  4. remove a learner that has not started when the spec no longer wants it, or when it cannot start and a
//     voter is due for healing (a learner never holds back what outranks waiting for it);
//  5. replace a member whose data is lost, or that failed to rejoin for HealAfter, if quorum holds without it
//     and no member removed before is still waiting to be re-added (a member is replaced, never shed);
//  6. report a member pod that cannot run etcd and change nothing more (a version that does not start);
//  7. promote a started learner once it has caught up, after giving it its pod (the next may join beside
//     learners still catching up, as many as etcd accepts at once);
//  8. scale up by one learner while every voter is healthy (or while the only unhealthy ones wait for a
//     member removed before to be re-added, when quorum holds once it is promoted);
//  9. scale down one member, highest ordinal first, leader moved away first, never below quorum;
//  10. roll outdated pods one at a time, followers first and the leader last;
//  11. otherwise stable (or waiting for unhealthy members).
//
// The order is the precedence: steps that protect quorum or data and heals that are due come before rules
// that claim the decision only to wait (stalled, learners), so a wait never hides them.
var rules = []rule{
	{"end restore", endRestore},
	{"end forced start", endForcedStart},
	{"restart stuck pod", restartStuckPod},
	{"finish replacement", finishReplacement},
	{"wipe refused data", wipeRefusedData},
	{"move off a member's node", moveOffMemberNode},
	{"drop learner", dropLearner},
	{"heal", heal},
	{"stalled", stalled},
	{"learners", learners},
	{"scale up", scaleUp},
	{"scale down", scaleDown},
	{"roll", roll},
	{"stable", stable},
}

// bootstrap: a cluster that never formed starts every member together from a static list (fast); members
// of it that start after it formed keep that list (lateBootstrap). A formed cluster never bootstraps
// again, even when its StatefulSet is gone (deleted with orphaned pods, or replaced to grow volumes): a new
// initial cluster would split it in two. Its one step is restartNeverRan (a corrected version reaches pods
// that never started); a member pod whose image cannot be had stalls it, as it stalls an upgrade.
func bootstrap(o Observed) (Decision, bool) {
	if o.Formed || o.Reachable {
		return Decision{}, false
	}
	n := o.Desired
	if o.StatefulSetReplicas > 0 {
		n = o.StatefulSetReplicas // the bootstrap size is fixed once pods exist
	}
	cfg := &Config{State: StateNew}
	for _, ord := range seq(n) {
		cfg.Members = append(cfg.Members, ConfigMember{Ordinal: ord})
	}
	d := Decision{Replicas: n, Config: cfg, Phase: PhaseBootstrapping, Message: fmt.Sprintf("bootstrapping %d members", n)}
	if a, msg, ok := restartNeverRan(o, nil); ok {
		d.Action, d.Message = a, msg
		return d, true
	}
	if stuck := stuckPods(o, nil); len(stuck) > 0 {
		d.Phase, d.Message = PhaseStalled, stalledMessage(o, stuck)
	}
	return d, true
}

// restartNeverRan deletes, lowest ordinal first, a pod on an outdated template in which etcd never ran
// (its image did not pull, say, and the spec was corrected since), so the StatefulSet, which updates pods
// only when they are deleted (OnDelete), recreates it on the current template at once. It needs no
// member's health: such a pod serves nothing, holds no vote, and its volume stays as it is. This is how a
// cluster that never formed, or that etcd cannot be asked about, takes a corrected version; a pod in which
// etcd has run is left to the rules that know its member (restartStuckPod, roll). healthy, when etcd
// answered, says which ordinals' members are healthy: their pods are never touched.
func restartNeverRan(o Observed, healthy func(ord int) bool) (Action, string, bool) {
	for _, ord := range sortedOrdinals(o.Pods) {
		p := o.Pods[ord]
		if !p.NeverRan || p.UpToDate || p.Terminating || p.Ready || healthy != nil && healthy(ord) {
			continue
		}
		why := "etcd never ran in it"
		if p.CannotStart != "" {
			why += " (" + p.CannotStart + ")"
		}
		return Action{Type: ActionDeletePod, Ordinal: ord},
			fmt.Sprintf("restarting member %d onto the current template: %s", ord, why), true
	}
	return Action{}, "", false
}

// unreachable: after formation, nothing about membership is safe to change without etcd's member list. A
// missing StatefulSet is recreated to cover the members last seen, so their pods come back on their data.
// Only a pod in which etcd never ran is restarted onto a corrected template (restartNeverRan): a single
// member restarted onto a version that does not exist leaves etcd nobody to answer.
func unreachable(o Observed) (Decision, bool) {
	if o.Reachable {
		return Decision{}, false
	}
	n := o.StatefulSetReplicas
	if n < 0 {
		n = 0
		for _, ord := range o.KnownOrdinals {
			n = max(n, ord+1)
		}
		if n == 0 {
			n = o.Desired
		}
	}
	msg := "etcd is unreachable; waiting"
	if down := nodesDown(o); down != "" {
		msg += " (" + down + ")"
	}
	if a, why, ok := restartNeverRan(o, nil); ok {
		return Decision{Replicas: n, Action: a, Phase: PhaseUpgrading, Message: why}, true
	}
	return Decision{Replicas: n, Phase: PhaseWaiting, Message: msg}, true
}

// restartStuckPod restarts an outdated pod whose etcd cannot run (a version that does not exist, then
// reverted): with OnDelete the StatefulSet never replaces it by itself, and a pod that runs nothing serves
// nothing, so restarting it costs no availability.
func restartStuckPod(o Observed, v view) (Decision, bool) {
	healthy := func(ord int) bool { m, ok := byOrdinal(v.ours, ord); return ok && m.Healthy }
	for _, ord := range sortedOrdinals(o.Pods) {
		p := o.Pods[ord]
		if p.CannotStart == "" || p.UpToDate || p.Terminating || healthy(ord) {
			continue
		}
		return Decision{Replicas: v.replicas, Action: Action{Type: ActionDeletePod, Ordinal: ord}, Phase: PhaseUpgrading,
			Message: fmt.Sprintf("restarting member %d onto the current template: its pod cannot run etcd (%s)", ord, p.CannotStart)}, true
	}
	if a, msg, ok := restartNeverRan(o, healthy); ok {
		return Decision{Replicas: v.replicas, Action: a, Phase: PhaseUpgrading, Message: msg}, true
	}
	return Decision{}, false
}

// finishReplacement continues a heal that marked a member's claim: remove the member, then delete its data.
// A member that recovered before its removal keeps its data: the mark is dropped (unless its data is lost).
func finishReplacement(o Observed, v view) (Decision, bool) {
	for _, ord := range sortedOrdinals(o.Volumes) {
		vol := o.Volumes[ord]
		if !vol.Replace {
			continue
		}
		m, ok := byOrdinal(v.ours, ord)
		if !ok {
			return deleteData(o, v, ord, PhaseHealing, fmt.Sprintf("deleting the data of member %d to re-add it empty", ord)), true
		}
		if m.Healthy && !dataLost(o, m) {
			return Decision{Replicas: v.replicas, Action: Action{Type: ActionUnmarkReplace, Ordinal: ord, ID: m.ID}, Phase: PhaseHealing,
				Message: fmt.Sprintf("keeping %s: it recovered before it was replaced", m.Name)}, true
		}
		if _, waiting := awaitingReAdd(o, v); waiting && !m.Learner {
			continue // another member is re-added first (heal)
		}
		return removeSafely(v, m, PhaseHealing, withNodeNote(o, ord, fmt.Sprintf("removing %s to replace its data", m.Name))), true
	}
	return Decision{}, false
}

// wipeRefusedData deletes a volume whose pod's member gate refused it: the data is a removed member's, so
// etcd would run as that member, rejected by every peer. No started member may hold the ordinal.
func wipeRefusedData(o Observed, v view) (Decision, bool) {
	for _, ord := range sortedOrdinals(o.Pods) {
		p := o.Pods[ord]
		if p.StaleData == "" || p.Terminating {
			continue
		}
		if m, ok := byOrdinal(v.ours, ord); ok && m.Started {
			continue
		}
		if vol, ok := o.Volumes[ord]; ok && vol.Deleting {
			continue // already going
		}
		return Decision{Replicas: v.replicas, Action: Action{Type: ActionDeleteVolume, Ordinal: ord}, Phase: PhaseHealing,
			Message: fmt.Sprintf("deleting the data of member %d: %s", ord, p.StaleData)}, true
	}
	return Decision{}, false
}

// stalled reports a member pod on the current template that cannot run etcd because of its image (it
// does not pull), or that crash-loops while a version change rolls. Its data is intact and a replacement
// would use the same template, so it is never healed: the cluster waits for the image or the spec to be
// fixed, and nothing else is touched meanwhile. A crash loop with no version change in flight is left to
// heal: the member failed to rejoin on a template that runs everywhere else.
func stalled(o Observed, v view) (Decision, bool) {
	stuck := stuckPods(o, func(ord int) bool { m, ok := byOrdinal(v.ours, ord); return ok && m.Healthy })
	if len(stuck) == 0 {
		return Decision{}, false
	}
	return Decision{Replicas: v.replicas, Phase: PhaseStalled, Message: stalledMessage(o, stuck)}, true
}

// stuckPods lists the member pods that cannot run etcd because of their image, or that crash-loop while a
// version change rolls (stalled), skipping the ordinals whose members are healthy (nil: none is known).
func stuckPods(o Observed, healthy func(ord int) bool) []string {
	rolling := versionRolling(o)
	var stuck []string
	for _, ord := range sortedOrdinals(o.Pods) {
		p := o.Pods[ord]
		if p.CannotStart == "" || p.Terminating || !imageFailure(p.CannotStart) && !rolling {
			continue
		}
		if healthy != nil && healthy(ord) {
			continue
		}
		stuck = append(stuck, fmt.Sprintf("member %d (%s)", ord, p.CannotStart))
	}
	return stuck
}

func stalledMessage(o Observed, stuck []string) string {
	msg := "cannot start: " + strings.Join(stuck, ", ") + "; no member is changed until it runs"
	switch {
	case !o.Formed && !o.Reachable:
		// No member has run: nothing to go back to.
		msg += " (correct spec.version, or make its image available, to start it)"
	case o.TargetVersion != "":
		msg += " (revert spec.version to restart it on the previous image)"
	}
	return msg
}

// versionRolling: some member pod still runs an outdated template.
func versionRolling(o Observed) bool {
	for _, p := range o.Pods {
		if !p.UpToDate {
			return true
		}
	}
	return false
}

// imageFailure reports a kubelet reason ("Reason" or "Reason: message") that says the container image
// cannot be had.
func imageFailure(cannotStart string) bool {
	reason, _, _ := strings.Cut(cannotStart, ":")
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
		return true
	}
	return false
}

// learners gives a learner its pod, then promotes it once it has caught up with the leader. A started
// learner that did not answer for itself (a new pod's name resolves only once its endpoint is published,
// while etcd's own traffic already flows over the connections the learner opened) is promoted by etcd's
// judgement: etcd refuses to promote a learner that trails its leader, and the controller asks again soon.
// Where etcd accepts another learner, the next member joins first (joinBeside): its pod then starts while
// the learners before it are promoted, instead of after.
func learners(o Observed, v view) (Decision, bool) {
	var waiting, promote *Decision
	n, unstarted := 0, 0
	for _, m := range v.ours {
		if !m.Learner {
			continue
		}
		n++
		if !m.Started {
			unstarted++
		}
		d := Decision{Replicas: v.replicas, Phase: PhaseScaling}
		switch {
		case !m.Started:
			d.Message, d.AwaitsLearner = fmt.Sprintf("starting learner %s", nameOr(m)), true
			if p := o.Pods[m.Ordinal]; p.Pending != "" || p.CannotStart != "" {
				d.Message += fmt.Sprintf(": its pod cannot start: %s", cmpOr(p.Pending, p.CannotStart))
			}
		case m.Answered && v.leader != nil && m.RaftIndex+promoteLag < v.leader.RaftIndex:
			d.Message, d.AwaitsLearner = fmt.Sprintf("learner %s catching up (raft index %d of %d)", m.Name, m.RaftIndex, v.leader.RaftIndex), true
		default:
			d.Action, d.Message = Action{Type: ActionPromote, Ordinal: m.Ordinal, ID: m.ID}, fmt.Sprintf("promoting learner %s", m.Name)
		}
		switch {
		case d.Action.Type == ActionPromote && promote == nil:
			promote = &d
		case d.Action.Type == ActionNone && waiting == nil:
			waiting = &d
		}
	}
	if n == 0 {
		return Decision{}, false
	}
	if d, ok := joinBeside(o, v, n, unstarted == 0); ok {
		return d, true
	}
	if promote != nil {
		return *promote, true
	}
	return *waiting, true
}

// joinBeside adds the next member as a learner beside n learners, when every member accepts one more
// (Observed.MaxLearners) and each of those learners has started: a learner's etcd compares the member list
// it starts with to etcd's, so none may be added while another has yet to read its list. Learners do not
// vote, so quorum is untouched; they are promoted one at a time, each once it has caught up.
func joinBeside(o Observed, v view, n int, allStarted bool) (Decision, bool) {
	if n >= o.MaxLearners || len(v.unknown) > 0 || !allStarted {
		return Decision{}, false
	}
	d, ok := scaleUp(o, v)
	if !ok || d.Action.Type != ActionAddLearner {
		return Decision{}, false
	}
	d.Message += fmt.Sprintf(", beside %d learner(s)", n)
	d.AwaitsLearner = true
	return d, true
}

// heal gives a fresh start to a voter whose data is provably gone, or that stayed unhealthy for HealAfter
// while the cluster had quorum. One member at a time: while a member removed before has not come back as a
// voter, no other is removed (scaleUp re-adds it first), so heals never take the voters below the desired
// count minus one.
func heal(o Observed, v view) (Decision, bool) {
	m, why, ok := dueForHeal(o, v)
	if !ok {
		return Decision{}, false
	}
	if _, waiting := awaitingReAdd(o, v); waiting {
		return Decision{}, false
	}
	if why == healClaimDeleting {
		// The claim holding this member's data is being deleted: the data cannot come back, so the member
		// is removed now (no mark: the claim carrying it is going), then re-added empty.
		return removeSafely(v, m, PhaseHealing, fmt.Sprintf("removing %s: the volume claim holding its data is being deleted", m.Name)), true
	}
	if ok, msg := canLose(v, m); !ok {
		return Decision{Replicas: v.replicas, Phase: PhaseBlocked, Message: withNodeNote(o, m.Ordinal, "cannot heal: "+msg)}, true
	}
	d := Decision{Replicas: v.replicas, Action: Action{Type: ActionMarkReplace, Ordinal: m.Ordinal, ID: m.ID}, Phase: PhaseHealing,
		Message: fmt.Sprintf("replacing %s: %s since %s", m.Name, unhealthyWord(m), at(m.UnhealthySince))}
	if why == healDataLost {
		d.Message = fmt.Sprintf("replacing %s: its data volume was replaced", m.Name)
	}
	d.Message = withNodeNote(o, m.Ordinal, d.Message)
	return d, true
}

// Why a member is due for healing.
type healReason int

const (
	healClaimDeleting healReason = iota + 1
	healDataLost
	healUnhealthy
)

// dueForHeal returns the first member (by ordinal) that is due for a fresh start, and why. This is the
// evidence heal acts on, and the evidence that makes a learner that cannot start give way (dropLearner).
func dueForHeal(o Observed, v view) (Member, healReason, bool) {
	for _, m := range v.ours {
		if vol, ok := o.Volumes[m.Ordinal]; ok && vol.Deleting && vol.MemberID == m.ID {
			return m, healClaimDeleting, true
		}
		if dataLost(o, m) {
			return m, healDataLost, true
		}
		if unhealthyTooLong(o, v, m) {
			return m, healUnhealthy, true
		}
	}
	return Member{}, 0, false
}

// awaitingReAdd reports a member removed before that is not yet back as a voter: a learner (re-added or
// added, not yet voting), an ordinal below the highest member's that etcd does not list, or an ordinal
// whose claim still records a member etcd no longer has (or is marked or going with its data).
func awaitingReAdd(o Observed, v view) (int, bool) {
	for _, m := range v.ours {
		if m.Learner {
			return m.Ordinal, true
		}
	}
	top := -1
	for _, m := range v.ours {
		top = max(top, m.Ordinal)
	}
	for ord := 0; ord < max(top, o.Desired); ord++ {
		if _, ok := byOrdinal(v.ours, ord); ok {
			continue
		}
		vol, hasVolume := o.Volumes[ord]
		if ord < top || hasVolume && (vol.MemberID != 0 && !memberIDIn(o.Members, vol.MemberID) || vol.Replace || vol.Deleting) {
			return ord, true
		}
	}
	return 0, false
}

// dropLearner removes a learner that has not started (or crash-loops) when the spec no longer wants it, or
// when its pod cannot start (the scheduler's or kubelet's reason) and a voter is due for healing: a learner
// does not vote, so its removal never costs quorum, and waiting for it would hold back the heal.
func dropLearner(o Observed, v view) (Decision, bool) {
	for i := len(v.ours) - 1; i >= 0; i-- {
		m := v.ours[i]
		if !m.Learner {
			continue
		}
		p := o.Pods[m.Ordinal]
		reason := cmpOr(p.Pending, p.CannotStart)
		suffix := ""
		if reason != "" {
			suffix = fmt.Sprintf(" (its pod cannot start: %s)", reason)
		}
		if !m.Started && len(v.ours) > o.Desired {
			return removeSafely(v, m, PhaseScaling, fmt.Sprintf("removing learner %s: the spec no longer wants it%s", nameOr(m), suffix)), true
		}
		if reason == "" || m.Started && p.CannotStart == "" {
			continue
		}
		if due, _, ok := dueForHeal(o, v); ok && due.ID != m.ID {
			return removeSafely(v, m, PhaseHealing, fmt.Sprintf("removing learner %s so that %s can be healed%s", nameOr(m), due.Name, suffix)), true
		}
	}
	return Decision{}, false
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dataLost reports evidence that member m's data is gone while etcd still lists it.
func dataLost(o Observed, m Member) bool {
	vol, ok := o.Volumes[m.Ordinal]
	if !ok || vol.Deleting {
		return false
	}
	if vol.MemberID != 0 && vol.MemberID != m.ID {
		return true
	}
	// A claim never recorded as holding a member's data, created after this started member was last
	// healthy (the controller records every healthy member's claim), cannot hold its data: the pod came
	// back with an empty volume, which etcd refuses for an existing member.
	if vol.MemberID == 0 && m.Started && !m.Healthy && !m.UnhealthySince.IsZero() && !vol.Created.IsZero() &&
		vol.Created.After(m.UnhealthySince) {
		return true
	}
	return m.ClaimReplaced
}

// unhealthyTooLong: the member failed to rejoin for HealAfter (healClock).
func unhealthyTooLong(o Observed, v view, m Member) bool {
	due, ok := healClock(o, v, m)
	return ok && !o.Now.Before(due)
}

// healClock returns when an unhealthy member is due for healing: HealAfter counted only from when the
// cluster last had quorum (after an outage every member starts late; that is no evidence against any one of
// them) and from when its current pod was created (a restarted member gets a whole window). No clock runs
// for a pod being restarted, one whose image cannot be had, or one that crash-loops while a version change
// rolls (stalled reports it): none is evidence against the member's data. A pod Terminating on a node that
// is not Ready is no restart: nothing runs it until the node is back, so its member's clock runs.
func healClock(o Observed, v view, m Member) (time.Time, bool) {
	if m.Healthy || m.UnhealthySince.IsZero() {
		return time.Time{}, false
	}
	p, hasPod := o.Pods[m.Ordinal]
	if hasPod && (p.Terminating && p.NodeDown == "" || imageFailure(p.CannotStart) || p.CannotStart != "" && versionRolling(o)) {
		return time.Time{}, false
	}
	since := m.UnhealthySince
	if v.healClockStart.After(since) {
		since = v.healClockStart
	}
	if hasPod && p.Created.After(since) {
		since = p.Created
	}
	return since.Add(o.HealAfter), true
}

// scaleUp adds a learner, into the lowest free ordinal, only while every voter is healthy (one at a time
// unless etcd accepts more: joinBeside).
func scaleUp(o Observed, v view) (Decision, bool) {
	if len(v.ours) >= o.Desired {
		return Decision{}, false
	}
	d := Decision{Replicas: v.replicas, Phase: PhaseScaling}
	if !v.allHealthy() && !reAddDespiteUnhealthy(o, v) {
		d.Phase, d.Message = PhaseWaiting, withHealWaits(o, v, fmt.Sprintf("waiting for all members to be healthy before adding one (%d of %d)", v.healthyVoters, v.voters))
		return d, true
	}
	k := 0
	for ; k < o.Desired; k++ {
		if _, ok := byOrdinal(v.ours, k); !ok {
			break
		}
	}
	if p, ok := o.Pods[k]; ok && !p.Terminating && k >= v.replicas && o.StatefulSetReplicas > k {
		// A pod of a removed member still runs: shrink the StatefulSet before re-adding.
		d.Message = fmt.Sprintf("waiting for the old pod of member %d to go", k)
		return d, true
	}
	if vol, ok := o.Volumes[k]; ok && vol.MemberID != 0 && !memberIDIn(o.Members, vol.MemberID) {
		// The removed member's claim and pod go first (or, already going, are waited for).
		return deleteData(o, v, k, PhaseScaling, fmt.Sprintf("deleting stale data of removed member %d before re-adding it", k)), true
	}
	if p, ok := o.Pods[k]; ok && p.Ready && !p.Terminating {
		// A Ready pod serves etcd (readiness needs quorum), so it is a member already, under a name or URL
		// the operator cannot place: another member for its ordinal would never start.
		d.Phase, d.Message = PhaseWaiting, fmt.Sprintf("not adding member %d: its pod serves etcd, but no member in etcd maps to it", k)
		return d, true
	}
	d.Action, d.Message = Action{Type: ActionAddLearner, Ordinal: k}, fmt.Sprintf("adding member %d as a learner (%d of %d members)", k, len(v.ours)+1, o.Desired)
	// The configuration lists the new member before etcd does: its pod may already wait in its member
	// gate, and etcd starts on the configuration the kubelet reads once the gate lets it (the controller
	// writes the configuration before it takes the step).
	joined := append(slices.Clone(v.ours), Member{Ordinal: k})
	slices.SortFunc(joined, compareOrdinals)
	d.Config = existingConfig(joined, v.unknown)
	return d, true
}

// moveOffMemberNode: under a strict spread, the pod of an ordinal etcd does not list, with an empty claim, that
// shares a member's node leaves it with its claim, so that it joins on a node of its own. Only a pod the
// operator bound itself (a survivor's, in a quorum-loss recovery) lets one land there; whichever ordinal took
// the node, and whatever member is added meanwhile, it moves before the nodes it waits for come back.
func moveOffMemberNode(o Observed, v view) (Decision, bool) {
	if !o.StrictSpread {
		return Decision{}, false
	}
	for k := range o.Desired {
		if _, isMember := byOrdinal(v.ours, k); isMember || o.Volumes[k].MemberID != 0 {
			continue
		}
		if beside, ok := sharesNode(o, v, k); ok {
			return deleteData(o, v, k, PhaseScaling, fmt.Sprintf("member %d's pod shares node %s with member %d while the spread is Required: "+
				"its pod and empty claim are deleted so that it joins on a node of its own", k, o.Pods[k].Node, beside)), true
		}
	}
	return Decision{}, false
}

// sharesNode returns a member whose pod runs on the node ordinal k's pod is placed on.
func sharesNode(o Observed, v view, k int) (int, bool) {
	p, ok := o.Pods[k]
	if !ok || p.Node == "" || p.Terminating {
		return 0, false
	}
	for _, m := range v.ours {
		if q, ok := o.Pods[m.Ordinal]; ok && m.Ordinal != k && q.Node == p.Node && !q.Terminating {
			return m.Ordinal, true
		}
	}
	return 0, false
}

// reAddDespiteUnhealthy: a member removed before awaits its re-add, and the only unhealthy voters are due
// for healing themselves (heal waits for that re-add). A learner does not vote, and once promoted the
// healthy voters still hold a quorum, so re-adding first is how those heals ever get their turn.
func reAddDespiteUnhealthy(o Observed, v view) bool {
	if _, ok := awaitingReAdd(o, v); !ok || v.healthyVoters < Quorum(v.voters+1) {
		return false
	}
	for _, m := range v.ours {
		if !m.Learner && !m.Healthy && !dataLost(o, m) && !unhealthyTooLong(o, v, m) {
			return false
		}
	}
	return true
}

// scaleDown removes one member at a time, highest ordinal first, then shrinks the StatefulSet.
func scaleDown(o Observed, v view) (Decision, bool) {
	if len(v.ours) > o.Desired {
		m := v.ours[len(v.ours)-1]
		return removeSafely(v, m, PhaseScaling, fmt.Sprintf("removing %s (%d to %d members)", m.Name, len(v.ours), o.Desired)), true
	}
	if o.StatefulSetReplicas > v.replicas {
		return Decision{Replicas: v.replicas, Phase: PhaseScaling, Message: fmt.Sprintf("shrinking the StatefulSet to %d", v.replicas)}, true
	}
	return Decision{}, false
}

// minorUpgradeFloor is the oldest 3.5 patch release every member must run before the cluster moves to 3.6:
// older members can bring removed members back as "zombies" and turn voters into learners (etcd's
// upgrade notes for 3.6).
const minorUpgradeFloor = "3.5.26"

// roll restarts outdated pods onto the desired template, one at a time, each only when all are healthy:
// followers first, leader last (leadership is moved away first).
func roll(o Observed, v view) (Decision, bool) {
	var outdated []Member
	for _, m := range v.ours {
		if p, ok := o.Pods[m.Ordinal]; ok && !p.UpToDate {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return Decision{}, false
	}
	done := len(v.ours) - len(outdated)
	d := Decision{Replicas: v.replicas, Phase: PhaseUpgrading}
	if m, ok := belowUpgradeFloor(o.TargetVersion, v.ours); ok {
		d.Phase = PhaseBlocked
		d.Message = fmt.Sprintf("not upgrading to %s: %s runs %s, and every member must run %s or later before moving to %s",
			o.TargetVersion, m.Name, m.Version, minorUpgradeFloor, minorOf(o.TargetVersion))
		return d, true
	}
	for _, m := range v.ours {
		if p := o.Pods[m.Ordinal]; !p.Ready || p.Terminating || !m.Healthy {
			d.Message = withHealWaits(o, v, fmt.Sprintf("upgrading to %s (%d/%d): waiting for every member to be healthy", o.TargetVersion, done, len(v.ours)))
			return d, true
		}
	}
	if !v.allHealthy() {
		d.Message = withHealWaits(o, v, fmt.Sprintf("upgrading to %s (%d/%d): waiting for every member to be healthy", o.TargetVersion, done, len(v.ours)))
		return d, true
	}
	next := outdated[0]
	for _, m := range outdated {
		if !m.Leader {
			next = m
			break
		}
	}
	if next.Leader {
		if to, ok := transferTarget(v.ours, next); ok {
			d.Action = Action{Type: ActionMoveLeader, Ordinal: to.Ordinal, ID: to.ID}
			d.Message = fmt.Sprintf("upgrading to %s (%d/%d): moving leadership from %s to %s", o.TargetVersion, done, len(v.ours), next.Name, to.Name)
			return d, true
		}
	}
	d.Action = Action{Type: ActionDeletePod, Ordinal: next.Ordinal, ID: next.ID}
	d.Message = fmt.Sprintf("upgrading %s to %s (%d/%d)", next.Name, o.TargetVersion, done+1, len(v.ours))
	return d, true
}

// belowUpgradeFloor returns a member that runs a 3.5 release older than minorUpgradeFloor while the target
// is 3.6 or later.
func belowUpgradeFloor(target string, ms []Member) (Member, bool) {
	if !VersionLess(minorOf(minorUpgradeFloor)+".999999", target) {
		return Member{}, false
	}
	for _, m := range ms {
		if m.Version != "" && minorOf(m.Version) == minorOf(minorUpgradeFloor) && VersionLess(m.Version, minorUpgradeFloor) {
			return m, true
		}
	}
	return Member{}, false
}

// stable: nothing to change; waiting while a voter is unhealthy.
func stable(o Observed, v view) (Decision, bool) {
	d := Decision{Replicas: v.replicas, Phase: PhaseStable, Message: fmt.Sprintf("%d members", len(v.ours))}
	if !v.allHealthy() {
		d.Phase, d.Message = PhaseWaiting, withHealWaits(o, v, fmt.Sprintf("%d of %d voting members healthy", v.healthyVoters, v.voters))
	}
	return d, true
}

// canLose reports whether quorum survives losing voter m.
func canLose(v view, m Member) (bool, string) {
	if m.Learner {
		return true, ""
	}
	remaining := v.healthyVoters
	if m.Healthy {
		remaining--
	}
	if need := Quorum(v.voters - 1); remaining < need {
		return false, fmt.Sprintf("removing %s would leave %d healthy of %d voting members; quorum needs %d", m.Name, remaining, v.voters-1, need)
	}
	return true, ""
}

// removeSafely moves leadership away first, then removes; never when quorum would not survive.
func removeSafely(v view, m Member, phase Phase, why string) Decision {
	if ok, msg := canLose(v, m); !ok {
		return Decision{Replicas: v.replicas, Phase: PhaseBlocked, Message: msg}
	}
	if m.Leader {
		if to, ok := transferTarget(v.ours, m); ok {
			return Decision{Replicas: v.replicas, Action: Action{Type: ActionMoveLeader, Ordinal: to.Ordinal, ID: to.ID}, Phase: phase,
				Message: fmt.Sprintf("moving leadership from %s to %s before removing it", m.Name, to.Name)}
		}
	}
	return Decision{Replicas: v.replicas, Action: Action{Type: ActionRemove, Ordinal: m.Ordinal, ID: m.ID}, Phase: phase, Message: why}
}

// promoteLag is how far (in raft entries) a learner may trail the leader and still be promoted; etcd
// itself refuses promotion until the learner is close enough.
const promoteLag = 1000

// transferTarget picks the healthy started voter (not from) with the lowest ordinal.
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
