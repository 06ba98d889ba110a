package controllers

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// The managed objects of a cluster, one phase each, all in one pattern: build the desired object with a
// pure builder (internal/resources), apply it with applyIfChanged (a no-op when nothing the operator owns
// differs), record what changed for the reconcile's Applied event, and delete the owned object once its
// feature is turned off (deleteOwned).

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

func (r *EtcdClusterReconciler) reconcileConfigMap(ctx context.Context, s *reconcileScope) error {
	c, cfg := s.cluster, s.decision.Config
	if cfg == nil {
		return nil // etcd unreachable after formation: keep what members were started with
	}
	if err := r.confirmForcing(ctx, c, s.obs.forcing, cfg.ForceNewCluster); err != nil {
		return err
	}
	if err := r.keepRecordedFallback(ctx, c, cfg, s.obs.restoring); err != nil {
		return err
	}
	desired := resources.ConfigMap(c, memberConfig(c, cfg, s.obs.urls))
	changed, err := applyIfChanged(ctx, r.objects(), &corev1.ConfigMap{}, desired, corev1ac.ExtractConfigMap)
	s.applied.add(ctx, changed, "ConfigMap", resources.ConfigMapName(c))
	// Announced by the write that records it: a reconcile planned from a cache that lags that write
	// decides it again, and writes nothing.
	if why := newFallback(s.obs.restoring, cfg.Restore); err == nil && changed && why != "" {
		// More writes are lost than the continuous backup would have lost: a warning a human should read.
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, ReasonRecoveryFallback, "QuorumRecovery",
			"restoring the newest full backup %s (revision %d), not the continuous backup: %s", cfg.Restore.Location, cfg.Restore.Revision, why)
	}
	return err
}

// keepRecordedFallback: a recovery's fallback to the newest full backup, once recorded, is its decision.
// Planned from a cache that lags that write, a later reconcile decides it again, possibly for another
// reason (the replay's report arriving after the wait for it ended): the record the API server holds stays,
// and this reconcile carries it on.
func (r *EtcdClusterReconciler) keepRecordedFallback(ctx context.Context, c *etcdv1beta1.EtcdCluster, cfg *membership.Config, cached *membership.RestoreRecovery) error {
	if newFallback(cached, cfg.Restore) == "" {
		return nil
	}
	cm := &corev1.ConfigMap{}
	switch err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ConfigMapName(c)}, cm); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the members' configuration before recording a fallback: %w", err)
	}
	if live := resources.RestoreRecoveryOf(cm.Data); live != nil && live.ID == cfg.Restore.ID && live.Fallback != "" {
		cfg.Restore = live
	}
	return nil
}

// confirmForcing checks a forced start's instruction against the configuration the API server holds
// before writing it: it is written ahead of the step it is for (the named member's pod deleted in the same
// reconcile), and that pod's gate reads it once, when it starts. Planned from a cache that lags an earlier
// write, it could name a second member while the first is being forced, or bring back an instruction
// already ended: two one-member clusters. Then the reconcile stops and plans again.
func (r *EtcdClusterReconciler) confirmForcing(ctx context.Context, c *etcdv1beta1.EtcdCluster, cached, writing *membership.ForceNewCluster) error {
	if writing == nil {
		return nil
	}
	cm := &corev1.ConfigMap{}
	var live *membership.ForceNewCluster
	switch err := r.liveReader().Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ConfigMapName(c)}, cm); {
	case err == nil:
		live = resources.ForceNewClusterOf(cm.Data)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("read the members' configuration before a forced start: %w", err)
	}
	if (live == nil) != (cached == nil) || live != nil && *live != *cached {
		return fmt.Errorf("the members' configuration forces %s, not %s as this reconcile planned from: planning again", describeForcing(live), describeForcing(cached))
	}
	return nil
}

func describeForcing(f *membership.ForceNewCluster) string {
	if f == nil {
		return "no member"
	}
	return fmt.Sprintf("%s (old pod %q)", f.Member, f.OldPod)
}

