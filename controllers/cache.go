package controllers

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/internal/resources"
)

// WatchNamespaces parses WATCH_NAMESPACE: comma-separated namespaces, empty for all.
func WatchNamespaces(watchNamespace string) []string {
	var out []string
	for ns := range strings.SplitSeq(watchNamespace, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// CacheOptions restricts the manager's cache to the watched namespaces and, for every kind the operator
// manages, to objects carrying its managed-by label, so memory does not grow with unrelated Pods,
// ConfigMaps, Services or claims in the same namespaces.
func CacheOptions(watchNamespace string) cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.StatefulSet{}:           owned,
		&corev1.Service{}:               owned,
		&corev1.ConfigMap{}:             owned,
		&corev1.Pod{}:                   owned,
		&corev1.PersistentVolumeClaim{}: owned,
		&policyv1.PodDisruptionBudget{}: owned,
		&networkingv1.NetworkPolicy{}:   owned,
		// Jobs and CronJobs without their pod templates: the operator reads a backup Job's status and a
		// CronJob's metadata, never the template it wrote (applyIfChanged compares on a live read), and a
		// template is most of their size (~5 KiB per cluster).
		&batchv1.CronJob{}: {Label: owned.Label, Transform: withoutManagedFields(stripCronJobTemplate)},
		&batchv1.Job{}:     {Label: owned.Label, Transform: withoutManagedFields(stripJobTemplate)},
		// Only the operator's certificate Secrets: never the namespaces' other Secrets.
		&corev1.Secret{}: owned,
	},
		// managedFields are most of a cached object's size and only applyIfChanged needs them, from a
		// live read when an object changed (~10 MiB less held at 1,000 clusters; docs/benchmarks.md).
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if nss := WatchNamespaces(watchNamespace); len(nss) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range nss {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// withoutManagedFields applies strip after the default transform, which a transform of a kind's own replaces.
func withoutManagedFields(strip func(any)) toolscache.TransformFunc {
	managedFields := cache.TransformStripManagedFields()
	return func(obj any) (any, error) {
		obj, err := managedFields(obj)
		if err == nil {
			strip(obj)
		}
		return obj, err
	}
}

func stripJobTemplate(obj any) {
	if j, ok := obj.(*batchv1.Job); ok {
		j.Spec.Template = corev1.PodTemplateSpec{}
	}
}

func stripCronJobTemplate(obj any) {
	if cj, ok := obj.(*batchv1.CronJob); ok {
		cj.Spec.JobTemplate.Spec.Template = corev1.PodTemplateSpec{}
	}
}
