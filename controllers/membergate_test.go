package controllers

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"

	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/resources"
)

func TestMemberGate(t *testing.T) {
	const (
		img         = "gcr.io/etcd-development/etcd:v3.5.35"
		oldImg      = "gcr.io/etcd-development/etcd:v3.5.34"
		operator    = "ghcr.io/seedops/etcd-operator:v0.3.0"
		oldOperator = "ghcr.io/seedops/etcd-operator:v0.2.0"
	)
	o := resources.Options{OperatorImage: operator}
	current := resources.MemberGate{Image: operator, HoldsForcedStart: true, ForcedStartTicket: true, MaxLearners: resources.LearnersAtOnce}
	sts := func(image, gateImage string, holds bool, tickets ...bool) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: image}}
		if gateImage != "" {
			gate := corev1.Container{Name: resources.MemberGateContainerName, Image: gateImage}
			if holds {
				gate.Env = []corev1.EnvVar{{Name: resources.MemberGateHoldsForcedStartEnv, Value: "true"}}
			}
			if len(tickets) > 0 && tickets[0] {
				gate.Args = []string{"member-gate", resources.MemberGateTicketFlag + resources.MemberStartMountPath}
			}
			s.Spec.Template.Spec.InitContainers = []corev1.Container{gate}
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		existing *appsv1.StatefulSet
		want     resources.MemberGate
	}{
		{"new cluster", nil, current},
		{"already gated by this operator", sts(img, operator, true, true), resources.MemberGate{Image: operator, HoldsForcedStart: true, ForcedStartTicket: true}},
		{"already gated by this operator, two learners at once", func() *appsv1.StatefulSet {
			s := sts(img, operator, true, true)
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: resources.MaxLearnersEnv, Value: "2"}}
			return s
		}(), current},
		{"ungated with the learner setting, same etcd image: kept", func() *appsv1.StatefulSet {
			s := sts(img, "", false)
			s.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: resources.MaxLearnersEnv, Value: "3"}}
			return s
		}(), resources.MemberGate{MaxLearners: 3}},
		{"gated by an older operator, same etcd image: a new gate alone would restart every member", sts(img, oldOperator, false),
			resources.MemberGate{Image: oldOperator}},
		{"gated by an older operator whose gate holds members back during a forced start: kept, mark included", sts(img, oldOperator, true),
			resources.MemberGate{Image: oldOperator, HoldsForcedStart: true}},
		{"gated by an older operator whose gate also hands a forced start to its own pod: kept, ticket included", sts(img, oldOperator, true, true),
			resources.MemberGate{Image: oldOperator, HoldsForcedStart: true, ForcedStartTicket: true}},
		{"gated by an older operator, new etcd image: the members roll anyway", sts(oldImg, oldOperator, false), current},
		{"ungated, same image: adding the gate alone would restart every member", sts(img, "", false), resources.MemberGate{}},
		{"ungated, new image: the members roll anyway", sts(oldImg, "", false), current},
		{"ungated, restore container only", func() *appsv1.StatefulSet {
			s := sts(img, "", false)
			s.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: resources.RestoreContainerName, Image: oldOperator}}
			return s
		}(), resources.MemberGate{}},
	} {
		if got := memberGate(tc.existing, nil, img, o); got != tc.want {
			t.Errorf("%s: memberGate = %+v, want %+v", tc.name, got, tc.want)
		}
		if tc.existing != nil {
			// Only a gate that holds the others back and hands the forced start to its own pod alone guards a
			// recovery: an older gate forces nobody, since the configuration no longer does.
			if got, want := gateHoldsForRecovery(&tc.existing.Spec.Template.Spec), tc.existing == nil || len(tc.existing.Spec.Template.Spec.InitContainers) > 0 &&
				len(tc.existing.Spec.Template.Spec.InitContainers[0].Env) > 0 && len(tc.existing.Spec.Template.Spec.InitContainers[0].Args) > 1; got != want {
				t.Errorf("%s: gateHoldsForRecovery = %v, want %v", tc.name, got, want)
			}
		}
	}
	// The StatefulSet was replaced with its pods kept: the pods decide.
	pod := func(gateImage string) corev1.Pod {
		p := corev1.Pod{}
		p.Spec = sts(img, gateImage, false).Spec.Template.Spec
		return p
	}
	if got := memberGate(nil, []corev1.Pod{pod("")}, img, o); got != (resources.MemberGate{}) {
		t.Errorf("recreated StatefulSet over ungated pods: adding the gate would restart every member (got %+v)", got)
	}
	if got := memberGate(nil, []corev1.Pod{pod(oldOperator)}, img, o); got != (resources.MemberGate{Image: oldOperator}) {
		t.Errorf("recreated StatefulSet over gated pods must keep their gate as it is (got %+v)", got)
	}
}