func (r *EtcdClusterReconciler) reconcileServices(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	for _, desired := range []*corev1ac.ServiceApplyConfiguration{resources.PeerService(c), resources.ClientService(c)} {
		changed, err := applyIfChanged(ctx, r.objects(), &corev1.Service{}, desired, corev1ac.ExtractService)
		if err != nil {
			return err
		}
		s.applied.add(ctx, changed, "Service", *desired.Name)
	}
	return nil
}

func (r *EtcdClusterReconciler) reconcileStatefulSet(ctx context.Context, s *reconcileScope) error {
	c, obs := s.cluster, s.obs
	if obs.statefulSet == nil && obs.restoreWait != "" {
		return nil // a restored cluster starts only once its snapshot can be read; status says why
	}
	current, err := r.statefulSet(ctx, c)
	if err != nil {
		return err
	}
	existing := current
	if existing == nil {
		existing = &appsv1.StatefulSet{}
	}
	gate := memberGate(current, obs.pods, resources.Image(c, obs.options), obs.options)
	if s.recoveryRecord() != nil {
		// Every member restarts for the restore anyway, and only the current gate leaves the lost
		// cluster's data to the restore step.
		gate = resources.CurrentMemberGate(obs.options)
	}
	// With spec.tls.issuerRef, the template carries the trust bundle the members are to load (trustbundle.go).
	desired := resources.WithTrustBundle(resources.StatefulSet(c, int32(s.decision.Replicas), obs.options, s.templateRestore(), gate),
		obs.tls.trustDigest)
	if current != nil && !volumeClaimTemplatesMatch(existing, c) {
		// Volume claim templates are immutable: grow the existing claims in place, then replace the
		// StatefulSet without deleting its pods (orphan), so new members get the new size too.
		if err := r.growVolumeClaims(ctx, c); err != nil {
			return err
		}
		orphan := client.PropagationPolicy("Orphan")
		if err := r.Delete(ctx, existing, orphan, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace StatefulSet %s for new volume size: %w", existing.Name, err)
		}
		r.Recorder.Eventf(c, existing, corev1.EventTypeNormal, ReasonStatefulSetRecreated, "Replace",
			"StatefulSet %s recreated (pods kept) for volume size %s", existing.Name, c.Spec.StorageSize.String())
		// The deletion event brings us back once the old object is gone.
		return nil
	}
	if !existing.DeletionTimestamp.IsZero() {
		return nil // being replaced; its deletion event brings us back
	}
	changed, err := applyIfChanged(ctx, r.objects(), existing, desired, extractStatefulSet)
	s.applied.add(ctx, changed, "StatefulSet", resources.StatefulSetName(c))
	if changed {
		failpoint.Inject(failpoint.AfterStatefulSetApply)
	}
	return err
}

// extractStatefulSet returns the fields this operator owns. Claim templates are an atomic list, so they
// come back whole, with the status the API server fills in; that status is never ours to compare.
func extractStatefulSet(sts *appsv1.StatefulSet, fieldManager string) (*appsv1ac.StatefulSetApplyConfiguration, error) {
	ac, err := appsv1ac.ExtractStatefulSet(sts, fieldManager)
	if err != nil || ac.Spec == nil {
		return ac, err
	}
	for i := range ac.Spec.VolumeClaimTemplates {
		ac.Spec.VolumeClaimTemplates[i].Status = nil
	}
	return ac, nil
}

// volumeClaimTemplatesMatch reports whether the StatefulSet's data claim template has the spec's size.
func volumeClaimTemplatesMatch(sts *appsv1.StatefulSet, c *etcdv1beta1.EtcdCluster) bool {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == resources.DataVolumeName {
			size := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return size.Cmp(c.Spec.StorageSize) == 0
		}
	}
	return false
}

