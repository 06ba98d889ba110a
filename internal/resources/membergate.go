package resources

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// MemberGateContainerName is the init container that decides whether etcd may start on the member's data
// directory (the operator image's member-gate mode): it refuses a WAL of a member the cluster no longer
// has, and holds an empty member back until the operator has added the member it is to become, so etcd
// never takes over the identity of a member whose data is elsewhere.
const MemberGateContainerName = "member-gate"

// memberGateInitContainer runs the gate with etcd's own configuration (the same variables, the same
// ConfigMap, the same data volume and, with TLS, the same peer certificate at the same path), so it judges
// exactly the member etcd is about to start.
func memberGateInitContainer(c *etcdv1alpha1.EtcdCluster, etcd *corev1ac.ContainerApplyConfiguration, image string) *corev1ac.ContainerApplyConfiguration {
	var env []*corev1ac.EnvVarApplyConfiguration
	for i := range etcd.Env {
		env = append(env, &etcd.Env[i])
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
	return corev1ac.Container().
		WithName(MemberGateContainerName).
		WithImage(image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs("member-gate").
		WithEnv(env...).
		WithEnvFrom(envFrom...).
		WithVolumeMounts(mounts...).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithSecurityContext(restrictedContainerSecurity())
}
