package resources

import (
	"fmt"
	"hash/fnv"
	"path"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
)

// The continuous backup agent and the point-in-time restore Job.
const (
	ComponentContinuousBackup = "continuous-backup"
	ComponentPointInTime      = "point-in-time-restore"

	// ContinuousBackupPort serves the agent's /status (read by the operator), /healthz and /metrics.
	ContinuousBackupPort = 8080
	// PointInTimeContainerName is the container whose termination message carries the restore's result.
	PointInTimeContainerName = "point-in-time-restore"
	// LabelRecovery, on a point-in-time Job of a quorum-loss recovery, names the recovery.
	LabelRecovery = "etcd.seedops.io/recovery"
	// continuousKind is the folder of a cluster's continuous backup under its destination's prefix (as the
	// agent stores it: cmd/continuousbackup.go).
	continuousKind = "continuous"

	toolsMountPath = "/tools"
	workMountPath  = "/work"
)

// ContinuousBackupName is the agent's StatefulSet (one replica: a StatefulSet never runs two pods of one
// identity, and two agents would fork the chain of segments). Short: its pods carry
// controller-revision-hash=<name>-<hash of up to 10 characters>, a label value of at most 63 characters, and
// cluster names have up to 45.
func ContinuousBackupName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-pitr" }

// PointInTimeJobName is the Job that replays a continuous backup for a new cluster's bootstrap (its pods
// carry job-name=<name>: at most 63 characters).
func PointInTimeJobName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-pitr-restore" }

// PointInTimeKey is where the Job stores the snapshot it replays to, beside the source's continuous backup
// (under the destination's S3 prefix: a restore key is always a full key). The UID keeps a later cluster of
// the same name from finding this one's snapshot.
func PointInTimeKey(c *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination) string {
	prefix := ""
	if d.S3 != nil {
		prefix = d.S3.Prefix
	}
	return path.Join(prefix, c.Namespace, c.Name, "point-in-time", c.Name+"-"+string(c.UID)+".db")
}

// PointInTimeRecoveryJobName is the Job that replays the cluster's own continuous backup for quorum-loss
// recovery id: one per recovery (a later one never finds an earlier one's Job), and at most 59 characters
// (cluster names have up to 45; its pods carry job-name=<name>).
func PointInTimeRecoveryJobName(c *etcdv1beta1.EtcdCluster, id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return fmt.Sprintf("%s-pitr-%08x", c.Name, h.Sum32())
}

// PointInTimeRecoveryKey is where the Job of quorum-loss recovery id stores its snapshot: beside the
// bootstrap's, named after the recovery, so that a later recovery never restores an earlier one's file.
func PointInTimeRecoveryKey(c *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination, id string) string {
	return path.Join(path.Dir(PointInTimeKey(c, d)), c.Name+"-"+string(c.UID)+"-"+id+".db")
}

// ContinuousBackupKey is the full key prefix under which the agent stores c's continuous backup in its
// destination (BackupDestination(c, nil)), as bootstrap.fromBackup.key takes it.
func ContinuousBackupKey(c *etcdv1beta1.EtcdCluster) string {
	prefix := ""
	if d := BackupDestination(c, nil); d.S3 != nil {
		prefix = d.S3.Prefix
	}
	return backup.ClusterPrefix(prefix, c.Namespace, c.Name, continuousKind)
}

// Location is the address of key in destination d, as stores and status report it.
func Location(d etcdv1beta1.BackupDestination, key string) string {
	if d.S3 != nil {
		return "s3://" + d.S3.Bucket + "/" + key
	}
	return "pvc://" + d.PVC.ClaimName + "/" + key
}

// durationArg is flag=d, or flag=def when d is unset (the API server defaults it; objects stored before the
// default existed may lack it).
func durationArg(flag string, d *metav1.Duration, def time.Duration) string {
	if d != nil {
		def = d.Duration
	}
	return flag + "=" + def.String()
}

