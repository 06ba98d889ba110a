package resources

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membergate"
)

// etcdUID is the non-root user etcd runs as; fsGroup makes the data volume writable for it.
const etcdUID = 65532

// StatefulSet builds the members' StatefulSet with the given number of replicas (the controller decides
// the count, because membership changes go one member at a time). A non-nil restore adds the init
// container that restores each bootstrapping member from that snapshot. A gate with an image selects the
// current member template: the init container (of that image) that decides whether etcd may start on the
// member's data (it runs first), and readiness that a learner does not pass. The controller decides both
// per cluster, because changing a running cluster's template on its own would restart every member.
func StatefulSet(c *etcdv1beta1.EtcdCluster, replicas int32, o Options, restore *RestoreSource, gate MemberGate) *appsv1ac.StatefulSetApplyConfiguration {
	return appsv1ac.StatefulSet(StatefulSetName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(replicas).
			WithServiceName(PeerServiceName(c)).
			// Parallel: a new cluster's members must all start together to reach quorum.
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			// OnDelete: the operator restarts members itself, one at a time, leader last.
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.OnDeleteStatefulSetStrategyType)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))).
			WithPersistentVolumeClaimRetentionPolicy(appsv1ac.StatefulSetPersistentVolumeClaimRetentionPolicy().
				WithWhenDeleted(appsv1.PersistentVolumeClaimRetentionPolicyType(c.Spec.PVCRetentionPolicy.WhenDeleted)).
				WithWhenScaled(appsv1.PersistentVolumeClaimRetentionPolicyType(c.Spec.PVCRetentionPolicy.WhenScaled))).
			WithVolumeClaimTemplates(dataVolumeClaim(c)).
			WithTemplate(podTemplate(c, o, restore, gate)))
}

func dataVolumeClaim(c *etcdv1beta1.EtcdCluster) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithVolumeMode(corev1.PersistentVolumeFilesystem).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: c.Spec.StorageSize}))
	if c.Spec.StorageClassName != nil {
		spec.WithStorageClassName(*c.Spec.StorageClassName)
	}
	// Built without namespace and type meta, as the API server stores claim templates: claims get the
	// pod's namespace when the StatefulSet creates them.
	return (&corev1ac.PersistentVolumeClaimApplyConfiguration{}).
		WithName(DataVolumeName).
		WithLabels(Labels(c, ComponentEtcd)).
		WithSpec(spec)
}

func podTemplate(c *etcdv1beta1.EtcdCluster, o Options, restore *RestoreSource, gate MemberGate) *corev1ac.PodTemplateSpecApplyConfiguration {
	labels := Labels(c, ComponentEtcd)
	for k, v := range c.Spec.Pod.Labels {
		labels[k] = v
	}
	spec := corev1ac.PodSpec().
		// Service links would inject ETCD_*-looking variables that etcd tries to parse as flags.
		WithEnableServiceLinks(false).
		WithAutomountServiceAccountToken(false).
		WithSecurityContext(restrictedPodSecurity()).
		WithContainers(etcdContainer(c, o, gate.Image != "" && readyzChecksLearners(c.Spec.Version), gate.MaxLearners))
	if TLSEnabled(c) {
		spec.WithVolumes(secretVolume(serverTLSVolume, ServerSecretName(c)), secretVolume(peerTLSVolume, PeerSecretName(c)))
	}
	// The gate runs first, so it judges the directory as the pod found it; the restore only fills the
	// empty directory of a bootstrapping member, which the gate lets through at once.
	if gate.Image != "" {
		if gate.ForcedStartTicket {
			withForcedStartTicket(spec, &spec.Containers[0])
		}
		init := memberGateInitContainer(c, &spec.Containers[0], gate)
		if restore != nil && restore.Recovery != "" {
			init.WithEnv(corev1ac.EnvVar().WithName(membergate.EnvRestoreRecovery).WithValue(restore.Recovery),
				corev1ac.EnvVar().WithName(membergate.EnvRestoreToken).WithValue(RestoreRecoveryToken(c, restore.Recovery)))
		}
		spec.WithInitContainers(init)
	}
	if restore != nil {
		init, volumes := restoreInitContainer(c, &spec.Containers[0], *restore, o)
		spec.WithInitContainers(init).WithVolumes(volumes...)
	}
	if len(c.Spec.Pod.NodeSelector) > 0 {
		spec.WithNodeSelector(c.Spec.Pod.NodeSelector)
	}
	for i := range c.Spec.Pod.Tolerations {
		spec.WithTolerations(toleration(&c.Spec.Pod.Tolerations[i]))
	}
	if c.Spec.Pod.PriorityClassName != "" {
		spec.WithPriorityClassName(c.Spec.Pod.PriorityClassName)
	}
	withPlacement(spec, c)

	tpl := corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(spec)
	if len(c.Spec.Pod.Annotations) > 0 {
		tpl.WithAnnotations(c.Spec.Pod.Annotations)
	}
	return tpl
}

