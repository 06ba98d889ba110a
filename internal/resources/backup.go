package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// Labels and values of backup Jobs and their pods.
const (
	// LabelBackupKind is "scheduled" (CronJob runs) or "on-demand" (EtcdBackup runs).
	LabelBackupKind = "etcd.seedops.io/backup-kind"
	// LabelBackupName names the EtcdBackup an on-demand Job runs for.
	LabelBackupName = "etcd.seedops.io/backup"
	// LabelClusterUID is the UID of the EtcdCluster a backup Job backs up: a cluster created later under the
	// same name counts only its own runs.
	LabelClusterUID = "etcd.seedops.io/cluster-uid"

	BackupKindScheduled = "scheduled"
	BackupKindOnDemand  = "on-demand"

	// BackupContainerName is the container whose termination message carries the run's result (JSON).
	BackupContainerName = "backup"
	// RestoreContainerName is the init container that restores a member's data before etcd first starts.
	RestoreContainerName = "restore"
	// RestoreRecoveryFlag, on the restore container, names the quorum-loss recovery it restores for, and
	// RestoreTokenFlag the initial cluster token it restores under (the pod's own, from the template: the
	// configuration the kubelet read may predate the recovery).
	RestoreRecoveryFlag = "--recovery="
	RestoreTokenFlag    = "--initial-cluster-token="

	backupMountPath  = "/backups"
	stagingMountPath = "/staging"
	caMountPath      = "/etc/etcd-operator/s3-ca"
)

// BackupPVCName is the claim the operator creates when backups go to its default PVC destination.
func BackupPVCName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-backups" }

// BackupDestination is where a backup of c goes: the override, else c's spec.backup, else the default claim.
func BackupDestination(c *etcdv1beta1.EtcdCluster, override *etcdv1beta1.BackupDestination) etcdv1beta1.BackupDestination {
	d := c.Spec.Backup.BackupDestination
	if override != nil && (override.PVC != nil || override.S3 != nil) {
		d = *override
	}
	if d.S3 == nil && (d.PVC == nil || d.PVC.ClaimName == "") {
		pvc := &etcdv1beta1.PVCBackupDestination{ClaimName: BackupPVCName(c)}
		if d.PVC != nil {
			pvc.StorageClassName = d.PVC.StorageClassName
		}
		d = etcdv1beta1.BackupDestination{PVC: pvc}
	}
	return d
}

// UsesDefaultBackupPVC says whether the destination is the claim the operator creates for c.
func UsesDefaultBackupPVC(c *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination) bool {
	return d.PVC != nil && d.PVC.ClaimName == BackupPVCName(c)
}

// BackupPVC is the default backup claim, sized like one member's volume (a snapshot is at most the size
// of the database). It has no owner reference on purpose: deleting a cluster must not delete its backups.
func BackupPVC(c *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: c.Spec.StorageSize}))
	if d.PVC != nil && d.PVC.StorageClassName != nil {
		spec.WithStorageClassName(*d.PVC.StorageClassName)
	} else if c.Spec.StorageClassName != nil {
		spec.WithStorageClassName(*c.Spec.StorageClassName)
	}
	return corev1ac.PersistentVolumeClaim(BackupPVCName(c), c.Namespace).
		WithLabels(Labels(c, ComponentBackup)).
		WithSpec(spec)
}

// destinationArgs, destinationEnv and destinationVolumes describe a destination (or restore source) to the
// operator image's backup and restore modes.
func destinationArgs(d etcdv1beta1.BackupDestination) []string {
	if d.S3 != nil {
		args := []string{"--s3-endpoint=" + d.S3.Endpoint, "--s3-bucket=" + d.S3.Bucket}
		if d.S3.Prefix != "" {
			args = append(args, "--s3-prefix="+d.S3.Prefix)
		}
		if d.S3.Region != "" {
			args = append(args, "--s3-region="+d.S3.Region)
		}
		if d.S3.CASecretName != "" {
			args = append(args, "--s3-ca-file="+caMountPath+"/ca.crt")
		}
		return args
	}
	return []string{"--pvc-claim=" + d.PVC.ClaimName, "--dir=" + backupMountPath}
}

func destinationEnv(d etcdv1beta1.BackupDestination) []*corev1ac.EnvVarApplyConfiguration {
	if d.S3 == nil {
		return nil
	}
	secretEnv := func(name, key string) *corev1ac.EnvVarApplyConfiguration {
		return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(d.S3.CredentialsSecretName).WithKey(key)))
	}
	return []*corev1ac.EnvVarApplyConfiguration{
		secretEnv("AWS_ACCESS_KEY_ID", "accessKeyID"),
		secretEnv("AWS_SECRET_ACCESS_KEY", "secretAccessKey"),
	}
}