// ContinuousBackupStatefulSet runs the operator image's continuous-backup mode against the cluster's client
// Service, writing to the cluster's backup destination. Like the backup Jobs, it needs no Kubernetes API
// access: the operator reads its /status.
func ContinuousBackupStatefulSet(c *etcdv1beta1.EtcdCluster, o Options) *appsv1ac.StatefulSetApplyConfiguration {
	spec := c.Spec.Backup.Continuous
	d := BackupDestination(c, nil)
	labels := Labels(c, ComponentContinuousBackup)
	args := []string{"continuous-backup", "--cluster=" + c.Name, "--namespace=" + c.Namespace,
		"--cluster-uid=" + string(c.UID), "--endpoint=" + ClientEndpoint(c, o),
		fmt.Sprintf("--listen=:%d", ContinuousBackupPort), "--staging-dir=" + stagingMountPath}
	args = append(args, durationArg("--segment-interval", spec.SegmentInterval, 10*time.Second),
		durationArg("--full-snapshot-interval", spec.FullSnapshotInterval, 24*time.Hour),
		durationArg("--retain-for", spec.RetainFor, 168*time.Hour))
	if spec.MaxSize != nil {
		args = append(args, "--max-bytes="+strconv.FormatInt(spec.MaxSize.Value(), 10))
	}
	args = append(args, destinationArgs(d)...)
	volumes, mounts := destinationVolumes(d, false)
	volumes = append(volumes, corev1ac.Volume().WithName("staging").WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	mounts = append(mounts, corev1ac.VolumeMount().WithName("staging").WithMountPath(stagingMountPath))
	args, volumes, mounts = withClientTLS(c, args, volumes, mounts)
	probe := corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().
		WithPath("/healthz").WithPort(intstr.FromInt32(ContinuousBackupPort))).
		WithPeriodSeconds(10)
	return appsv1ac.StatefulSet(ContinuousBackupName(c), c.Namespace).
		WithLabels(labels).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(ContinuousBackupName(c)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().WithType(appsv1.RollingUpdateStatefulSetStrategyType)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().
					WithAutomountServiceAccountToken(false).
					WithEnableServiceLinks(false).
					// On SIGTERM the agent stores what it buffered (up to 30 s) before it exits.
					WithTerminationGracePeriodSeconds(60).
					WithSecurityContext(restrictedPodSecurity()).
					WithVolumes(volumes...).
					WithContainers(corev1ac.Container().
						WithName(ComponentContinuousBackup).
						WithImage(o.OperatorImage).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithArgs(args...).
						WithEnv(destinationEnv(d)...).
						WithPorts(corev1ac.ContainerPort().WithName("status").WithContainerPort(ContinuousBackupPort)).
						WithReadinessProbe(probe).
						WithVolumeMounts(mounts...).
						WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")})).
						WithSecurityContext(restrictedContainerSecurity())))))
}

// PointInTimeJob replays a continuous backup to the chosen point and stores the resulting snapshot at
// PointInTimeKey, from which every member then restores as from any snapshot. It runs in the cluster's own
// etcd image (the replay starts a temporary etcd), with the operator binary copied in by an init container.
func PointInTimeJob(c *etcdv1beta1.EtcdCluster, src etcdv1beta1.BackupSource, o Options) *batchv1ac.JobApplyConfiguration {
	d := etcdv1beta1.BackupDestination{PVC: src.PVC, S3: src.S3}
	return pointInTimeJob(c, PointInTimeJobName(c), Labels(c, ComponentPointInTime), d, src.Key, PointInTimeKey(c, d), *src.PointInTime, o)
}

// PointInTimeRecoveryJob replays the cluster's own continuous backup to revision, for quorum-loss recovery
// id, into PointInTimeRecoveryKey: the members restore that snapshot once the Job has stored and verified
// it. The cluster's UID picks its chains (a deleted namesake's may share the prefix).
func PointInTimeRecoveryJob(c *etcdv1beta1.EtcdCluster, id string, revision int64, o Options) *batchv1ac.JobApplyConfiguration {
	d := BackupDestination(c, nil)
	labels := Labels(c, ComponentPointInTime)
	labels[LabelRecovery] = id
	return pointInTimeJob(c, PointInTimeRecoveryJobName(c, id), labels, d, ContinuousBackupKey(c), PointInTimeRecoveryKey(c, d, id),
		etcdv1beta1.PointInTime{Revision: revision, ClusterUID: string(c.UID)}, o)
}

