package controllers

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Backup Jobs and CronJobs enter the cache without their pod templates and managed fields, and with the
// metadata and status the operator reads.
func TestCacheStripsJobTemplates(t *testing.T) {
	transforms := map[string]toolscache.TransformFunc{}
	for obj, by := range CacheOptions("").ByObject {
		switch obj.(type) {
		case *batchv1.Job:
			transforms["Job"] = by.Transform
		case *batchv1.CronJob:
			transforms["CronJob"] = by.Transform
		}
	}
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "backup", Image: "etcd"}}}}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-operator"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner}}}
	}
	job := &batchv1.Job{ObjectMeta: meta(), Spec: batchv1.JobSpec{Template: template},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	cronJob := &batchv1.CronJob{ObjectMeta: meta(), Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *",
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}}

	for kind, obj := range map[string]metav1.Object{"Job": job, "CronJob": cronJob} {
		tr := transforms[kind]
		if tr == nil {
			t.Fatalf("%s: no transform", kind)
		}
		if _, err := tr(obj); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if obj.GetManagedFields() != nil || obj.GetLabels()["app.kubernetes.io/managed-by"] != "etcd-operator" {
			t.Fatalf("%s metadata after the transform: %+v", kind, obj)
		}
	}
	if len(job.Spec.Template.Spec.Containers) != 0 || len(job.Status.Conditions) != 1 {
		t.Fatalf("cached Job: %+v", job)
	}
	if len(cronJob.Spec.JobTemplate.Spec.Template.Spec.Containers) != 0 || cronJob.Spec.Schedule != "0 2 * * *" {
		t.Fatalf("cached CronJob: %+v", cronJob)
	}
}
