package controllers

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

func TestPodUpToDate(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35"}}
	o := resources.DefaultOptions()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "c-new"}}
	pod := func(rev string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: resources.Image(c, o)}}}}
	}
	unobserved := sts.DeepCopy()
	unobserved.Generation = 3
	for name, tc := range map[string]struct {
		pod       *corev1.Pod
		sts       *appsv1.StatefulSet
		revisions map[string]string
		want      bool
	}{
		"on the update revision":                         {pod("c-new"), sts, nil, true},
		"on a revision differing in placement only":      {pod("c-old"), sts, map[string]string{"c-old": "d1", "c-new": "d1"}, true},
		"on a revision differing in more":                {pod("c-old"), sts, map[string]string{"c-old": "d0", "c-new": "d1"}, false},
		"on a revision not found":                        {pod("c-old"), sts, map[string]string{"c-new": "d1"}, false},
		"the update revision not found":                  {pod("c-old"), sts, map[string]string{"c-old": "d1"}, false},
		"revisions that do not decode match nothing":     {pod("c-old"), sts, map[string]string{"c-old": "", "c-new": ""}, false},
		"before the StatefulSet controller observed it":  {pod("c-old"), unobserved, nil, true},
		"without a StatefulSet: by image":                {pod("c-old"), nil, nil, true},
		"without a revision reported: by image, another": {&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "x"}}}}, nil, nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := podUpToDate(tc.pod, c, tc.sts, o, tc.revisions); got != tc.want {
				t.Errorf("up to date: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRevisionDigests: the digests come from the cache; only a revision the cache lacks is read from the
// API server, and only the StatefulSet's own revisions count.
func TestRevisionDigests(t *testing.T) {
	scheme := testScheme(t)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "sts-uid", Generation: 1},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdateRevision: "c-new"}}
	revision := func(name string, owner types.UID, digest string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels:          resources.Labels(c, resources.ComponentEtcd),
			Annotations:     map[string]string{revisionDigestAnnotation: digest},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "c", UID: owner, Controller: ptr.To(true)}}}}
	}
	pod := func(rev string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.ControllerRevisionHashLabelKey: rev}}}
	}
	cached := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		revision("c-new", "sts-uid", "d1"), revision("c-old", "sts-uid", "d1"), revision("c-other", "old-sts-uid", "d1")).Build()
	live := &revisionReads{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(revision("c-late", "sts-uid", "d1")).Build()}
	r := &EtcdClusterReconciler{Client: cached, APIReader: live}

	got, err := r.revisionDigests(context.Background(), c, sts, []corev1.Pod{pod("c-new"), pod("c-old"), pod("c-other"), pod("c-late"), pod("c-gone")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"c-new": "d1", "c-old": "d1", "c-late": "d1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("digests (-want +got):\n%s", diff)
	}
	if n := live.n.Load(); n != 2 {
		t.Errorf("%d revisions read from the API server, want the 2 the cache lacks (c-late, c-gone)", n)
	}

	live.n.Store(0)
	if got, _ := r.revisionDigests(context.Background(), c, sts, []corev1.Pod{pod("c-new")}); got != nil || live.n.Load() != 0 {
		t.Errorf("every pod on the update revision: %v, %d live reads", got, live.n.Load())
	}
	unobserved := sts.DeepCopy()
	unobserved.Generation = 2
	if got, _ := r.revisionDigests(context.Background(), c, unobserved, []corev1.Pod{pod("c-old")}); got != nil || live.n.Load() != 0 {
		t.Errorf("a StatefulSet not observed yet: %v, %d live reads", got, live.n.Load())
	}
}

// StatefulSet revisions enter the cache as the digest of their template without placement, which the
// controller compares exactly as it would the revision read from the API server.
func TestCachedRevisions(t *testing.T) {
	var transform func(any) (any, error)
	for obj, by := range CacheOptions("").ByObject {
		if _, ok := obj.(*appsv1.ControllerRevision); ok {
			transform = by.Transform
			if by.Label == nil || !by.Label.Matches(labels.Set{resources.LabelManagedBy: resources.ManagedBy}) {
				t.Errorf("only the operator's StatefulSets' revisions are cached: %+v", by)
			}
		}
	}
	if transform == nil {
		t.Fatal("ControllerRevision: no transform")
	}
	tpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd:v3.5.35"}},
		Affinity: &corev1.Affinity{}}}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	if err != nil {
		t.Fatal(err)
	}
	live := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Labels: map[string]string{resources.LabelManagedBy: resources.ManagedBy},
		OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "c", Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: 3}
	cached := live.DeepCopy()
	if _, err := transform(cached); err != nil {
		t.Fatal(err)
	}
	if cached.Data.Raw != nil || cached.Revision != 3 || len(cached.OwnerReferences) != 1 || cached.Name != "c-1" {
		t.Errorf("cached revision: %+v", cached)
	}
	want, err := resources.RevisionDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := revisionDigest(cached); got != want || revisionDigest(live) != want {
		t.Errorf("digest of the cached revision %q, of the live one %q, want %q", got, revisionDigest(live), want)
	}
	broken := &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte("{")}}
	if _, err := transform(broken); err != nil || revisionDigest(broken) != "" {
		t.Errorf("a revision that does not decode: %v, digest %q", err, revisionDigest(broken))
	}
}

