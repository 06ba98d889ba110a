package membership

import (
	"fmt"
	"strings"
	"time"
)

// A member's volume is local to its node. When the node is lost (powered off, or cut off from its peers and
// the API server), the member cannot come back elsewhere with its data, and nothing on the node confirms
// anything: its pod, once deleted, stays Terminating, its claim stays (pvc-protection waits for the pod) and
// the StatefulSet creates no other pod of that name. The node decides how the member's pod is deleted,
// never whether the member is replaced: that is heal's evidence (unhealthy for HealAfter, quorum holding
// without it), the same on any node.

// nodeLost: pod p's node has not been Ready for HealAfter, or its Node object is gone. A node NotReady for
// less may be slow or restarting, and its kubelet is left to confirm the pod's end.
func nodeLost(o Observed, p Pod) bool {
	switch p.NodeDown {
	case "":
		return false
	case NodeGone:
		return true
	}
	return !p.NodeDownSince.IsZero() && o.Now.Sub(p.NodeDownSince) >= o.HealAfter
}

// nodeNote says what is known of pod p's node when it is not Ready ("" while it is).
func nodeNote(p Pod) string {
	since := ""
	if !p.NodeDownSince.IsZero() {
		since = " since " + at(p.NodeDownSince)
	}
	switch p.NodeDown {
	case "":
		return ""
	case NodeGone:
		return fmt.Sprintf("its node %s is gone", p.Node)
	case NodeUnknown:
		return fmt.Sprintf("its node %s stopped reporting (Ready Unknown)%s", p.Node, since)
	}
	return fmt.Sprintf("its node %s is NotReady%s", p.Node, since)
}

// withNodeNote appends what is known of member ord's node to msg, when it is not Ready.
func withNodeNote(o Observed, ord int, msg string) string {
	if p, ok := o.Pods[ord]; ok && p.NodeDown != "" {
		return msg + "; " + nodeNote(p)
	}
	return msg
}

// nodesDown lists the member pods whose nodes are not Ready ("" when none): with etcd unreachable, that
// is what a human needs to know first.
func nodesDown(o Observed) string {
	var out []string
	for _, ord := range sortedOrdinals(o.Pods) {
		if p := o.Pods[ord]; p.NodeDown != "" {
			out = append(out, fmt.Sprintf("member %d: %s", ord, nodeNote(p)))
		}
	}
	return strings.Join(out, "; ")
}

// deleteData deletes the claim and pod of ordinal ord, whose member etcd no longer lists (the member is
// always removed first), so that the StatefulSet recreates both empty: the claim first (it stays until its
// pod is gone), then the pod. Once both are going it waits for them, unless the pod is on a lost node: then
// it is deleted at once (Action.Force), since no kubelet will confirm its end, and its claim is released
// with it. The StatefulSet's new pod gets a new claim, and so a volume on another node.
//
// Nothing of the old member comes back when its node does: its pod and claim are gone, etcd never lists
// a removed member's ID again (a member added in its place gets a new one), a removed member's etcd that
// still runs is refused by every peer and stops, and a pod that finds such data all the same (a volume kept
// by its reclaim policy) is held by its member gate, whose refusal deletes the data (wipeRefusedData).
func deleteData(o Observed, v view, ord int, phase Phase, why string) Decision {
	d := Decision{Replicas: v.replicas, Phase: phase}
	vol, hasVolume := o.Volumes[ord]
	p, hasPod := o.Pods[ord]
	_, isMember := byOrdinal(v.ours, ord)
	switch {
	case hasPod && !isMember && nodeLost(o, p):
		d.Phase, d.Action = PhaseHealing, Action{Type: ActionDeleteVolume, Ordinal: ord, Force: true}
		d.Message = fmt.Sprintf("%s; %s, so its pod is deleted without waiting for its kubelet", why, nodeNote(p))
	case (!hasVolume || vol.Deleting) && (!hasPod || p.Terminating):
		d.Phase, d.Message = PhaseHealing, fmt.Sprintf("waiting for the old data of member %d to go", ord)
		if hasPod && p.NodeDown != "" {
			d.Message += fmt.Sprintf("; %s: its pod is deleted without its kubelet once the node is down for %s", nodeNote(p), o.HealAfter)
		}
	default:
		d.Action, d.Message = Action{Type: ActionDeleteVolume, Ordinal: ord}, why
	}
	return d
}

// healWaits describes the unhealthy voters not yet due for healing: since when, from when each is replaced
// if it does not recover, and what is known of its node. Times, not durations: the message, and so status,
// stays the same from one look to the next while nothing changes.
func healWaits(o Observed, v view) string {
	var out []string
	for _, m := range v.ours {
		if m.Learner || m.Healthy || m.UnhealthySince.IsZero() {
			continue
		}
		s := fmt.Sprintf("%s %s since %s", nameOr(m), unhealthyWord(m), at(m.UnhealthySince))
		if due, ok := healClock(o, v, m); ok {
			s += fmt.Sprintf(", replaced from %s if quorum holds without it", at(due))
		}
		out = append(out, withNodeNote(o, m.Ordinal, s))
	}
	return strings.Join(out, "; ")
}

// withHealWaits appends healWaits to a waiting message.
func withHealWaits(o Observed, v view, msg string) string {
	if waits := healWaits(o, v); waits != "" {
		return msg + "; " + waits
	}
	return msg
}

// unhealthyWord: a member that did not answer the operator is unreachable; one that answered with errors,
// or whose pod is not ready, is unhealthy.
func unhealthyWord(m Member) string {
	if !m.Answered {
		return "unreachable"
	}
	return "unhealthy"
}

// at formats a time for messages.
func at(t time.Time) string { return t.UTC().Format(time.RFC3339) }
