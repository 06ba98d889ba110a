package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/seedops/etcd-operator/internal/resources"
)

// TestRestoreCompleted: status reports a restore only once every member's restore step has finished well
// and at least one member restored the snapshot; the others kept this restore's data or joined the cluster
// the restored members formed (a pod that starts late on a loaded node).
func TestRestoreCompleted(t *testing.T) {
	pod := func(exit int32, msg string) corev1.Pod {
		p := corev1.Pod{}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.MemberGateContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
		if msg != "" {
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: resources.RestoreContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}})
		}
		return p
	}
	restored := `{"restored":true,"location":"pvc://b/k","revision":7}`
	kept := `{"restored":false,"reason":"data directory already holds a member"}`
	joined := `{"restored":false,"reason":"member joins an existing cluster (initial cluster state existing)"}`
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want bool
	}{
		{"no pods", nil, false},
		{"every member restored", []corev1.Pod{pod(0, restored), pod(0, restored), pod(0, restored)}, true},
		{"one member started on data it found", []corev1.Pod{pod(0, restored), pod(0, kept), pod(0, restored)}, true},
		{"one member joined the cluster the others formed", []corev1.Pod{pod(0, restored), pod(0, joined), pod(0, restored)}, true},
		{"no member restored: nothing proves a restore", []corev1.Pod{pod(0, kept), pod(0, joined), pod(0, joined)}, false},
		{"one restore failed", []corev1.Pod{pod(0, restored), pod(1, `{"error":"stale"}`), pod(0, restored)}, false},
		{"one restore still running", []corev1.Pod{pod(0, restored), pod(0, "")}, false},
	} {
		if got := restoreCompleted(tc.pods); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
