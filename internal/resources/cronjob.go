package resources

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// BackupCronJob runs the operator image in backup mode on the cluster's schedule. Runs never overlap,
// so a slow snapshot cannot pile up copies of itself.
func BackupCronJob(c *etcdv1alpha1.EtcdCluster, o Options) *batchv1ac.CronJobApplyConfiguration {
	pod := corev1ac.PodSpec().
		WithRestartPolicy(corev1.RestartPolicyNever).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(etcdUID).
			WithRunAsGroup(etcdUID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(corev1ac.Container().
			WithName("backup").
			WithImage(o.OperatorImage).
			WithImagePullPolicy(corev1.PullIfNotPresent).
			WithArgs("backup", "--cluster="+c.Name, "--namespace="+c.Namespace, "--endpoints="+ClientEndpoint(c, o)).
			WithSecurityContext(corev1ac.SecurityContext().
				WithAllowPrivilegeEscalation(false).
				WithReadOnlyRootFilesystem(true).
				WithRunAsNonRoot(true).
				WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))))
	return batchv1ac.CronJob(BackupCronJobName(c), c.Namespace).
		WithLabels(Labels(c, ComponentBackup)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(batchv1ac.CronJobSpec().
			WithSchedule(c.Spec.BackupSchedule).
			WithConcurrencyPolicy(batchv1.ForbidConcurrent).
			WithSuccessfulJobsHistoryLimit(3).
			WithFailedJobsHistoryLimit(3).
			WithJobTemplate(batchv1ac.JobTemplateSpec().
				WithLabels(Labels(c, ComponentBackup)).
				WithSpec(batchv1ac.JobSpec().
					WithBackoffLimit(2).
					WithTemplate(corev1ac.PodTemplateSpec().
						WithLabels(Labels(c, ComponentBackup)).
						WithSpec(pod)))))
}
