package controllers

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/resources"
)

// memberGate is the member-gate init container of the members' template: none (no image) for a template
// without it. A new cluster gets this operator's gate; an existing one only once it has the gate or is about
// to roll anyway (its etcd image differs from the desired one). Adding the gate to a running cluster's
// template on its own would make every member out of date, so the gate arrives with the next restart the
// cluster needs anyway. Likewise a gate already there is kept as it is (its image and whether it holds
// members back during a forced start) while the etcd image stays: an operator upgrade (a new operator
// image) would otherwise restart every member of every cluster; the new gate comes with the next version
// change. The number of learners etcd accepts at once is kept the same way (an etcd 3.6 cluster gets
// LearnersAtOnce when its members restart anyway). A StatefulSet replaced with its pods kept (volume
// growth, an orphaning delete) is judged by the pods it will find.
func memberGate(existing *appsv1.StatefulSet, pods []corev1.Pod, desiredEtcdImage string, o resources.Options) resources.MemberGate {
	spec := memberPodSpec(existing, pods)
	if spec == nil {
		return resources.CurrentMemberGate(o)
	}
	etcdImage := ""
	if ctr := etcdContainerOf(spec); ctr != nil {
		etcdImage = ctr.Image
	}
	rolls := etcdImage != desiredEtcdImage // no etcd container: the template is replaced whole
	gate := memberGateContainer(spec)
	kept := resources.MemberGate{MaxLearners: maxLearnersVariable(spec)}
	switch {
	case rolls || (gate != nil && gate.Image == ""):
		return resources.CurrentMemberGate(o)
	case gate != nil:
		kept.Image, kept.HoldsForcedStart, kept.ForcedStartTicket = gate.Image, gateHoldsForcedStart(gate), gateIssuesTickets(gate)
	}
	return kept
}

// maxLearnersVariable is the etcd container's MaxLearnersEnv in a pod spec (the last entry wins, as in the
// kubelet): 0 when it is not set, or set from elsewhere (ValueFrom), which the operator cannot read.
func maxLearnersVariable(spec *corev1.PodSpec) int {
	n := 0
	if ctr := etcdContainerOf(spec); ctr != nil {
		for _, e := range ctr.Env {
			if e.Name == resources.MaxLearnersEnv {
				n, _ = strconv.Atoi(e.Value)
			}
		}
	}
	return n
}

// learnersAccepted is how many learners etcd accepts at once (its --max-learners) in a member pod spec:
// a flag wins over the variable, as in etcd; 1 (etcd's default) when neither is set or readable.
func learnersAccepted(spec *corev1.PodSpec) int {
	n := maxLearnersVariable(spec)
	if ctr := etcdContainerOf(spec); ctr != nil {
		for _, arg := range ctr.Args {
			name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if name == "max-learners" && strings.HasPrefix(arg, "-") {
				n = 0
				if hasValue {
					n, _ = strconv.Atoi(value)
				}
			}
		}
	}
	return max(n, 1)
}

// learnersEveryMemberAccepts is how many learners every member accepts at once: the lowest setting among
// the pods of etcd's members and the template new pods get. A member without a pod here, or one the
// operator cannot place, counts as 1: its setting is unknown, and each member checks the limit when it
// applies a change.
func (obs observation) learnersEveryMemberAccepts() int {
	if obs.statefulSet == nil {
		return 1
	}
	n := learnersAccepted(&obs.statefulSet.Spec.Template.Spec)
	for _, m := range obs.members {
		ord, placed := obs.ordinals[m.ID]
		p := obs.podByOrdinal[ord]
		if !placed || ord < 0 || p == nil {
			return 1
		}
		n = min(n, learnersAccepted(&p.Spec))
	}
	return n
}

func etcdContainerOf(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "etcd" {
			return &spec.Containers[i]
		}
	}
	return nil
}

// memberGateContainer is the member-gate init container of a member pod spec, nil if it has none.
func memberGateContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == resources.MemberGateContainerName {
			return &spec.InitContainers[i]
		}
	}
	return nil
}

// gateHoldsForRecovery reports whether a member pod spec's gate holds etcd back on its data while another
// member is forced to start alone, and hands a forced start to its own pod's etcd alone (older gates do
// not: they lack the mark, or the ticket; the members' configuration no longer forces anyone).
func gateHoldsForRecovery(spec *corev1.PodSpec) bool {
	gate := memberGateContainer(spec)
	return gate != nil && gateHoldsForcedStart(gate) && gateIssuesTickets(gate)
}

// gateIssuesTickets reports whether the gate hands a forced start to its pod's etcd as a ticket.
func gateIssuesTickets(gate *corev1.Container) bool {
	return slices.ContainsFunc(gate.Args, func(a string) bool { return strings.HasPrefix(a, resources.MemberGateTicketFlag) })
}

func gateHoldsForcedStart(gate *corev1.Container) bool {
	for _, e := range gate.Env {
		if e.Name == resources.MemberGateHoldsForcedStartEnv && e.Value == "true" {
			return true
		}
	}
	return false
}

// hasMemberGate reports whether a member pod spec runs the member gate before etcd.
func hasMemberGate(spec *corev1.PodSpec) bool { return memberGateContainer(spec) != nil }

// gateRefusal is the reason the pod's member-gate refused to let etcd start (its data directory holds a
// member the cluster no longer has), or "" if it did not. Both the exit code and the marker line must be
// there: a refusal leads to the data being discarded, so nothing less counts. The current termination
// decides when there is one (a gate that has since passed is no longer refusing); otherwise the last one
// does, which is where a refusal waits while the kubelet backs off before the next run.
func gateRefusal(pod *corev1.Pod) string {
	for i := range pod.Status.InitContainerStatuses {
		cs := &pod.Status.InitContainerStatuses[i]
		if cs.Name != resources.MemberGateContainerName {
			continue
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t == nil || t.ExitCode != membergate.RefusalExitCode {
			return ""
		}
		for _, line := range strings.Split(t.Message, "\n") {
			if reason, ok := strings.CutPrefix(strings.TrimSpace(line), membergate.RefusalMarker); ok {
				if reason = strings.TrimSpace(reason); reason != "" {
					return reason
				}
				return "data directory holds a member the cluster no longer has"
			}
		}
		return ""
	}
	return ""
}
