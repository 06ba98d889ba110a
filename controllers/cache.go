package controllers

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/internal/watchnamespace"
)

// CacheOptions restricts the manager's cache to the watched namespaces and, for every kind the operator
// manages, to objects carrying its managed-by label, so memory does not grow with unrelated Pods,
// ConfigMaps, Services or claims in the same namespaces.
func CacheOptions(watchNamespace string) cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		// Member pod specs, the StatefulSet's template and each pod's, keep only what the operator reads
		// of them (readMemberPodSpec); the rest is about half of a template's size.
		&appsv1.StatefulSet{}:           {Label: owned.Label, Transform: withoutManagedFields(trimStatefulSetTemplate)},
		&corev1.Pod{}:                   {Label: owned.Label, Transform: withoutManagedFields(trimPodSpec)},
		&corev1.ConfigMap{}:             owned,
		&corev1.PersistentVolumeClaim{}: owned,
		// Metadata only (metadataOnlyKinds): the same selector applies to their metadata informers.
		&corev1.Service{}:               owned,
		&policyv1.PodDisruptionBudget{}: owned,
		&networkingv1.NetworkPolicy{}:   owned,
		&batchv1.CronJob{}:              owned,
		// Jobs without their pod templates: the operator reads a backup Job's status, never the template
		// it wrote, and a template is most of a Job's size.
		&batchv1.Job{}: {Label: owned.Label, Transform: withoutManagedFields(stripJobTemplate)},
		// Only the operator's certificate Secrets: never the namespaces' other Secrets.
		&corev1.Secret{}: owned,
		// The StatefulSets' revisions (labelled with the member template's labels) as digests of their pod
		// templates without placement: all podUpToDate compares (digestRevision).
		&appsv1.ControllerRevision{}: {Label: owned.Label, Transform: withoutManagedFields(digestRevision)},
		// Every node (members run on any), reduced to its zone label and readiness (trimNode).
		&corev1.Node{}: {Transform: withoutManagedFields(trimNode)},
	},
		// managedFields are most of a cached object's size and only applyIfChanged needs them, from a
		// live read when an object changed (~10 MiB less held at 1,000 clusters; docs/benchmarks.md).
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if nss := watchnamespace.Parse(watchNamespace); len(nss) > 0 {
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

// metadataOnlyKinds are the kinds the operator writes but reads no further than their metadata: it applies
// them whole and compares on a live read (applyIfChanged), so their watches and cache hold metadata only
// (name, resource version, labels, owner references) and still report every change.
var metadataOnlyKinds = []client.Object{&corev1.Service{}, &policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}, &batchv1.CronJob{}}

// cachedForm is what to read an object of obj's kind into from the cache: its metadata alone for a
// metadataOnlyKinds kind (a typed read would start a second, full watch of the kind), obj otherwise.
func cachedForm(obj client.Object, scheme *runtime.Scheme) (client.Object, error) {
	for _, kind := range metadataOnlyKinds {
		if reflect.TypeOf(kind) != reflect.TypeOf(obj) {
			continue
		}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return nil, err
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m, nil
	}
	return obj, nil
}

// readMemberPodSpec is what the operator reads of a member pod spec, from the StatefulSet's template or a
// member pod: each container's name, image, environment, arguments and probes (the member gate and its
// marks, the restore step's recovery, the etcd image, the advertised URLs and the probe settings), and the
// node a pod is bound to (nodes.go). Everything else of a cached spec is dropped. The operator never writes a
// cached object back: it applies the objects it builds and compares them on a live read (applyIfChanged).
func readMemberPodSpec(spec corev1.PodSpec) corev1.PodSpec {
	keep := func(cs []corev1.Container) []corev1.Container {
		if cs == nil {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Image: c.Image, Env: c.Env, Args: c.Args,
				StartupProbe: c.StartupProbe, LivenessProbe: c.LivenessProbe, ReadinessProbe: c.ReadinessProbe}
		}
		return out
	}
	return corev1.PodSpec{InitContainers: keep(spec.InitContainers), Containers: keep(spec.Containers), NodeName: spec.NodeName}
}

func trimStatefulSetTemplate(obj any) {
	if sts, ok := obj.(*appsv1.StatefulSet); ok {
		sts.Spec.Template.Spec = readMemberPodSpec(sts.Spec.Template.Spec)
	}
}

// trimPodSpec keeps what readMemberPodSpec keeps, and the node the pod runs on (failure tolerance).
func trimPodSpec(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		node := p.Spec.NodeName
		p.Spec = readMemberPodSpec(p.Spec)
		p.Spec.NodeName = node
	}
}