// growVolumeClaims raises the storage request of every member claim smaller than storageSize. The
// storage class must allow expansion; if it does not, the API server refuses and status says so.
func (r *EtcdClusterReconciler) growVolumeClaims(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.Cmp(c.Spec.StorageSize) >= 0 {
			continue
		}
		ac := corev1ac.PersistentVolumeClaim(pvc.Name, pvc.Namespace).
			WithSpec(corev1ac.PersistentVolumeClaimSpec().WithResources(corev1ac.VolumeResourceRequirements().
				WithRequests(corev1.ResourceList{corev1.ResourceStorage: c.Spec.StorageSize})))
		if err := r.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("grow volume claim %s to %s: %w", pvc.Name, c.Spec.StorageSize.String(), err)
		}
		r.Recorder.Eventf(c, pvc, corev1.EventTypeNormal, ReasonStorageResized, "Resize",
			"volume claim %s grown from %s to %s", pvc.Name, size.String(), c.Spec.StorageSize.String())
	}
	return nil
}

func (r *EtcdClusterReconciler) reconcilePodDisruptionBudget(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	desired := resources.PodDisruptionBudget(c, s.obs.voters(c))
	changed, err := applyIfChanged(ctx, r.objects(), &policyv1.PodDisruptionBudget{}, desired, policyv1ac.ExtractPodDisruptionBudget)
	s.applied.add(ctx, changed, "PodDisruptionBudget", resources.PDBName(c))
	return err
}

func (r *EtcdClusterReconciler) reconcileBackupCronJob(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	if c.Spec.BackupSchedule == "" {
		return r.deleteOwned(ctx, c, &batchv1.CronJob{}, resources.BackupCronJobName(c), "backup CronJob", "backupSchedule cleared")
	}
	desired := resources.BackupCronJob(c, s.obs.options)
	changed, err := applyIfChanged(ctx, r.objects(), &batchv1.CronJob{}, desired, batchv1ac.ExtractCronJob)
	s.applied.add(ctx, changed, "CronJob", resources.BackupCronJobName(c))
	return err
}

// reconcileNetworkPolicy applies the cluster's NetworkPolicy while spec.networkPolicy.enabled, and deletes
// the one it created once it is turned off.
func (r *EtcdClusterReconciler) reconcileNetworkPolicy(ctx context.Context, s *reconcileScope) error {
	c := s.cluster
	if c.Spec.NetworkPolicy.Enabled {
		changed, err := applyIfChanged(ctx, r.objects(), &networkingv1.NetworkPolicy{}, resources.NetworkPolicy(c, s.obs.options), networkingv1ac.ExtractNetworkPolicy)
		s.applied.add(ctx, changed, "NetworkPolicy", resources.NetworkPolicyName(c))
		return err
	}
	return r.deleteOwned(ctx, c, &networkingv1.NetworkPolicy{}, resources.NetworkPolicyName(c), "NetworkPolicy", "spec.networkPolicy.enabled is false")
}

// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors;prometheusrules,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=delete

// reconcilePodMonitor applies the cluster's PodMonitor where the API server serves prometheus-operator's
// PodMonitor kind (r.podMonitors, found when the controller starts); elsewhere the members' metrics are
// still there to scrape, and nothing else changes.
func (r *EtcdClusterReconciler) reconcilePodMonitor(ctx context.Context, s *reconcileScope) error {
	if r.podMonitors == nil {
		return nil
	}
	if err := r.applyMonitoringObject(ctx, s, r.podMonitors, resources.PodMonitor(s.cluster)); err != nil {
		return err
	}
	// The continuous backup agent's, while it runs.
	agent := resources.ContinuousBackupPodMonitor(s.cluster)
	if continuousEnabled(s.cluster) {
		return r.applyMonitoringObject(ctx, s, r.podMonitors, agent)
	}
	return r.deleteMonitoringObject(ctx, s.cluster, r.podMonitors, agent, "spec.backup.continuous.enabled is false")
}

