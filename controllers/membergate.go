package controllers

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/resources"
)

// memberGateWanted says whether the members' template carries the member-gate init container: always for
// a new cluster, and for an existing one only once it has the gate or is about to roll anyway (its etcd
// image differs from the desired one). Adding the gate to a running cluster's template on its own would
// make every member out of date, and an operator upgrade would restart every cluster; this way the gate
// arrives with the next restart the cluster needs anyway. A StatefulSet replaced with its pods kept
// (volume growth, an orphaning delete) is judged by the pods it will find.
func memberGateWanted(existing *appsv1.StatefulSet, pods []corev1.Pod, desiredImage string) bool {
	spec := memberPodSpec(existing, pods)
	if spec == nil {
		return true
	}
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == resources.MemberGateContainerName {
			return true
		}
	}
	for i := range spec.Containers {
		if spec.Containers[i].Name == "etcd" {
			return spec.Containers[i].Image != desiredImage
		}
	}
	return true // no etcd container: the template is replaced whole
}

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