func destinationVolumes(d etcdv1beta1.BackupDestination, readOnly bool) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	if d.S3 != nil {
		if d.S3.CASecretName == "" {
			return nil, nil
		}
		return []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("s3-ca").
				WithSecret(corev1ac.SecretVolumeSource().WithSecretName(d.S3.CASecretName))},
			[]*corev1ac.VolumeMountApplyConfiguration{corev1ac.VolumeMount().WithName("s3-ca").WithMountPath(caMountPath).WithReadOnly(true)}
	}
	// ReadOnly is set only when true: the API server drops false, and a dropped field would look like drift.
	source := corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(d.PVC.ClaimName)
	mount := corev1ac.VolumeMount().WithName("backups").WithMountPath(backupMountPath)
	if readOnly {
		source.WithReadOnly(true)
		mount.WithReadOnly(true)
	}
	return []*corev1ac.VolumeApplyConfiguration{corev1ac.Volume().WithName("backups").WithPersistentVolumeClaim(source)},
		[]*corev1ac.VolumeMountApplyConfiguration{mount}
}

// restrictedPodSecurity is the pod-level part of the restricted Pod Security Standard for the pods that
// touch member data (members, backups): etcd's non-root user, and its group on the data volume.
func restrictedPodSecurity() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithRunAsUser(etcdUID).
		WithRunAsGroup(etcdUID).
		WithFSGroup(etcdUID).
		WithFSGroupChangePolicy(corev1.FSGroupChangeOnRootMismatch).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// backupPodSpec runs the operator image's backup mode. The pod needs no Kubernetes API access (no service
// account token): it reads etcd, writes the destination and reports its result as its termination message.
func backupPodSpec(c *etcdv1beta1.EtcdCluster, d etcdv1beta1.BackupDestination, kind string, o Options) *corev1ac.PodSpecApplyConfiguration {
	args := []string{"backup", "--cluster=" + c.Name, "--namespace=" + c.Namespace,
		"--endpoint=" + ClientEndpoint(c, o), "--kind=" + kind,
		fmt.Sprintf("--retention=%d", c.Spec.Backup.Retention)}
	args = append(args, destinationArgs(d)...)
	volumes, mounts := destinationVolumes(d, false)
	volumes = append(volumes, corev1ac.Volume().WithName("staging").WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	mounts = append(mounts, corev1ac.VolumeMount().WithName("staging").WithMountPath(stagingMountPath))
	args = append(args, "--staging-dir="+stagingMountPath)
	args, volumes, mounts = withClientTLS(c, args, volumes, mounts)
	return corev1ac.PodSpec().
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(restrictedPodSecurity()).
		WithVolumes(volumes...).
		WithContainers(corev1ac.Container().
			WithName(BackupContainerName).
			WithImage(o.OperatorImage).
			WithImagePullPolicy(corev1.PullIfNotPresent).
			WithArgs(args...).
			WithEnv(destinationEnv(d)...).
			WithVolumeMounts(mounts...).
			WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
			WithSecurityContext(restrictedContainerSecurity()))
}

func backupLabels(c *etcdv1beta1.EtcdCluster, kind, backupName string) map[string]string {
	l := Labels(c, ComponentBackup)
	l[LabelBackupKind] = kind
	l[LabelClusterUID] = string(c.UID)
	if backupName != "" {
		l[LabelBackupName] = backupName
	}
	return l
}

// BackupCronJob runs the operator image in backup mode on the cluster's schedule. Runs never overlap,
// so a slow snapshot cannot pile up copies of itself.
func BackupCronJob(c *etcdv1beta1.EtcdCluster, o Options) *batchv1ac.CronJobApplyConfiguration {
	d := BackupDestination(c, nil)
	labels := backupLabels(c, BackupKindScheduled, "")
	return batchv1ac.CronJob(BackupCronJobName(c), c.Namespace).
		WithLabels(Labels(c, ComponentBackup)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(batchv1ac.CronJobSpec().
			WithSchedule(string(c.Spec.BackupSchedule)).
			WithConcurrencyPolicy(batchv1.ForbidConcurrent).
			WithSuccessfulJobsHistoryLimit(3).
			WithFailedJobsHistoryLimit(3).
			WithJobTemplate(batchv1ac.JobTemplateSpec().
				WithLabels(labels).
				WithSpec(batchv1ac.JobSpec().
					// A retry is a fresh snapshot; a run never deletes anything until its own snapshot is stored.
					WithBackoffLimit(2).
					WithTemplate(corev1ac.PodTemplateSpec().
						WithLabels(labels).
						WithSpec(backupPodSpec(c, d, BackupKindScheduled, o))))))
}

// BackupJobName is the Job of an on-demand EtcdBackup (short enough for the job-name label).
func BackupJobName(b *etcdv1beta1.EtcdBackup) string {
	name := "etcdbackup-" + b.Name
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(b.Name))
	// A cut just after a dot would leave ".-", which no DNS subdomain (a Job name) may contain.
	return strings.TrimSuffix(name[:54], ".") + "-" + hex.EncodeToString(sum[:])[:8]
}

// BackupJob runs one on-demand backup for an EtcdBackup, with the same pod as the scheduled runs.
func BackupJob(c *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup, o Options) *batchv1ac.JobApplyConfiguration {
	d := BackupDestination(c, b.Spec.Destination)
	labels := backupLabels(c, BackupKindOnDemand, b.Name)
	return batchv1ac.Job(BackupJobName(b), b.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReferenceTo(b, "EtcdBackup")).
		WithSpec(batchv1ac.JobSpec().
			WithBackoffLimit(2).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(backupPodSpec(c, d, BackupKindOnDemand, o))))
}