// etcdContainer builds the etcd container. With learnerAwareReadiness a pod is Ready only when its member
// votes (etcd's /readyz includes a "non_learner" check): a learner serves no client request ("rpc not
// supported for learner"), so the client Service must not route to it and the PodDisruptionBudget must
// not count it as one of the members quorum rests on. maxLearners above one is set on etcd 3.6 and later
// (etcd 3.5 has no such setting).
func etcdContainer(c *etcdv1beta1.EtcdCluster, o Options, learnerAwareReadiness bool, maxLearners int) *corev1ac.ContainerApplyConfiguration {
	probes := o.probes()
	readiness := healthProbe("/health", probes.ReadinessPeriod, probes.ReadinessTimeout, probes.ReadinessFailures)
	if learnerAwareReadiness {
		readiness = healthProbe("/readyz", probes.ReadinessPeriod, probes.ReadinessTimeout, probes.ReadinessFailures)
	}
	host := "$(POD_NAME)." + PeerServiceName(c) + ".$(POD_NAMESPACE).svc." + o.ClusterDomain
	ctr := corev1ac.Container().
		WithName(EtcdContainerName).
		WithImage(Image(c, o)).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		// The official image has no shell: etcd is configured entirely through ETCD_* variables.
		WithCommand("/usr/local/bin/etcd").
		WithEnv(
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			// $(VAR) references are expanded by the kubelet, so each member gets its own name and URLs.
			corev1ac.EnvVar().WithName("ETCD_NAME").WithValue("$(POD_NAME)"),
			corev1ac.EnvVar().WithName("ETCD_INITIAL_ADVERTISE_PEER_URLS").WithValue(scheme(c)+"://"+host+":2380"),
			corev1ac.EnvVar().WithName("ETCD_ADVERTISE_CLIENT_URLS").WithValue(scheme(c)+"://"+host+":2379"),
		).
		WithEnv(settingsEnv(c)...).
		WithEnv(maxLearnersEnv(c, maxLearners)...).
		WithEnvFrom(corev1ac.EnvFromSource().WithConfigMapRef(corev1ac.ConfigMapEnvSource().WithName(ConfigMapName(c)))).
		WithPorts(
			corev1ac.ContainerPort().WithName("client").WithContainerPort(ClientPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("peer").WithContainerPort(PeerPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("metrics").WithContainerPort(MetricsPort).WithProtocol(corev1.ProtocolTCP),
		).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(DataVolumeName).WithMountPath(DataMountPath)).
		WithResources(resourceRequirements(c)).
		// Startup allows a large database to load; liveness does not need quorum (StartupProbePath,
		// LivenessProbePath); readiness needs quorum.
		WithStartupProbe(healthProbe(probes.StartupPath, probes.StartupPeriod, probes.StartupTimeout, probes.StartupFailures)).
		WithLivenessProbe(healthProbe(probes.LivenessPath, 10, 5, 6)).
		WithReadinessProbe(readiness).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	if args := extraFlagArgs(c); len(args) > 0 {
		ctr.WithArgs(args...)
	}
	if TLSEnabled(c) {
		ctr.WithEnv(etcdctlEnv()...).WithVolumeMounts(
			corev1ac.VolumeMount().WithName(serverTLSVolume).WithMountPath(serverTLSMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName(peerTLSVolume).WithMountPath(peerTLSMountPath).WithReadOnly(true))
	}
	return ctr
}

// readyzChecksLearners reports whether etcd's /readyz fails on a learner: from 3.5.19 (backported) and in
// every 3.6 and later release.
func readyzChecksLearners(version string) bool { return versionAtLeast(version, 3, 5, 19) }

// maxLearnersEnv sets etcd's --max-learners, which etcd 3.6 introduced.
func maxLearnersEnv(c *etcdv1beta1.EtcdCluster, maxLearners int) []*corev1ac.EnvVarApplyConfiguration {
	if maxLearners <= 1 || !versionAtLeast(c.Spec.Version, 3, 6, 0) {
		return nil
	}
	return []*corev1ac.EnvVarApplyConfiguration{corev1ac.EnvVar().WithName(MaxLearnersEnv).WithValue(strconv.Itoa(maxLearners))}
}

// versionAtLeast reports whether version (major.minor.patch) is at least the given one; false when it does
// not parse.
func versionAtLeast(version string, major, minor, patch int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) != 3 {
		return false
	}
	v := [3]int{}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		v[i] = n
	}
	return v[0] > major || v[0] == major && (v[1] > minor || v[1] == minor && v[2] >= patch)
}

