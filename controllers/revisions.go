package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// The StatefulSet controller's revisions of the member template: podUpToDate compares them (a pod whose
// revision differs from the update revision only in placement is up to date).
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch

// revisionDigestAnnotation holds, on a ControllerRevision in the operator's cache only, the digest of its
// pod template without placement (resources.RevisionDigest), in place of the template itself: a revision
// holds a whole member template, and the cache keeps every revision of every cluster.
const revisionDigestAnnotation = "etcd.seedops.io/template-digest"

// digestRevision replaces a cached ControllerRevision's data with its digest (revisionDigestAnnotation); a
// revision that does not decode gets none, and then matches no other.
func digestRevision(obj any) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	digest, _ := resources.RevisionDigest(cr.Data.Raw)
	cr.Annotations = map[string]string{revisionDigestAnnotation: digest}
	cr.Data.Raw, cr.Data.Object = nil, nil
}

// revisionDigest is the digest of cr's template without placement, from the cache's annotation or, for a
// revision read from the API server, from its data; "" when there is none.
func revisionDigest(cr *appsv1.ControllerRevision) string {
	if cr.Data.Raw == nil {
		return cr.Annotations[revisionDigestAnnotation]
	}
	digest, _ := resources.RevisionDigest(cr.Data.Raw)
	return digest
}

// revisionDigests reads, for the pods that do not run the StatefulSet's update revision, the digests of
// their revisions and of the update revision, by revision name. They come from the cache; a revision the
// cache does not hold (one created moments ago, whose event is still on its way) is read from the API
// server, so that a cache behind never makes a pod look outdated and restarts it. A cluster at rest reads
// nothing live.
func (r *EtcdClusterReconciler) revisionDigests(ctx context.Context, c *etcdv1beta1.EtcdCluster, sts *appsv1.StatefulSet,
	pods []corev1.Pod) (map[string]string, error) {
	if !revisionKnown(sts) {
		return nil, nil
	}
	wanted := map[string]bool{}
	for i := range pods {
		if rev := pods[i].Labels[appsv1.ControllerRevisionHashLabelKey]; rev != "" && rev != sts.Status.UpdateRevision {
			wanted[rev] = true
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	wanted[sts.Status.UpdateRevision] = true
	revisions := &appsv1.ControllerRevisionList{}
	if err := r.List(ctx, revisions, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, err
	}
	digests, cached := map[string]string{}, map[string]bool{}
	for i := range revisions.Items {
		cr := &revisions.Items[i]
		cached[cr.Name] = true
		// Another StatefulSet's revision (one deleted and created again, before its revisions are adopted)
		// is not this one's template.
		if wanted[cr.Name] && metav1.IsControlledBy(cr, sts) {
			digests[cr.Name] = revisionDigest(cr)
		}
	}
	for name := range wanted {
		if cached[name] {
			continue
		}
		cr := &appsv1.ControllerRevision{}
		switch err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, cr); {
		case err == nil && metav1.IsControlledBy(cr, sts):
			digests[name] = revisionDigest(cr)
		case err != nil && !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return digests, nil
}

// revisionKnown: the StatefulSet controller has reported the update revision of the StatefulSet's current
// generation.
func revisionKnown(sts *appsv1.StatefulSet) bool {
	return sts != nil && sts.Status.UpdateRevision != "" && sts.Status.ObservedGeneration == sts.Generation
}