// RestoreSource is a resolved spec.bootstrap.fromBackup: where the snapshot is and its key.
type RestoreSource struct {
	Destination etcdv1beta1.BackupDestination
	Key         string
	// Recovery names a quorum-loss recovery from this snapshot: the member's data of the lost cluster is
	// moved aside on its volume and the snapshot restored ("" for a new cluster's bootstrap).
	Recovery string
}

// restoreInitContainer restores the member's data directory from the snapshot before etcd first starts.
// It reads the same ETCD_* configuration as etcd, and restores only while the cluster bootstraps
// (ETCD_INITIAL_CLUSTER_STATE=new) and the data directory is empty: members added later join empty, and a
// restarted member keeps its data. A claim's snapshot is downloaded from the snapshot server, not mounted:
// mounting a ReadWriteOnce claim would hold every member to the claim's node.
func restoreInitContainer(c *etcdv1beta1.EtcdCluster, etcd *corev1ac.ContainerApplyConfiguration, src RestoreSource, o Options) (*corev1ac.ContainerApplyConfiguration, []*corev1ac.VolumeApplyConfiguration) {
	var volumes []*corev1ac.VolumeApplyConfiguration
	var mounts []*corev1ac.VolumeMountApplyConfiguration
	args := []string{"restore", "--key=" + src.Key}
	if ServedBySnapshotServer(&src) {
		args = append(args, "--pvc-claim="+src.Destination.PVC.ClaimName, "--snapshot-server="+SnapshotServerURL(c, o))
	} else {
		volumes, mounts = destinationVolumes(src.Destination, true)
		args = append(args, destinationArgs(src.Destination)...)
	}
	if src.Recovery != "" {
		args = append(args, RestoreRecoveryFlag+src.Recovery, RestoreTokenFlag+RestoreRecoveryToken(c, src.Recovery))
	}
	var env []*corev1ac.EnvVarApplyConfiguration
	for i := range etcd.Env {
		env = append(env, &etcd.Env[i])
	}
	env = append(env, destinationEnv(src.Destination)...)
	if ServedBySnapshotServer(&src) {
		env = append(env, snapshotTokenEnv(c))
	}
	var envFrom []*corev1ac.EnvFromSourceApplyConfiguration
	for i := range etcd.EnvFrom {
		envFrom = append(envFrom, &etcd.EnvFrom[i])
	}
	return corev1ac.Container().
		WithName(RestoreContainerName).
		WithImage(o.OperatorImage).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(args...).
		WithEnv(env...).
		WithEnvFrom(envFrom...).
		WithVolumeMounts(append([]*corev1ac.VolumeMountApplyConfiguration{
			corev1ac.VolumeMount().WithName(DataVolumeName).WithMountPath(DataMountPath)}, mounts...)...).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError).
		WithSecurityContext(restrictedContainerSecurity()), volumes
}

// RestoreFailure says why a member's restore init container failed, if one did: the error of the JSON result
// it writes as its termination message (cmd/backup.go), or the message as written (a log tail when it wrote
// none). The current termination decides when there is one: a restore that succeeded on a retry has not
// failed, whatever the attempt before it did. Otherwise the last one does, where a failure waits while the
// kubelet backs off or retries.
func RestoreFailure(pods []corev1.Pod) string {
	for i := range pods {
		for _, cs := range pods[i].Status.InitContainerStatuses {
			if cs.Name != RestoreContainerName {
				continue
			}
			if msg, failed := ContainerFailure(cs); failed {
				return fmt.Sprintf("member %s could not restore: %s", pods[i].Name, msg)
			}
		}
	}
	return ""
}

// ContainerFailure says why a container of the operator's image failed, if its current termination (or,
// while it waits to run again, its last one) failed: the error of the JSON result it writes as its
// termination message, or the message as written (a log tail when it wrote none).
func ContainerFailure(cs corev1.ContainerStatus) (string, bool) {
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil || t.ExitCode == 0 {
		return "", false
	}
	msg := strings.TrimSpace(t.Message)
	var res struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &res) == nil && res.Error != "" {
		msg = res.Error
	}
	return msg, true
}