// TestLearnersAccepted: a member pod's --max-learners as etcd reads it (a flag wins over the variable), and
// the cluster's as the lowest among the template and every member's pod; anything unreadable counts as 1.
func TestLearnersAccepted(t *testing.T) {
	spec := func(env []corev1.EnvVar, args ...string) *corev1.PodSpec {
		return &corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Env: env, Args: args}}}
	}
	two := []corev1.EnvVar{{Name: resources.MaxLearnersEnv, Value: "2"}}
	for _, tc := range []struct {
		name string
		spec *corev1.PodSpec
		want int
	}{
		{"not set", spec(nil), 1},
		{"variable", spec(two), 2},
		{"flag wins over the variable", spec(two, "--max-learners=1"), 1},
		{"single-dash flag", spec(nil, "-max-learners=3"), 3},
		{"flag without its value here", spec(two, "--max-learners", "3"), 1},
		{"variable from elsewhere", spec([]corev1.EnvVar{{Name: resources.MaxLearnersEnv, ValueFrom: &corev1.EnvVarSource{}}}), 1},
		{"not a number", spec([]corev1.EnvVar{{Name: resources.MaxLearnersEnv, Value: "two"}}), 1},
		{"another flag", spec(two, "--max-request-bytes=2"), 2},
		{"no etcd container", &corev1.PodSpec{}, 1},
	} {
		if got := learnersAccepted(tc.spec); got != tc.want {
			t.Errorf("%s: learnersAccepted = %d, want %d", tc.name, got, tc.want)
		}
	}

	podWith := func(s *corev1.PodSpec) *corev1.Pod { return &corev1.Pod{Spec: *s} }
	obs := func(template *corev1.PodSpec, pods map[int]*corev1.Pod, members ...uint64) observation {
		o := observation{statefulSet: &appsv1.StatefulSet{}, podByOrdinal: pods, ordinals: map[uint64]int{}}
		o.statefulSet.Spec.Template.Spec = *template
		for i, id := range members {
			o.members = append(o.members, etcd.Member{ID: id})
			o.ordinals[id] = i
		}
		return o
	}
	allTwo := map[int]*corev1.Pod{0: podWith(spec(two)), 1: podWith(spec(two)), 2: podWith(spec(two))}
	for _, tc := range []struct {
		name string
		obs  observation
		want int
	}{
		{"every member and the template", obs(spec(two), allTwo, 1, 2, 3), 2},
		{"the template without it (pods yet to come)", obs(spec(nil), allTwo, 1, 2, 3), 1},
		{"one member's pod from an older template", obs(spec(two), map[int]*corev1.Pod{0: podWith(spec(two)), 1: podWith(spec(nil)), 2: podWith(spec(two))}, 1, 2, 3), 1},
		{"a member without a pod", obs(spec(two), map[int]*corev1.Pod{0: podWith(spec(two)), 1: podWith(spec(two))}, 1, 2, 3), 1},
		{"a member the operator cannot place", func() observation {
			o := obs(spec(two), allTwo, 1, 2, 3)
			o.ordinals[3] = -1
			return o
		}(), 1},
		{"no StatefulSet", observation{}, 1},
	} {
		if got := tc.obs.learnersEveryMemberAccepts(); got != tc.want {
			t.Errorf("%s: learnersEveryMemberAccepts = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestGateRefusal(t *testing.T) {
	refused := &corev1.ContainerStateTerminated{ExitCode: membergate.RefusalExitCode,
		Message: membergate.RefusalMarker + " data of member 8e9e05c52164694d, which peer https://x:2380 does not list: the member was removed\n"}
	pod := func(statuses ...corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: statuses}}
	}
	gate := func(current, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
		cs := corev1.ContainerStatus{Name: resources.MemberGateContainerName}
		cs.State.Terminated, cs.LastTerminationState.Terminated = current, last
		if current == nil {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
		return cs
	}
	const reason = "data of member 8e9e05c52164694d, which peer https://x:2380 does not list: the member was removed"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"no statuses", pod(), ""},
		{"refused just now", pod(gate(refused, nil)), reason},
		{"refused, backing off", pod(gate(nil, refused)), reason},
		{"passed after a refusal", pod(gate(&corev1.ContainerStateTerminated{ExitCode: 0, Message: "start: ..."}, refused)), ""},
		{"running after a refusal", func() *corev1.Pod {
			cs := gate(nil, refused)
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			return pod(cs)
		}(), reason},
		{"marker from another container", pod(corev1.ContainerStatus{Name: resources.RestoreContainerName,
			State: corev1.ContainerState{Terminated: refused}}), ""},
		{"other failure", pod(gate(&corev1.ContainerStateTerminated{ExitCode: 1, Message: "error: ETCD_DATA_DIR must be set"}, nil)), ""},
		{"refusal exit code without the marker", pod(gate(&corev1.ContainerStateTerminated{ExitCode: membergate.RefusalExitCode, Message: "killed"}, nil)), ""},
		{"marker without the refusal exit code", pod(gate(&corev1.ContainerStateTerminated{ExitCode: 1, Message: refused.Message}, nil)), ""},
		{"marker after log lines (message fell back to the log)", pod(gate(&corev1.ContainerStateTerminated{ExitCode: membergate.RefusalExitCode,
			Message: `{"level":"info","msg":"judged the data directory"}` + "\n" + refused.Message}, nil)), reason},
	} {
		if got := gateRefusal(tc.pod); got != tc.want {
			t.Errorf("%s: gateRefusal = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPlanInputJoinGated: the planner may start new members' pods ahead of their joins only when the
// StatefulSet's template, which new pods get, runs the member gate.
func TestPlanInputJoinGated(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 5}}
	sts := func(initContainers ...string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
		for _, n := range initContainers {
			s.Spec.Template.Spec.InitContainers = append(s.Spec.Template.Spec.InitContainers, corev1.Container{Name: n})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		sts  *appsv1.StatefulSet
		want bool
	}{
		{"no StatefulSet", nil, false},
		{"template without the gate", sts(), false},
		{"template with the restore only", sts(resources.RestoreContainerName), false},
		{"template with the gate", sts(resources.MemberGateContainerName), true},
		{"template with the gate and the restore", sts(resources.MemberGateContainerName, resources.RestoreContainerName), true},
	} {
		obs := observation{reachable: true, statefulSet: tc.sts}
		if got := obs.planInput(c, time.Now(), time.Minute).JoinGated; got != tc.want {
			t.Errorf("%s: JoinGated = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClusterOptionsKeepProbeSettingsUntilRoll: a template running the desired etcd image keeps its probe
// timings and paths (an operator whose probes exclude CORRUPT restarts no member of a running cluster for it);
// one that rolls anyway (another image), or none, gets the operator's.
func TestClusterOptionsKeepProbeSettingsUntilRoll(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 3}}
	base := resources.DefaultOptions()
	desired := resources.Image(c, base)
	old := resources.ProbeSettings{StartupPeriod: 10, StartupTimeout: 5, StartupFailures: 60,
		ReadinessPeriod: 5, ReadinessTimeout: 5, ReadinessFailures: 3,
		StartupPath: "/health?serializable=true", LivenessPath: "/health?exclude=NOSPACE&serializable=true"}
	httpGet := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path}}
	}
	sts := func(image string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Image: image,
			StartupProbe: &corev1.Probe{ProbeHandler: httpGet(old.StartupPath), PeriodSeconds: old.StartupPeriod,
				TimeoutSeconds: old.StartupTimeout, FailureThreshold: old.StartupFailures},
			LivenessProbe: &corev1.Probe{ProbeHandler: httpGet(old.LivenessPath)},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: old.ReadinessPeriod, TimeoutSeconds: old.ReadinessTimeout,
				FailureThreshold: old.ReadinessFailures}}}
		return s
	}
	if got := clusterOptions(base, c, sts(desired), nil).Probes; got != old {
		t.Errorf("template on the desired image: probes %+v, want its own %+v", got, old)
	}
	if got := clusterOptions(base, c, sts("gcr.io/etcd-development/etcd:v3.5.34"), nil).Probes; got != base.Probes {
		t.Errorf("template that rolls anyway: probes %+v, want the operator's %+v", got, base.Probes)
	}
	if got := clusterOptions(base, c, nil, nil).Probes; got != base.Probes {
		t.Errorf("new cluster: probes %+v, want the operator's %+v", got, base.Probes)
	}
}
