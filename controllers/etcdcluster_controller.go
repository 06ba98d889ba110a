// Package controllers holds the EtcdCluster controller.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	alertrules "github.com/seedops/etcd-operator/config/prometheus"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// EtcdClusterReconciler turns an EtcdCluster into a StatefulSet of etcd members and everything around it.
//
// No finalizer: every managed object carries an owner reference, so the garbage collector removes it
// with the cluster, and member volumes follow the StatefulSet's retention policy. Deletion needs no work
// of ours, and a finalizer would only risk clusters stuck in Terminating while the operator is down.
type EtcdClusterReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// APIReader reads what the cache does not hold: a user-supplied CA Secret, and the managedFields the
	// cache strips (applyIfChanged); nil uses the client.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Options   resources.Options
	// Dialer connects to etcd.
	Dialer etcd.Dialer
	// URLs resolves members to the URLs the operator dials and registers (DNS names in a cluster;
	// local ports in tests). Nil means the stable DNS names.
	URLs MemberURLs
	// HealAfter is how long a member may stay unhealthy before it is replaced (default 3m).
	HealAfter time.Duration
	// HealthInterval is how often a cluster at rest is re-checked (default 30s).
	HealthInterval time.Duration
	// StepInterval is the short backoff while an operation is in flight (default 2s).
	StepInterval time.Duration
	// MaxConcurrentReconciles is how many clusters are reconciled at once (default 1); a cluster is
	// never reconciled twice at the same time.
	MaxConcurrentReconciles int
	// Clock tells the time (heal clocks, condition times, certificate renewal); nil is the real clock.
	Clock clock.PassiveClock
	// AgentStatusURL is where a continuous backup agent's pod serves its report; nil is the pod's IP.
	AgentStatusURL func(*corev1.Pod) string

	// reported remembers the condition transitions already reported in events (transitions.go); nil
	// reports every transition.
	reported *conditionMemory
	// unchanged remembers the managed objects last found as desired (apply.go); nil remembers none.
	unchanged *noopCache
	// recoveries remembers the NOSPACE recoveries under way (space.go).
	recoveries recoveryMemory
	// agentAnswers remembers each cluster's last answer from its continuous backup agent (continuous.go).
	agentAnswers agentMemory
	// metrics holds the clusters' series the manager's metrics endpoint serves (metrics.go); nil exports none.
	metrics *clusterCollector
	// podMonitors reads PodMonitors from the manager's cache where the API server serves the kind when the
	// controller starts; nil where it does not, and then the operator creates none (objects.go).
	podMonitors client.Reader
	// prometheusRules reads PrometheusRules likewise; alertRuleGroups are the rule groups each cluster's
	// PrometheusRule holds (config/prometheus/alerts.yaml, read once when the controller starts).
	prometheusRules client.Reader
	alertRuleGroups []resources.RuleGroup
	// certificates reads cert-manager Certificates from the manager's cache where the API server serves the
	// kind when the controller starts; nil where it does not, and then a cluster with spec.tls.issuerRef
	// waits, saying so (certmanager.go).
	certificates client.Reader
	// issuers reads cert-manager Issuers, and ClusterIssuers where clusterIssuersWatched, from the manager's
	// cache where the API server serves the kinds when the controller starts (watchIssuers); nil where it does
	// not, and then issuers are read from the API server.
	issuers               client.Reader
	clusterIssuersWatched bool
}

// objects applies the cluster's managed objects (applyIfChanged).
func (r *EtcdClusterReconciler) objects() objectApplier {
	return objectApplier{c: r.Client, live: r.liveReader(), unchanged: r.unchanged}
}