func fieldEnv(name, path string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(path)))
}

func healthProbe(path string, period, timeout, failures int32) *corev1ac.ProbeApplyConfiguration {
	return corev1ac.Probe().
		WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromInt32(MetricsPort)).WithScheme(corev1.URISchemeHTTP)).
		WithPeriodSeconds(period).
		WithTimeoutSeconds(timeout).
		WithFailureThreshold(failures)
}

// DefaultResources are the etcd container's requests when the user sets none. No limits: a CPU limit
// throttles etcd and causes needless leader elections.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}}
}

func resourceRequirements(c *etcdv1beta1.EtcdCluster) *corev1ac.ResourceRequirementsApplyConfiguration {
	r := DefaultResources()
	if c.Spec.Pod.Resources != nil {
		r = *c.Spec.Pod.Resources
	}
	ac := corev1ac.ResourceRequirements()
	if len(r.Requests) > 0 {
		ac.WithRequests(r.Requests)
	}
	if len(r.Limits) > 0 {
		ac.WithLimits(r.Limits)
	}
	return ac
}

// withPlacement sets where members may run: the user's affinity and topology spread constraints as given
// when either is set, else the default placement. Placement is read only when a pod is scheduled, so a
// change of it alone never restarts a member (the controller counts a pod whose revision differs only in
// placement as up to date): it applies when a member's pod is next created.
func withPlacement(spec *corev1ac.PodSpecApplyConfiguration, c *etcdv1beta1.EtcdCluster) {
	if c.Spec.Pod.Affinity != nil || len(c.Spec.Pod.TopologySpreadConstraints) > 0 {
		if c.Spec.Pod.Affinity != nil {
			spec.WithAffinity(affinityFrom(c.Spec.Pod.Affinity))
		}
		for i := range c.Spec.Pod.TopologySpreadConstraints {
			spec.WithTopologySpreadConstraints(topologySpread(&c.Spec.Pod.TopologySpreadConstraints[i]))
		}
		return
	}
	spec.WithTopologySpreadConstraints(defaultSpread(c)...).WithAffinity(defaultAffinity(c))
}

// spreadTopologyKeys are the labels the default placement spreads members over, widest first: a zone
// failure takes every node in it.
var spreadTopologyKeys = []string{corev1.LabelTopologyZone, corev1.LabelHostname}

// StrictSpread: the default placement with spread Required, where the scheduler places a member only where
// it keeps nodes (and zones) within one member of each other.
func StrictSpread(c *etcdv1beta1.EtcdCluster) bool {
	return c.Spec.Pod.Affinity == nil && len(c.Spec.Pod.TopologySpreadConstraints) == 0 && c.Spec.Pod.Spread == etcdv1beta1.SpreadRequired
}

// defaultSpread keeps members within one of each other per zone and per node, so that one zone or node
// failure costs as few voters as the topology allows. Preferred by default: a member placed unevenly still
// serves, and status reports the tolerance that placement leaves (Spread condition, failureTolerance).
// Required makes the scheduler keep a member Pending instead; nodes without a zone label then take none.
func defaultSpread(c *etcdv1beta1.EtcdCluster) []*corev1ac.TopologySpreadConstraintApplyConfiguration {
	when := corev1.ScheduleAnyway
	if c.Spec.Pod.Spread == etcdv1beta1.SpreadRequired {
		when = corev1.DoNotSchedule
	}
	out := make([]*corev1ac.TopologySpreadConstraintApplyConfiguration, 0, len(spreadTopologyKeys))
	for _, key := range spreadTopologyKeys {
		out = append(out, corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(key).
			WithWhenUnsatisfiable(when).
			WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))))
	}
	return out
}

// defaultAffinity prefers nodes without a member. It complements the spread constraints rather than
// duplicating them: the scheduler scores spread constraints only on nodes carrying every one of their
// topology labels, so on nodes without a zone label (bare metal, single-zone clusters) only this preference
// keeps members on separate nodes.
func defaultAffinity(c *etcdv1beta1.EtcdCluster) *corev1ac.AffinityApplyConfiguration {
	return corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().
		WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().
			WithWeight(100).
			WithPodAffinityTerm(corev1ac.PodAffinityTerm().
				WithTopologyKey(corev1.LabelHostname).
				WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))))))
}
