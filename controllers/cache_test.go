package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Backup Jobs enter the cache without their pod templates and managed fields, and with the metadata and
// status the operator reads.
func TestCacheStripsJobTemplates(t *testing.T) {
	var transform toolscache.TransformFunc
	for obj, by := range CacheOptions("").ByObject {
		if _, ok := obj.(*batchv1.Job); ok {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("Job: no transform")
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-operator"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner}}},
		Spec:   batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "backup", Image: "etcd"}}}}},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	if _, err := transform(job); err != nil {
		t.Fatal(err)
	}
	if job.GetManagedFields() != nil || job.GetLabels()["app.kubernetes.io/managed-by"] != "etcd-operator" {
		t.Fatalf("Job metadata after the transform: %+v", job.ObjectMeta)
	}
	if len(job.Spec.Template.Spec.Containers) != 0 || len(job.Status.Conditions) != 1 {
		t.Fatalf("cached Job: %+v", job)
	}
}

// The kinds the operator only writes are read from the cache as metadata (a typed read would start a
// full watch beside the metadata one); every other kind is read as itself.
func TestCachedForm(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for obj, want := range map[client.Object]string{
		&corev1.Service{}: "/v1, Kind=Service", &policyv1.PodDisruptionBudget{}: "policy/v1, Kind=PodDisruptionBudget",
		&networkingv1.NetworkPolicy{}: "networking.k8s.io/v1, Kind=NetworkPolicy", &batchv1.CronJob{}: "batch/v1, Kind=CronJob",
	} {
		got, err := cachedForm(obj, s)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := got.(*metav1.PartialObjectMetadata)
		if !ok || m.GroupVersionKind().String() != want {
			t.Errorf("%T: read as %T %v, want metadata of %s", obj, got, got.GetObjectKind().GroupVersionKind(), want)
		}
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Secret{}, &corev1.ConfigMap{}, &batchv1.Job{}} {
		if got, err := cachedForm(obj, s); err != nil || got != obj {
			t.Errorf("%T: read as %T (%v), want itself", obj, got, err)
		}
	}
}

// Member pod specs (the StatefulSet's template, each member pod's) enter the cache with what the operator
// reads of them (a pod's node too), and without the rest; the StatefulSet keeps its claim templates and status.
func TestCacheTrimsMemberPodSpecs(t *testing.T) {
	transforms := map[string]toolscache.TransformFunc{}
	for obj, by := range CacheOptions("").ByObject {
		switch obj.(type) {
		case *appsv1.StatefulSet:
			transforms["StatefulSet"] = by.Transform
		case *corev1.Pod:
			transforms["Pod"] = by.Transform
		}
	}
	probe := &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 3}
	env := []corev1.EnvVar{{Name: "ETCD_INITIAL_ADVERTISE_PEER_URLS", Value: "https://c-0.c.ns.svc.cluster.local:2380"}}
	spec := func() corev1.PodSpec {
		return corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "member-gate", Image: "operator", Args: []string{"member-gate"}, Env: env,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}}}},
			Containers: []corev1.Container{{Name: "etcd", Image: "etcd:v3.5.35", Env: env, Command: []string{"etcd"},
				StartupProbe: probe, ReadinessProbe: probe, LivenessProbe: probe,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
			Volumes:  []corev1.Volume{{Name: "tls"}},
			NodeName: "node-1",
		}
	}
	want := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "member-gate", Image: "operator", Args: []string{"member-gate"}, Env: env}},
		Containers:     []corev1.Container{{Name: "etcd", Image: "etcd:v3.5.35", Env: env, StartupProbe: probe, LivenessProbe: probe, ReadinessProbe: probe}},
		NodeName:       "node-1",
	}
	meta := metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-operator"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldOwner}}}
	sts := &appsv1.StatefulSet{ObjectMeta: *meta.DeepCopy(), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
		Template:             corev1.PodTemplateSpec{Spec: spec()},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}},
		Status: appsv1.StatefulSetStatus{UpdateRevision: "c-1"}}
	pod := &corev1.Pod{ObjectMeta: *meta.DeepCopy(), Spec: spec(), Status: corev1.PodStatus{PodIP: "10.0.0.1"}}

	for kind, obj := range map[string]metav1.Object{"StatefulSet": sts, "Pod": pod} {
		if transforms[kind] == nil {
			t.Fatalf("%s: no transform", kind)
		}
		if _, err := transforms[kind](obj); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if obj.GetManagedFields() != nil || obj.GetLabels()["app.kubernetes.io/managed-by"] != "etcd-operator" {
			t.Fatalf("%s metadata after the transform: %+v", kind, obj)
		}
	}
	if diff := cmp.Diff(want, sts.Spec.Template.Spec); diff != "" {
		t.Errorf("cached template (-want +got):\n%s", diff)
	}
	// A pod keeps the node it runs on too (failure tolerance).
	want.NodeName = "node-1"
	if diff := cmp.Diff(want, pod.Spec); diff != "" {
		t.Errorf("cached pod spec (-want +got):\n%s", diff)
	}
	if *sts.Spec.Replicas != 3 || len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Status.UpdateRevision != "c-1" || pod.Status.PodIP != "10.0.0.1" {
		t.Errorf("cached StatefulSet or pod lost what the operator reads: %+v %+v", sts, pod.Status)
	}
	// What the operator derives from a member pod spec is the same from the trimmed one.
	if !hasMemberGate(&sts.Spec.Template.Spec) || advertisedDomain(&sts.Spec.Template.Spec) != "cluster.local" || podImage(pod) != "etcd:v3.5.35" {
		t.Errorf("derived from the trimmed spec: gate %v, domain %q, image %q", hasMemberGate(&sts.Spec.Template.Spec),
			advertisedDomain(&sts.Spec.Template.Spec), podImage(pod))
	}
}