// deleteMonitoringObject deletes the cluster's prometheus-operator object like obj (its kind and name), found
// in reader's metadata cache, when the cluster controls it; a kind no longer served is not an error.
func (r *EtcdClusterReconciler) deleteMonitoringObject(ctx context.Context, c *etcdv1beta1.EtcdCluster, reader client.Reader, obj *unstructured.Unstructured, why string) error {
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(obj.GroupVersionKind())
	err := reader.Get(ctx, client.ObjectKeyFromObject(obj), cached)
	if err == nil && metav1.IsControlledBy(cached, c) {
		uid := cached.GetUID()
		r.unchanged.forget(obj.GetKind() + "/" + client.ObjectKeyFromObject(obj).String())
		if err = r.Delete(ctx, cached, client.Preconditions{UID: &uid}); err == nil {
			r.Recorder.Eventf(c, cached, corev1.EventTypeNormal, ReasonDeleted, "Delete", "%s %s deleted: %s", obj.GetKind(), obj.GetName(), why)
		}
	}
	if err == nil || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	return fmt.Errorf("delete %s %s: %w", obj.GetKind(), obj.GetName(), err)
}

// reconcilePrometheusRule applies the cluster's alerting rules (config/prometheus/alerts.yaml, confined to
// this cluster) where the API server serves prometheus-operator's PrometheusRule kind.
func (r *EtcdClusterReconciler) reconcilePrometheusRule(ctx context.Context, s *reconcileScope) error {
	if r.prometheusRules == nil {
		return nil
	}
	return r.applyMonitoringObject(ctx, s, r.prometheusRules, resources.PrometheusRule(s.cluster, r.alertRuleGroups))
}

// applyMonitoringObject applies one of prometheus-operator's objects. Its kind is cached as metadata only
// (reader): a PrometheusRule holds every alerting rule, about 14 KB a cluster. The object is read live, and
// compared with what the operator sets (not as a whole, so fields the API server defaults cause no write),
// only when its resourceVersion moved since it was last found as desired. A kind removed since the operator
// started is not an error.
func (r *EtcdClusterReconciler) applyMonitoringObject(ctx context.Context, s *reconcileScope, reader client.Reader, desired *unstructured.Unstructured) error {
	kind, key := desired.GetKind(), client.ObjectKeyFromObject(desired)
	memoryKey := kind + "/" + key.String()
	hash, hashErr := hashOf(desired.Object)
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(desired.GroupVersionKind())
	err := reader.Get(ctx, key, cached)
	if err == nil {
		if hashErr == nil && r.unchanged.is(memoryKey, cached.ResourceVersion, hash) {
			return nil
		}
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(desired.GroupVersionKind())
		if err = r.liveReader().Get(ctx, key, existing); err == nil && holds(existing.Object, desired.Object) {
			if hashErr == nil {
				r.unchanged.set(memoryKey, existing.GetResourceVersion(), hash)
			}
			return nil
		}
	}
	if err == nil || apierrors.IsNotFound(err) {
		r.unchanged.forget(memoryKey)
		err = r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership)
	}
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		// prometheus-operator's CRD was removed since the operator started (an apply creates what is
		// missing, so NotFound means the kind itself is gone): nothing to keep.
		log.FromContext(ctx).V(1).Info("kind no longer served; not creating the object", "kind", kind, "name", desired.GetName())
		return nil
	case err != nil:
		return fmt.Errorf("%s %s: %w", kind, desired.GetName(), err)
	}
	// The apply answered with the object as it now is: exactly the desired fields are ours at its version.
	if rv := desired.GetResourceVersion(); rv != "" && hashErr == nil {
		r.unchanged.set(memoryKey, rv, hash)
	}
	s.applied.add(ctx, true, kind, desired.GetName())
	return nil
}

// holds reports whether have has every field of want with the same value: maps may hold more keys, lists
// must match element by element.
func holds(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if hv, ok := h[k]; !ok || !holds(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !holds(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}