// revisionReads counts the ControllerRevisions read from the API server.
type revisionReads struct {
	client.Reader
	n atomic.Int64
}

func (r *revisionReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*appsv1.ControllerRevision); ok {
		r.n.Add(1)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// cacheWithoutRevisions is a cache that has not received any ControllerRevision yet.
type cacheWithoutRevisions struct{ client.Client }

func (c cacheWithoutRevisions) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*appsv1.ControllerRevisionList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

var _ = Describe("A member pod on a revision that differs only in placement", func() {
	It("is up to date, judged from the cache; one on a revision that differs in more is not", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, key(c.Namespace, resources.StatefulSetName(c)), sts)).To(Succeed())
		Expect(sts.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(2), "the default placement")

		// envtest runs no StatefulSet controller: the spec writes the revisions it would, and its status.
		revision := func(name string, tpl *corev1.PodTemplateSpec) string {
			t := map[string]any{}
			raw, err := json.Marshal(tpl)
			Expect(err).NotTo(HaveOccurred())
			Expect(json.Unmarshal(raw, &t)).To(Succeed())
			t["$patch"] = "replace"
			raw, err = json.Marshal(map[string]any{"spec": map[string]any{"template": t}})
			Expect(err).NotTo(HaveOccurred())
			cr := &appsv1.ControllerRevision{
				ObjectMeta: metav1.ObjectMeta{Name: sts.Name + "-" + name, Namespace: c.Namespace, Labels: tpl.Labels,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
				Data: runtime.RawExtension{Raw: raw}, Revision: 1,
			}
			Expect(k8sClient.Create(ctx, cr)).To(Succeed())
			return cr.Name
		}
		// The template an earlier release built: the node preference without spread constraints.
		earlier := sts.Spec.Template.DeepCopy()
		earlier.Spec.TopologySpreadConstraints = nil
		otherImage := sts.Spec.Template.DeepCopy()
		otherImage.Spec.Containers[0].Image = "gcr.io/etcd-development/etcd:v3.5.8"
		old, current, other := revision("old", earlier), revision("current", &sts.Spec.Template), revision("other", otherImage)
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 3, CurrentRevision: old, UpdateRevision: current}
		Expect(k8sClient.Status().Update(ctx, sts)).To(Succeed())

		for i, rev := range []string{old, current, other} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: resources.MemberName(c, i), Namespace: c.Namespace, Labels: resources.Labels(c, resources.ComponentEtcd)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: resources.Image(c, resources.DefaultOptions())}}},
			}
			pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		}

		reads := &revisionReads{Reader: k8sClient}
		r := &EtcdClusterReconciler{Client: mgrClient, Scheme: k8sClient.Scheme(), APIReader: reads, Options: resources.DefaultOptions()}
		outdated := func(r *EtcdClusterReconciler) func(g Gomega) []string {
			return func(g Gomega) []string {
				g.Expect(get(ctx, c)).To(Succeed())
				obs, err := r.observe(ctx, c)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(obs.statefulSet.Status.UpdateRevision).To(Equal(current), "the cache has the StatefulSet's status")
				return obs.outdatedPods
			}
		}
		Eventually(outdated(r), timeout, interval).Should(Equal([]string{resources.MemberName(c, 2)}))

		By("a cluster at rest reads no revision from the API server")
		reads.n.Store(0)
		Expect(outdated(r)(Default)).To(Equal([]string{resources.MemberName(c, 2)}))
		Expect(reads.n.Load()).To(BeZero())
		cached := &appsv1.ControllerRevision{}
		Expect(mgrClient.Get(ctx, key(c.Namespace, old), cached)).To(Succeed())
		Expect(cached.Data.Raw).To(BeNil(), "the cache holds a digest, not the template")
		Expect(cached.Annotations[revisionDigestAnnotation]).NotTo(BeEmpty())

		By("a revision the cache does not hold yet is read from the API server, never taken as outdated")
		behind := &EtcdClusterReconciler{Client: cacheWithoutRevisions{mgrClient}, Scheme: k8sClient.Scheme(), APIReader: reads,
			Options: resources.DefaultOptions()}
		Expect(outdated(behind)(Default)).To(Equal([]string{resources.MemberName(c, 2)}))
		Expect(reads.n.Load()).To(BeNumerically(">", 0))
	})
})
