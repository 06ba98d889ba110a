package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestoreFailureFollowsTheCurrentRun: the restore container's current termination decides; an earlier
// failed attempt counts only while no run has finished since (the kubelet backing off, or retrying).
func TestRestoreFailureFollowsTheCurrentRun(t *testing.T) {
	failed := &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":"s3: connection reset"}`}
	succeeded := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
	for _, tc := range []struct {
		name    string
		state   corev1.ContainerState
		last    corev1.ContainerState
		wantErr string // "" means no failure reported
	}{
		{name: "no run yet"},
		{name: "first run succeeded", state: corev1.ContainerState{Terminated: succeeded}},
		{name: "succeeded after a transient failure", state: corev1.ContainerState{Terminated: succeeded},
			last: corev1.ContainerState{Terminated: failed}, wantErr: ""},
		{name: "current run failed", state: corev1.ContainerState{Terminated: failed},
			wantErr: "s3: connection reset"},
		{name: "current run failed after an earlier success", state: corev1.ContainerState{Terminated: failed},
			last: corev1.ContainerState{Terminated: succeeded}, wantErr: "s3: connection reset"},
		{name: "backing off after a failure",
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			last:  corev1.ContainerState{Terminated: failed}, wantErr: "s3: connection reset"},
		{name: "retrying after a failure",
			state: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			last:  corev1.ContainerState{Terminated: failed}, wantErr: "s3: connection reset"},
		{name: "running after a success",
			state: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			last:  corev1.ContainerState{Terminated: succeeded}},
	} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd-0"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: RestoreContainerName, State: tc.state,
				LastTerminationState: tc.last}}}}
		got := RestoreFailure([]corev1.Pod{pod})
		switch {
		case tc.wantErr == "" && got != "":
			t.Errorf("%s: RestoreFailure = %q, want none", tc.name, got)
		case tc.wantErr != "" && (!strings.Contains(got, tc.wantErr) || !strings.Contains(got, "prod-etcd-0")):
			t.Errorf("%s: RestoreFailure = %q, want the member and %q", tc.name, got, tc.wantErr)
		}
	}
}