// pointInTimeJob is the Job, named name, that replays the continuous backup at prefix in d to pit and stores the
// snapshot at outKey.
func pointInTimeJob(c *etcdv1beta1.EtcdCluster, name string, labels map[string]string, d etcdv1beta1.BackupDestination, prefix, outKey string,
	pit etcdv1beta1.PointInTime, o Options) *batchv1ac.JobApplyConfiguration {
	labels[LabelClusterUID] = string(c.UID)
	args := []string{"pitr", "--cluster=" + c.Name, "--namespace=" + c.Namespace, "--prefix=" + prefix,
		"--out-key=" + outKey, "--etcd=/usr/local/bin/etcd", "--work-dir=" + workMountPath}
	switch {
	case pit.Revision > 0:
		args = append(args, "--revision="+strconv.FormatInt(pit.Revision, 10))
	case pit.Time != nil:
		args = append(args, "--time="+pit.Time.UTC().Format(time.RFC3339))
	}
	if pit.ClusterUID != "" {
		args = append(args, "--cluster-uid="+pit.ClusterUID)
	}
	args = append(args, destinationArgs(d)...)
	volumes, mounts := destinationVolumes(d, false)
	volumes = append(volumes,
		corev1ac.Volume().WithName("tools").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("work").WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	mounts = append(mounts,
		corev1ac.VolumeMount().WithName("tools").WithMountPath(toolsMountPath).WithReadOnly(true),
		corev1ac.VolumeMount().WithName("work").WithMountPath(workMountPath))
	return batchv1ac.Job(name, c.Namespace).
		WithLabels(labels).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(batchv1ac.JobSpec().
			// A retry finds the snapshot an earlier attempt stored; a refusal (a target outside the covered
			// range, a damaged chain) fails the same way every time.
			WithBackoffLimit(2).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().
					WithRestartPolicy(corev1.RestartPolicyNever).
					WithAutomountServiceAccountToken(false).
					WithEnableServiceLinks(false).
					WithSecurityContext(restrictedPodSecurity()).
					WithVolumes(volumes...).
					WithInitContainers(corev1ac.Container().
						WithName("install").
						WithImage(o.OperatorImage).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithArgs("install-self", "--dir="+toolsMountPath).
						WithVolumeMounts(corev1ac.VolumeMount().WithName("tools").WithMountPath(toolsMountPath)).
						WithSecurityContext(restrictedContainerSecurity())).
					WithContainers(corev1ac.Container().
						WithName(PointInTimeContainerName).
						WithImage(Image(c, o)).
						WithImagePullPolicy(corev1.PullIfNotPresent).
						WithCommand(toolsMountPath + "/manager").
						WithArgs(args...).
						WithEnv(destinationEnv(d)...).
						WithVolumeMounts(mounts...).
						WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
						WithSecurityContext(restrictedContainerSecurity())))))
}

// withClientTLS adds the cluster's client certificate, which backups authenticate with, when TLS is on.
func withClientTLS(c *etcdv1beta1.EtcdCluster, args []string, volumes []*corev1ac.VolumeApplyConfiguration, mounts []*corev1ac.VolumeMountApplyConfiguration) ([]string, []*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	if !TLSEnabled(c) {
		return args, volumes, mounts
	}
	args = append(args, "--cacert="+clientTLSMountPath+"/"+CAKey, "--cert="+clientTLSMountPath+"/"+corev1.TLSCertKey,
		"--key="+clientTLSMountPath+"/"+corev1.TLSPrivateKeyKey)
	volumes = append(volumes, secretVolume(clientTLSVolume, ClientSecretName(c)))
	mounts = append(mounts, corev1ac.VolumeMount().WithName(clientTLSVolume).WithMountPath(clientTLSMountPath).WithReadOnly(true))
	return args, volumes, mounts
}