// now is the reconciler's clock's time: tests drive time instead of waiting for it.
func (r *EtcdClusterReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// +kubebuilder:rbac:groups=etcd.seedops.io,resources=etcdclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd.seedops.io,resources=etcdclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.seedops.io,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// A survivor restarted in a quorum-loss recovery is bound to the one node its volume allows when an empty
// member's pod took that node (membership.ActionBindPod): the scheduler alone would leave it Pending.
// +kubebuilder:rbac:groups="",resources=pods/binding,verbs=create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// reconcileScope is what one reconcile of a cluster works on: the cluster as read, what was observed of
// it, the planned step, and the objects its applies changed. Reconcile makes one and hands it to each
// phase; nothing of it outlives the reconcile.
type reconcileScope struct {
	cluster  *etcdv1beta1.EtcdCluster
	obs      observation
	decision membership.Decision
	// space is the next step of NOSPACE recovery, defrag the next routine defragmentation (internal/maintenance).
	space, defrag maintenance.SpaceStep
	// applied collects the changed objects for the reconcile's one Applied event (apply.go).
	applied *appliedObjects
	// maintained: a maintenance step was taken, and the next member's may be due at once.
	maintained bool
	// deferred: etcd refused the planned membership step for now (a learner not caught up, a member
	// connected for less than etcd's health interval); the refusal clears within seconds.
	deferred bool
}

// Reconcile moves one EtcdCluster towards its spec:
//  1. read the cluster; gone means nothing to do (owner references clean up);
//  2. observe the member pods, their volumes and etcd itself;
//  3. plan the next safe membership step (pure: see internal/membership) and the next step of NOSPACE
//     recovery or routine defragmentation (pure: see internal/maintenance);
//  4. unless paused, apply configuration, Services, StatefulSet, PodDisruptionBudget and backup CronJob,
//     then take the planned step (at most one etcd or pod/volume mutation), and a step of NOSPACE recovery
//     or a defragmentation when no membership step was due;
//  5. write status once, in a deferred patch, only if it changed.
func (r *EtcdClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	log := logf.FromContext(ctx)

	// 1. Read the cluster.
	cluster := &etcdv1beta1.EtcdCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.NamespacedName)
			r.agentAnswers.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		r.metrics.forget(req.NamespacedName)
		r.agentAnswers.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	// 1b. A cluster without a recorded TLS choice gets one first (settleTLS); the update brings it back.
	if cluster.Spec.TLS.Enabled == nil {
		return ctrl.Result{}, r.settleTLS(ctx, cluster)
	}
	before := cluster.DeepCopy()

	// 2. Observe.
	obs, err := r.observe(ctx, cluster)
	if err != nil {
		// Status still says why, for this generation: a cluster that cannot be observed is not converging.
		r.reportObserveFailure(ctx, before, cluster, err)
		return ctrl.Result{}, err
	}
	// 3. Plan.
	s := &reconcileScope{
		cluster:  cluster,
		obs:      obs,
		decision: membership.Plan(obs.planInput(cluster, r.now(), r.healAfter())),
		applied:  &appliedObjects{},
	}
	s.space, s.defrag = planMaintenance(cluster, obs, r.recoveries.get(cluster.UID))

	// 5. (deferred) Report, whatever happened in step 4.
	defer func() { result, retErr = r.report(ctx, before, s, result, retErr) }()

	if cluster.Spec.Paused {
		log.V(1).Info("paused; not changing managed objects")
		return ctrl.Result{}, nil
	}

	// 4. Apply the managed objects, phase by phase, then take the planned step.
	for _, phase := range []func(context.Context, *reconcileScope) error{
		r.reconcileTLS,
		r.reconcileConfigMap,
		r.reconcileServices,
		r.reconcilePointInTimeRestore,
		r.reconcileRecoveryReplay,
		r.reconcileSnapshotServer,
		r.reconcileStatefulSet,
		r.reconcilePodDisruptionBudget,
		r.reconcileNetworkPolicy,
		r.reconcileBackupCronJob,
		r.reconcileBackupPVC,
		r.reconcileContinuousBackup,
		r.recordVolumes,
		r.takeStep,
		r.reconcileSweep,
		r.reconcileSpace,
		r.reconcileAuth,
		// Last: monitoring must never hold up a step the cluster needs.
		r.reconcilePodMonitor,
		r.reconcilePrometheusRule,
	} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// report is step 5: it writes the status of what step 4 did (or failed to do) in one patch, with the
// metrics, events and condition transitions that go with it, and decides when to look again.
func (r *EtcdClusterReconciler) report(ctx context.Context, before *etcdv1beta1.EtcdCluster, s *reconcileScope,
	result ctrl.Result, err error) (ctrl.Result, error) {
	cluster := s.cluster
	cluster.Status = computeStatus(cluster, s.obs, s.decision, s.space, s.applied.names, err, r.now())
	r.metrics.observe(cluster)
	s.applied.record(r.Recorder, cluster)
	ending := namespaceTerminating(err)
	if err != nil && !ending {
		r.Recorder.Eventf(cluster, nil, corev1.EventTypeWarning, ReasonReconcileFailed, "Reconcile", "%v", err)
	}
	r.recordTransitions(before, cluster)
	r.recordBackupEvents(before, cluster)
	if perr := r.patchStatus(ctx, before, cluster); perr != nil {
		err = kerrors.NewAggregate([]error{err, perr})
	}
	if ending {
		// Status says why; the namespace's deletion ends the cluster's reconciles.
		logf.FromContext(ctx).V(1).Info("namespace is being deleted; not retrying", "error", err.Error())
		return ctrl.Result{}, nil
	}
	var wait waitError
	if errors.As(err, &wait) {
		err, result = nil, ctrl.Result{RequeueAfter: wait.after}
	}
	if err == nil && result.IsZero() {
		result.RequeueAfter = r.requeueAfter(cluster, s.obs, s.decision, s.maintained, s.deferred)
	}
	// A held certificate problem (reconcileIssuedTLS) is looked at again when no event may say it ended.
	if after := s.obs.tls.heldRetry; err == nil && s.obs.tls.held != nil && (result.RequeueAfter == 0 || after < result.RequeueAfter) {
		result.RequeueAfter = after
	}
	return result, err
}

// learnerPollInterval is how often the controller looks at a learner that is starting or catching up: the
// promotion waits for etcd's view of it, which no watch delivers.
const learnerPollInterval = 500 * time.Millisecond

// requeueAfter: soon while an operation is in flight (sooner while a learner is awaited or etcd deferred
// the step), at the health interval while etcd runs, never for a cluster with nothing to observe (every
// other change is an event), and in any case when a certificate or a scheduled defragmentation falls due.
func (r *EtcdClusterReconciler) requeueAfter(c *etcdv1beta1.EtcdCluster, obs observation, d membership.Decision, maintained, deferred bool) time.Duration {
	var after time.Duration
	switch {
	case c.Spec.Paused:
		return 0
	case len(obs.pods) == 0:
	case d.AwaitsLearner, deferred:
		// No event says when etcd's view changes: a scale-up's next learner is refused until the
		// leader has been connected to every voter for 5 s, and each step waits for that moment.
		after = min(r.stepInterval(), learnerPollInterval)
	case d.InProgress(), obs.hasAlarm(etcd.AlarmNoSpace), sweepUnderWay(c), maintained, obs.unanswered():
		// NOSPACE recovery and a sweep, like a membership change, are one step per reconcile; so is routine
		// defragmentation, whose next member is due as soon as the last one is done (not a health
		// interval later). A started member that did not answer for itself (a new pod's name resolves
		// seconds after it runs) leaves its version and database unreported: no event says when it can.
		after = r.stepInterval()
	default:
		after = r.healthInterval()
	}
	// A certificate due for renewal, the defragmentation schedule's next time, the continuous backup
	// agent's answer due for renewal and the end of a wait for a failed replay's report (failedJobReport): a
	// second late, so the time has come when the reconcile looks.
	for _, due := range []time.Time{nextRenewal(obs.tlsStatus), nextSweep(c, r.now()), agentAnswerDue(obs.continuousAt, r.healthInterval()),
		obs.replay.reportDue, obs.restoreReportDue} {
		if until := due.Sub(r.now()) + time.Second; !due.IsZero() && (after == 0 || until < after) {
			after = max(until, time.Second)
		}
	}
	return after
}

// agentAnswerDue is when the agent's answer taken at at is renewed (zero when the agent was not asked).
func agentAnswerDue(at time.Time, interval time.Duration) time.Time {
	if at.IsZero() {
		return time.Time{}
	}
	return at.Add(interval)
}

// liveReader reads from the API server, not the cache (the client when no APIReader is set).
func (r *EtcdClusterReconciler) liveReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// reportObserveFailure records a failed observation in status (Progressing and Degraded with the error,
// for the current generation), leaving what was last observed of the members as it was.
func (r *EtcdClusterReconciler) reportObserveFailure(ctx context.Context, before, c *etcdv1beta1.EtcdCluster, err error) {
	now := metav1.NewTime(r.now())
	for _, t := range []string{etcdv1beta1.ConditionProgressing, etcdv1beta1.ConditionDegraded} {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue,
			Reason: ReasonReconcileFailed, Message: err.Error(), ObservedGeneration: c.Generation, LastTransitionTime: now})
	}
	c.Status.ObservedGeneration = c.Generation
	if meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable) != nil {
		c.Status.Phase = phaseOf(c, c.Status.Conditions)
	}
	r.recordTransitions(before, c)
	r.metrics.observe(c)
	if perr := r.patchStatus(ctx, before, c); perr != nil {
		logf.FromContext(ctx).Error(perr, "cannot report the failed observation")
	}
}

