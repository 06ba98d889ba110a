package resources

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membergate"
)

// MemberGateContainerName is the init container that decides whether etcd may start on the member's data
// directory (the operator image's member-gate mode): it refuses a WAL of a member the cluster no longer
// has, and holds an empty member back until the operator has added the member it is to become, so etcd
// never takes over the identity of a member whose data is elsewhere.
const MemberGateContainerName = "member-gate"

// MemberGateHoldsForcedStartEnv marks a member gate that holds a member with data back while the
// configuration forces another member to start alone (quorum-loss recovery): a gate from before that rule
// would let the member force a cluster of its own. The mark travels with the gate, not with the operator's
// image, so a later operator that keeps a running cluster's gate (to restart no member) still knows it.
const MemberGateHoldsForcedStartEnv = "MEMBER_GATE_HOLDS_FORCED_START"

// MemberGate is how the members' template lets members join: the member-gate init container's image (""
// for none), whether it carries MemberGateHoldsForcedStartEnv, whether etcd starts through the forced
// start's ticket, and how many learners etcd accepts at once. All are kept from a running cluster's
// template until it rolls for another reason.
type MemberGate struct {
	Image            string
	HoldsForcedStart bool
	// ForcedStartTicket: the gate hands a forced start to its own pod's etcd as a ticket in a volume of
	// that pod (MemberStartVolume), and etcd starts through the entry that takes it
	// (membergate.EtcdStart). Without it no member can be forced: the members' configuration never
	// carries --force-new-cluster.
	ForcedStartTicket bool
	// MaxLearners is etcd's --max-learners (MaxLearnersEnv), set on etcd 3.6 and later (0: not set,
	// etcd's default of one).
	MaxLearners int
}

// CurrentMemberGate is this operator's gate: its own image, holding members back during a forced start,
// with LearnersAtOnce.
func CurrentMemberGate(o Options) MemberGate {
	return MemberGate{Image: o.OperatorImage, HoldsForcedStart: true, ForcedStartTicket: true, MaxLearners: LearnersAtOnce}
}

// The pod's own volume the gate shares with etcd: the operator binary it installs there runs etcd
// (EtcdStartCommand), and takes the ticket of a forced start the gate leaves beside it. An emptyDir: it
// lives as long as the pod, so a ticket can reach no other pod, and survives restarts of the etcd
// container, so the ticket is taken once.
const (
	MemberStartVolume    = "member-start"
	MemberStartMountPath = "/member-start"
	// MemberGateTicketFlag is the gate's flag that names the volume (and marks a gate that issues tickets).
	MemberGateTicketFlag = "--ticket-dir="
)

// EtcdStartCommand is the etcd container's command with a ticket-issuing gate.
func EtcdStartCommand() []string {
	return []string{MemberStartMountPath + "/manager", "etcd-start", MemberGateTicketFlag + MemberStartMountPath, "--", "/usr/local/bin/etcd"}
}

// withForcedStartTicket makes etcd start through the entry that takes a forced start's ticket, with the
// pod's UID the ticket names.
func withForcedStartTicket(spec *corev1ac.PodSpecApplyConfiguration, etcd *corev1ac.ContainerApplyConfiguration) {
	etcd.Command = EtcdStartCommand()
	etcd.WithEnv(fieldEnv(membergate.EnvPodUID, "metadata.uid")).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(MemberStartVolume).WithMountPath(MemberStartMountPath))
	spec.WithVolumes(corev1ac.Volume().WithName(MemberStartVolume).WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
}

// LearnersAtOnce is how many learners a member of etcd 3.6 or later accepts: two new members join side by
// side, so the usual steps (1 to 3, 3 to 5 members) take one member's join time, while the leader streams
// its data to at most two members at once. Every member checks the limit when it applies a membership
// change (a member that accepts fewer would refuse a learner the others add), so the operator adds a
// second learner only once every member runs with it, and the value is never lowered.
const LearnersAtOnce = 2

// MaxLearnersEnv is etcd's --max-learners as a variable (etcd 3.6 and later).
const MaxLearnersEnv = "ETCD_MAX_LEARNERS"

// memberGateInitContainer runs the gate with etcd's own configuration (the same variables, the same
// ConfigMap, the same data volume and, with TLS, the same peer certificate at the same path), so it judges
// exactly the member etcd is about to start.
func memberGateInitContainer(c *etcdv1beta1.EtcdCluster, etcd *corev1ac.ContainerApplyConfiguration, gate MemberGate) *corev1ac.ContainerApplyConfiguration {
	var env []*corev1ac.EnvVarApplyConfiguration
	for i := range etcd.Env {
		env = append(env, &etcd.Env[i])
	}
	if gate.HoldsForcedStart {
		env = append(env, corev1ac.EnvVar().WithName(MemberGateHoldsForcedStartEnv).WithValue("true"))
	}
	var envFrom []*corev1ac.EnvFromSourceApplyConfiguration
	for i := range etcd.EnvFrom {
		envFrom = append(envFrom, &etcd.EnvFrom[i])
	}
	// Read-only: the gate only gathers evidence; whatever must happen to the data is the operator's call.
	mounts := []*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName(DataVolumeName).WithMountPath(DataMountPath).WithReadOnly(true)}
	if TLSEnabled(c) {
		mounts = append(mounts, corev1ac.VolumeMount().WithName(peerTLSVolume).WithMountPath(peerTLSMountPath).WithReadOnly(true))
	}
	args := []string{"member-gate"}
	if gate.ForcedStartTicket {
		mounts = append(mounts, corev1ac.VolumeMount().WithName(MemberStartVolume).WithMountPath(MemberStartMountPath))
		args = append(args, MemberGateTicketFlag+MemberStartMountPath)
	}
	return corev1ac.Container().
		WithName(MemberGateContainerName).
		WithImage(gate.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(args...).
		WithEnv(env...).
		WithEnvFrom(envFrom...).
		WithVolumeMounts(mounts...).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithSecurityContext(restrictedContainerSecurity())
}
