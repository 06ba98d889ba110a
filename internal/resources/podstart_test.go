package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const missingImage = "gcr.io/etcd-development/etcd:v3.5.99"

// memberPod is a member pod with the gate and etcd containers, and the statuses given.
func memberPod(gate, etcd *corev1.ContainerStatus) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: MemberGateContainerName, Image: "ghcr.io/seedops/etcd-operator:v0.1.0"}},
		Containers:     []corev1.Container{{Name: EtcdContainerName, Image: missingImage}},
	}}
	if gate != nil {
		gate.Name = MemberGateContainerName
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{*gate}
	}
	if etcd != nil {
		etcd.Name = EtcdContainerName
		p.Status.ContainerStatuses = []corev1.ContainerStatus{*etcd}
	}
	return p
}

func waitingStatus(reason, msg string) *corev1.ContainerStatus {
	return &corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func TestContainerStartFailures(t *testing.T) {
	passed := &corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	crashLoop := waitingStatus("CrashLoopBackOff", "back-off 40s restarting failed container")
	crashLoop.RestartCount = 3
	crashLoop.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: `{"error":"ETCD_DATA_DIR must be set"}`}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"image cannot be pulled", memberPod(passed, waitingStatus("ErrImagePull", `failed to pull image "`+missingImage+`": not found`)),
			[]string{"container etcd (image " + missingImage + `): ErrImagePull: failed to pull image "` + missingImage + `": not found`}},
		{"pull backing off, no message", memberPod(passed, waitingStatus("ImagePullBackOff", "")),
			[]string{"container etcd (image " + missingImage + "): ImagePullBackOff"}},
		{"a Secret the container needs is missing", memberPod(passed, waitingStatus("CreateContainerConfigError", `secret "x" not found`)),
			[]string{"container etcd (image " + missingImage + `): CreateContainerConfigError: secret "x" not found`}},
		{"the gate crash-loops: why it last failed", memberPod(crashLoop, waitingStatus("PodInitializing", "")),
			[]string{"container member-gate (image ghcr.io/seedops/etcd-operator:v0.1.0): CrashLoopBackOff: back-off 40s restarting failed container: ETCD_DATA_DIR must be set"}},
		{"the gate's image cannot be pulled", memberPod(waitingStatus("ImagePullBackOff", "Back-off pulling image"), waitingStatus("PodInitializing", "")),
			[]string{"container member-gate (image ghcr.io/seedops/etcd-operator:v0.1.0): ImagePullBackOff: Back-off pulling image"}},
		{"being created", memberPod(passed, waitingStatus("ContainerCreating", "")), nil},
		{"initializing", memberPod(&corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, waitingStatus("PodInitializing", "")), nil},
		{"running", memberPod(passed, &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), nil},
		{"not reported on yet", memberPod(nil, nil), nil},
	} {
		if got := ContainerStartFailures(tc.pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEtcdNeverRan(t *testing.T) {
	with := func(edit func(cs *corev1.ContainerStatus)) *corev1.Pod {
		cs := waitingStatus("ImagePullBackOff", "Back-off pulling image")
		edit(cs)
		return memberPod(nil, cs)
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"image never pulled", with(func(*corev1.ContainerStatus) {}), true},
		{"waiting for the init containers", memberPod(nil, waitingStatus("PodInitializing", "")), true},
		{"a Secret is missing", memberPod(nil, waitingStatus("CreateContainerConfigError", "")), true},
		{"crash loop: it ran", with(func(cs *corev1.ContainerStatus) {
			cs.State.Waiting.Reason, cs.RestartCount = "CrashLoopBackOff", 2
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
		}), false},
		{"ran and exited once, then waits", with(func(cs *corev1.ContainerStatus) {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0}
		}), false},
		{"restarted", with(func(cs *corev1.ContainerStatus) { cs.RestartCount = 1 }), false},
		{"started", with(func(cs *corev1.ContainerStatus) { cs.Started = ptr.To(true) }), false},
		{"running", with(func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}), false},
		{"terminated", with(func(cs *corev1.ContainerStatus) {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		}), false},
		{"not reported on yet: nothing shows it never ran", memberPod(nil, nil), false},
	} {
		if got := EtcdNeverRan(tc.pod); got != tc.want {
			t.Errorf("%s: EtcdNeverRan = %v, want %v", tc.name, got, tc.want)
		}
	}
}