// patchStatus writes status (with observedGeneration) once per reconcile, and only when it changed.
func (r *EtcdClusterReconciler) patchStatus(ctx context.Context, before, after *etcdv1beta1.EtcdCluster) error {
	return patchStatusIfChanged(ctx, r.Client, !equality.Semantic.DeepEqual(before.Status, after.Status), after, client.MergeFrom(before))
}

// SetupWithManager registers the controller: it watches clusters, the objects they own, and member pods
// (owned by the StatefulSet, so mapped back through the instance label).
func (r *EtcdClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	b, err := r.controllerBuilder(mgr)
	if err != nil {
		return err
	}
	if r.metrics, err = registerClusterCollector(metrics.Registry, r.metrics); err != nil {
		return err
	}
	return b.Complete(r)
}

func (r *EtcdClusterReconciler) controllerBuilder(mgr ctrl.Manager) (*builder.TypedBuilder[reconcile.Request], error) {
	r.reported, r.unchanged, r.metrics = newConditionMemory(), newNoopCache(), newClusterCollector()
	groups, err := resources.ClusterRuleGroups(alertrules.AlertRules)
	if err != nil {
		return nil, err // the embedded rules file is checked by the tests: this is a build that skipped them
	}
	r.alertRuleGroups = groups
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podNodeNameField, podNodeName); err != nil {
		return nil, fmt.Errorf("index pods by node: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1beta1.EtcdCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podOrJobPodToCluster)).
		// A new revision of the member template can reach the cache after the StatefulSet's status naming it
		// (podUpToDate reads both).
		Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(podToCluster)).
		// A node's zone label and readiness are part of the failure tolerance of the clusters with members on it.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToClusters), builder.WithPredicates(nodeChanged)).
		// Backup Jobs belong to the CronJob or to an EtcdBackup; their results are reported on the cluster.
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(backupJobToCluster)).
		// A restored cluster waits for its EtcdBackup to succeed.
		Watches(&etcdv1beta1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(r.backupToRestoringClusters)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Named(ClusterControllerName)
	for _, kind := range metadataOnlyKinds {
		b = b.Owns(kind, builder.OnlyMetadata)
	}
	// PodMonitors and PrometheusRules only where prometheus-operator's CRDs are installed when the operator
	// starts (installed later, they take an operator restart); cached as metadata only (applyMonitoringObject).
	for _, kind := range []struct {
		gvk    schema.GroupVersionKind
		reader *client.Reader
	}{{resources.PodMonitorGVK, &r.podMonitors}, {resources.PrometheusRuleGVK, &r.prometheusRules}} {
		switch _, err := mgr.GetRESTMapper().RESTMapping(kind.gvk.GroupKind(), kind.gvk.Version); {
		case err == nil:
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(kind.gvk)
			b = b.Owns(obj, builder.OnlyMetadata)
			*kind.reader = mgr.GetCache()
		case !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("look up the %s kind: %w", kind.gvk.Kind, err)
		}
	}
	// cert-manager's Certificates likewise, whole (their Ready condition is read). The Secrets cert-manager
	// writes carry the operator's labels but no owner: mapped to their cluster by label.
	switch _, err := mgr.GetRESTMapper().RESTMapping(resources.CertificateGVK.GroupKind(), resources.CertificateGVK.Version); {
	case err == nil:
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(resources.CertificateGVK)
		b = b.Owns(obj).
			Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(issuedSecretToCluster))
		r.certificates = mgr.GetCache()
		// Their issuers too: an issuer becoming Ready, or breaking, is an event of the clusters naming it.
		if b, err = r.watchIssuers(mgr, b); err != nil {
			return nil, err
		}
	case !meta.IsNoMatchError(err):
		return nil, fmt.Errorf("look up the %s kind: %w", resources.CertificateGVK.Kind, err)
	}
	return b, nil
}

