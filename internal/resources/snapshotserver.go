package resources

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
)

// The snapshot server: while members restore from a claim, one pod mounts it (a ReadWriteOnce claim on
// node-local storage holds every pod that mounts it to one node) and serves the restore's snapshot to the
// members over the pod network, so they run wherever they are scheduled.
const (
	ComponentSnapshotServer = "snapshot-server"
	// SnapshotServerPort serves the snapshot (token required) and /healthz.
	SnapshotServerPort = 8080
	// SnapshotServerTokenKey is the key of the token in the server's Secret.
	SnapshotServerTokenKey = "token"
	// SnapshotServerContainerName is the server's container; its termination message says why it stopped.
	SnapshotServerContainerName = "snapshot-server"
)

// SnapshotServerName names the server's StatefulSet, Service, NetworkPolicy and token Secret. Short: a
// StatefulSet's name, with a revision hash, labels its pods (63 characters), and cluster names go to 45.
func SnapshotServerName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-snap" }

// ServedBySnapshotServer reports whether members restore src through the snapshot server: a claim's
// snapshot. S3 is reachable from anywhere, and members read it themselves.
func ServedBySnapshotServer(src *RestoreSource) bool {
	return src != nil && src.Destination.S3 == nil && src.Destination.PVC != nil
}

// SnapshotServerURL is the server's address through its Service.
func SnapshotServerURL(c *etcdv1beta1.EtcdCluster, o Options) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", SnapshotServerName(c), c.Namespace, o.ClusterDomain, SnapshotServerPort)
}

// snapshotTokenEnv passes the token from the server's Secret: never a flag, so never in a pod's arguments.
func snapshotTokenEnv(c *etcdv1beta1.EtcdCluster) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(backup.SnapshotTokenEnv).WithValueFrom(corev1ac.EnvVarSource().
		WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(SnapshotServerName(c)).WithKey(SnapshotServerTokenKey)))
}

// SnapshotServerSecret holds the token the server requires of the restoring members. The operator makes it
// once per cluster (a random token), and it goes with the cluster.
func SnapshotServerSecret(c *etcdv1beta1.EtcdCluster, token string) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(SnapshotServerName(c), c.Namespace).
		WithLabels(Labels(c, ComponentSnapshotServer)).
		WithOwnerReferences(OwnerReference(c)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{SnapshotServerTokenKey: []byte(token)})
}

// SnapshotServerService routes the members' downloads to the server's pod.
func SnapshotServerService(c *etcdv1beta1.EtcdCluster) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(SnapshotServerName(c), c.Namespace).
		WithLabels(Labels(c, ComponentSnapshotServer)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(Labels(c, ComponentSnapshotServer)).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(SnapshotServerPort).
				WithTargetPort(intstr.FromInt32(SnapshotServerPort)).WithProtocol(corev1.ProtocolTCP)))
}

// SnapshotServerStatefulSet serves src's snapshot from its claim, mounted read-only: the scheduler puts the
// pod on the claim's node. One replica of a StatefulSet, like the continuous backup agent: it never runs a
// second pod beside the first, which a ReadWriteOnce claim may refuse. Like the backup pods it has no
// Kubernetes API access; it tolerates what the members tolerate, since the claim's node may be one of theirs.
func SnapshotServerStatefulSet(c *etcdv1beta1.EtcdCluster, src RestoreSource, o Options) *appsv1ac.StatefulSetApplyConfiguration {
	labels := Labels(c, ComponentSnapshotServer)
	volumes, mounts := destinationVolumes(src.Destination, true)
	spec := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(restrictedPodSecurity()).
		WithVolumes(volumes...).
		WithContainers(corev1ac.Container().
			WithName(SnapshotServerContainerName).
			WithImage(o.OperatorImage).
			WithImagePullPolicy(corev1.PullIfNotPresent).
			WithArgs("serve-snapshot", "--key="+src.Key, "--pvc-claim="+src.Destination.PVC.ClaimName,
				"--dir="+backupMountPath, fmt.Sprintf("--listen=:%d", SnapshotServerPort)).
			WithEnv(snapshotTokenEnv(c)).
			WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(SnapshotServerPort).WithProtocol(corev1.ProtocolTCP)).
			WithReadinessProbe(corev1ac.Probe().
				WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromInt32(SnapshotServerPort))).
				WithPeriodSeconds(2)).
			WithVolumeMounts(mounts...).
			WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")})).
			WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
			WithSecurityContext(restrictedContainerSecurity()))
	for i := range c.Spec.Pod.Tolerations {
		spec.WithTolerations(toleration(&c.Spec.Pod.Tolerations[i]))
	}
	return appsv1ac.StatefulSet(SnapshotServerName(c), c.Namespace).
		WithLabels(labels).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(SnapshotServerName(c)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(spec)))
}