// backupJobToCluster maps a backup Job to its cluster through the instance label.
var backupJobToCluster = componentToCluster(resources.ComponentBackup, resources.ComponentPointInTime)

// backupToRestoringClusters maps an EtcdBackup to the clusters of its namespace that bootstrap from it.
func (r *EtcdClusterReconciler) backupToRestoringClusters(ctx context.Context, o client.Object) []reconcile.Request {
	clusters := &etcdv1beta1.EtcdClusterList{}
	if err := r.List(ctx, clusters, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range clusters.Items {
		if b := c.Spec.Bootstrap; b != nil && b.FromBackup != nil && b.FromBackup.BackupName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return out
}

// podToCluster maps a member pod (or a pod of the cluster's agent, restore Job or snapshot server) to its
// cluster through the instance label.
var podToCluster = componentToCluster(resources.ComponentEtcd, resources.ComponentContinuousBackup, resources.ComponentPointInTime,
	resources.ComponentSnapshotServer)

// podOrJobPodToCluster maps a pod as podToCluster does, and a pod its labels do not map through the Job that
// controls it: a failed replay Job's reason waits for its pod's report (failedJobReport), and only the pod's
// update can end that wait, whatever labels the pod carries.
func (r *EtcdClusterReconciler) podOrJobPodToCluster(ctx context.Context, o client.Object) []reconcile.Request {
	if reqs := podToCluster(ctx, o); len(reqs) > 0 {
		return reqs
	}
	owner := metav1.GetControllerOf(o)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	job := &batchv1.Job{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: owner.Name}, job); err != nil || job.UID != owner.UID {
		return nil
	}
	return backupJobToCluster(ctx, job)
}

// componentToCluster maps an object of one of a cluster's components to the cluster named by its instance
// label.
func componentToCluster(components ...string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[resources.LabelInstance]
		if !ok || !slices.Contains(components, o.GetLabels()[resources.LabelComponent]) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}
