package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers;clusterissuers,verbs=get;list;watch

const (
	// certManagerRetry: no event says when cert-manager is installed (the operator then needs a restart
	// to watch Certificates and issuers), nor when an issuer the operator does not watch becomes Ready (an
	// external issuer's, or a ClusterIssuer the operator may not watch cluster-wide).
	certManagerRetry = 15 * time.Second
	// issuancePendingRetry backs up the Certificate, Secret and issuer watches while cert-manager issues.
	issuancePendingRetry = time.Minute
)

// certificatesPending stops the TLS phase of a cluster whose certificates come from cert-manager while
// they cannot be had: the members keep running on the Secrets they have, and status says why under reason.
// It stops the whole reconcile only while a Secret the members mount is missing (a new cluster, or one whose
// server, peer or client certificate is being added): members cannot start without it. A cluster whose
// mounted Secrets all exist goes on with the rest of its reconcile (healing, scaling, backups), the problem
// held in tlsObservation.held.
type certificatesPending struct{ reason, msg string }

func (e certificatesPending) Error() string { return e.msg }

// observeIssuedCertificates reads the cluster's cert-manager Certificates from the cache (where the API
// server served the kind when the operator started).
func (r *EtcdClusterReconciler) observeIssuedCertificates(ctx context.Context, c *etcdv1beta1.EtcdCluster, t *tlsObservation) error {
	if r.certificates == nil {
		return nil
	}
	t.certificates = map[string]*unstructured.Unstructured{}
	for _, leaf := range resources.LeafCertificates(c, t.options) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(resources.CertificateGVK)
		err := r.certificates.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CertificateName(leaf)}, u)
		switch {
		case err == nil:
			t.certificates[resources.CertificateName(leaf)] = u
		case apierrors.IsNotFound(err):
		case meta.IsNoMatchError(err):
			t.certificates = nil // cert-manager's CRDs were removed since the operator started
			return nil
		default:
			return err
		}
	}
	return nil
}

// reconcileIssuedTLS is reconcileTLS for a cluster with spec.tls.issuerRef: it checks the issuer, keeps one
// cert-manager Certificate per server, peer and client certificate, waits until cert-manager has written
// every staging Secret, and then writes the Secrets the members mount from them (reconcileIssuedSecrets).
// Renewal is cert-manager's; members pick up a renewed certificate from their Secret volume as they do the
// operator's own. A Certificate already as desired is not written.
//
// What keeps the certificates from being had (no cert-manager, an issuer absent or not Ready, a Certificate
// not issued or not renewed) stops the reconcile only while a Secret the members mount is missing; otherwise
// it is held (reported in status and by a Warning event) and the reconcile goes on (hold).
func (r *EtcdClusterReconciler) reconcileIssuedTLS(ctx context.Context, s *reconcileScope) error {
	c, t := s.cluster, &s.obs.tls
	leaves := resources.LeafCertificates(c, t.options)
	if t.certificates == nil {
		return r.hold(s, certificatesPending{ReasonCertManagerMissing, fmt.Sprintf(
			"spec.tls.issuerRef needs cert-manager, but the API server does not serve its Certificate kind (%s) to the operator: "+
				"install cert-manager, then restart the operator so that it watches Certificates; nothing was changed",
			resources.CertificateGVK.GroupVersion().WithResource("certificates").GroupResource())}, certManagerRetry)
	}
	// A watched issuer is read from the cache, at every reconcile: a running cluster's status says at once that
	// its next renewal cannot happen. An issuer not watched is read from the API server, only while a certificate
	// is missing (a Ready set of certificates needs no issuer this minute).
	if watched := r.issuerWatched(c); watched || !t.issuedAll(leaves) {
		msg, reason, err := r.issuerProblem(ctx, c)
		if err != nil {
			return err
		} else if msg != "" {
			after := certManagerRetry
			if watched {
				after = issuancePendingRetry // the issuer's event comes first
			}
			return r.hold(s, certificatesPending{reason, msg}, after)
		}
	}
	for _, leaf := range leaves {
		desired := resources.Certificate(c, leaf)
		if existing := t.certificates[desired.GetName()]; existing != nil && holds(existing.Object, desired.Object) {
			continue
		}
		err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership)
		switch {
		case meta.IsNoMatchError(err):
			return r.hold(s, certificatesPending{ReasonCertManagerMissing,
				"cert-manager's Certificate kind is no longer served: install cert-manager again; nothing was changed"}, certManagerRetry)
		case err != nil:
			return fmt.Errorf("apply cert-manager Certificate %s: %w", desired.GetName(), err)
		}
		logf.FromContext(ctx).Info("applied cert-manager Certificate", "certificate", desired.GetName())
		s.applied.add(ctx, true, "Certificate", desired.GetName())
	}
	var waiting []string
	for _, leaf := range leaves {
		if t.issued[leaf.SecretName] == nil {
			waiting = append(waiting, fmt.Sprintf("Certificate %s (%s)", resources.CertificateName(leaf),
				certificateState(t.certificates[resources.CertificateName(leaf)])))
		}
	}
	if len(waiting) > 0 {
		return r.hold(s, certificatesPending{ReasonCertificatesPending,
			"waiting for cert-manager to issue " + strings.Join(waiting, ", ")}, issuancePendingRetry)
	}
	if err := r.reconcileIssuedSecrets(ctx, s); err != nil {
		return err
	}
	// A Certificate cert-manager marks not Ready while its staging Secret holds a certificate: its renewal (or
	// reissue) fails, and the members run on the certificate they have until it expires.
	var failing []string
	for _, leaf := range leaves {
		cert := t.certificates[resources.CertificateName(leaf)]
		if status, _ := readyCondition(cert); cert != nil && status == "False" {
			failing = append(failing, fmt.Sprintf("Certificate %s (%s)", cert.GetName(), certificateState(cert)))
		}
	}
	if len(failing) > 0 && t.mountedAll(leaves) {
		return r.hold(s, certificatesPending{ReasonCertificatesPending,
			"cert-manager cannot issue " + strings.Join(failing, ", ")}, issuancePendingRetry)
	}
	return nil
}

// hold ends the TLS phase on p. While a Secret the members mount is missing, p stops the reconcile, retried
// after after (waitError). Otherwise the members can run on what they have: p is held in status, with when the
// first mounted certificate expires (the deadline for a human to mend the issuer), a Warning event says it when
// it is new, and the reconcile goes on: a certificate that cannot be renewed must not hold up the healing of a
// member, a scale or a backup.
func (r *EtcdClusterReconciler) hold(s *reconcileScope, p certificatesPending, after time.Duration) error {
	c, t := s.cluster, &s.obs.tls
	leaves := resources.LeafCertificates(c, t.options)
	if !t.mountedAll(leaves) {
		return waitError{p, after}
	}
	var first *x509.Certificate
	for _, leaf := range leaves {
		if cert := secretCert(t.leaves[leaf.SecretName]); cert != nil && (first == nil || cert.NotAfter.Before(first.NotAfter)) {
			first = cert
		}
	}
	p.msg += "; the members keep running on their current certificates"
	if first != nil {
		p.msg += ", the first of which expires at " + first.NotAfter.UTC().Format(time.RFC3339)
	}
	p.msg += ", and the rest of the cluster is reconciled"
	t.held, t.heldRetry = &p, after
	if prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionDegraded); prev == nil || prev.Reason != p.reason || prev.Message != p.msg {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, p.reason, "Issue", "%s", p.msg)
	}
	return nil
}

// mountedAll reports whether every Secret the members mount exists.
func (t tlsObservation) mountedAll(leaves []resources.LeafCertificate) bool {
	for _, leaf := range leaves {
		if t.leaves[leaf.SecretName] == nil {
			return false
		}
	}
	return true
}

// issuedAll reports whether every certificate's staging Secret exists and its Certificate is Ready.
func (t tlsObservation) issuedAll(leaves []resources.LeafCertificate) bool {
	for _, leaf := range leaves {
		if t.issued[leaf.SecretName] == nil {
			return false
		}
		if status, _ := readyCondition(t.certificates[resources.CertificateName(leaf)]); status != "True" {
			return false
		}
	}
	return true
}

// issuerProblem says why the cert-manager issuer of spec.tls.issuerRef cannot issue (absent, not Ready),
// with the condition reason; empty when it can. An external issuer's group is not looked into.
func (r *EtcdClusterReconciler) issuerProblem(ctx context.Context, c *etcdv1beta1.EtcdCluster) (string, string, error) {
	ref := c.Spec.TLS.IssuerRef
	gvk := resources.IssuerGVK(ref)
	if gvk.Group != resources.CertManagerGroup {
		return "", "", nil
	}
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(gvk)
	key, what := client.ObjectKey{Name: ref.Name}, gvk.Kind+" "+ref.Name
	if gvk.Kind == "Issuer" {
		key.Namespace, what = c.Namespace, gvk.Kind+" "+c.Namespace+"/"+ref.Name
	}
	reader := r.liveReader()
	if r.issuerWatched(c) {
		reader = r.issuers
	}
	err := reader.Get(ctx, key, issuer)
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Sprintf("spec.tls.issuerRef names %s, but the API server does not serve cert-manager's %s kind: install cert-manager; nothing was changed",
			what, gvk.Kind), ReasonCertManagerMissing, nil
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("%s named by spec.tls.issuerRef not found: create it; nothing was changed", what), ReasonIssuerNotReady, nil
	case err != nil:
		return "", "", fmt.Errorf("read %s: %w", what, err)
	}
	if status, msg := readyCondition(issuer); status != "True" {
		if msg == "" {
			msg = "no Ready condition yet"
		}
		return fmt.Sprintf("%s named by spec.tls.issuerRef is not Ready (%s); nothing was changed", what, msg), ReasonIssuerNotReady, nil
	}
	return "", "", nil
}

// readyCondition is the status and message of a cert-manager object's Ready condition.
func readyCondition(u *unstructured.Unstructured) (string, string) {
	if u == nil {
		return "", ""
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conditions {
		m, ok := cond.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		return status, msg
	}
	return "", ""
}

// certificateState describes a Certificate still being issued.
func certificateState(u *unstructured.Unstructured) string {
	if u == nil {
		return "not created yet"
	}
	status, msg := readyCondition(u)
	switch {
	case status == "":
		return "no Ready condition yet"
	case msg == "":
		return "Ready " + status
	}
	return "Ready " + status + ": " + msg
}

// issuedSecretToCluster maps a certificate Secret cert-manager wrote (labelled through the Certificate's
// secretTemplate, owned by no one) to its cluster.
var issuedSecretToCluster = componentToCluster(resources.ComponentTLS)

// cert-manager annotates each Secret it writes for a Certificate with the Certificate's and the issuer's names.
const (
	certManagerCertificateAnnotation = "cert-manager.io/certificate-name"
	certManagerIssuerNameAnnotation  = "cert-manager.io/issuer-name"
	certManagerIssuerKindAnnotation  = "cert-manager.io/issuer-kind"
	certManagerIssuerGroupAnnotation = "cert-manager.io/issuer-group"
)

// issuerRefSpecProblem says why spec.tls.issuerRef cannot be used with the rest of spec.tls (with
// caSecretName, or with TLS off); empty when it can. The refusals of spec.tls.issuerRef are the operator's,
// not CEL rules on spec.tls: a new rule on an existing field is a change OLM v1's upgrade-safety check refuses
// (objects already stored might break it), while the operator can refuse, change nothing, and say why. The
// API server refuses only a changed issuerRef (a rule on the new field itself).
func issuerRefSpecProblem(c *etcdv1beta1.EtcdCluster) string {
	ref := c.Spec.TLS.IssuerRef
	switch {
	case ref == nil:
		return ""
	case c.Spec.TLS.CASecretName != "":
		return fmt.Sprintf("spec.tls.issuerRef (%s) and spec.tls.caSecretName (%s) are exclusive: certificates come from a "+
			"cert-manager issuer or from a CA, not both; nothing was changed. Remove spec.tls.issuerRef "+
			"(spec.tls.caSecretName cannot be removed from an existing cluster)", issuerDescription(c), c.Spec.TLS.CASecretName)
	case !resources.TLSEnabled(c):
		return fmt.Sprintf("spec.tls.issuerRef (%s) needs TLS, but spec.tls.enabled is false: the certificates an issuer "+
			"issues are for TLS; nothing was changed. Remove spec.tls.issuerRef, or, for TLS with certificates from the "+
			"issuer, restore a backup into a new cluster with spec.tls.enabled true (a running cluster cannot switch "+
			"from plaintext to TLS)", issuerDescription(c))
	}
	return ""
}

// issuerRefSwitch says why the certificates of a cluster with TLS cannot come from where spec.tls.issuerRef now
// says: issuerRef added to a cluster whose certificates the operator's CA signs, or removed from one whose
// certificates cert-manager issues. Empty when they can. The members trust one CA for their lifetime, and
// certificates from another would cut them off from each other (a switch needs members to trust both CAs
// during the change, which the operator does not do).
//
// Where the certificates come from is read from the Secrets, not recorded anew: the operator's CA Secret
// exists (with the operator's label, in the cache) only for a cluster whose certificates that CA signs, and
// the Secrets the members mount name the Certificate they come from (issuedCertificate: the operator's
// annotation on those it writes from cert-manager's staging Secrets, cert-manager's own on those its
// Certificates wrote before), while those of the operator's CA carry no such annotation. Both survive an
// operator restart and an upgrade, and hold for clusters created before status could have recorded anything.
func (r *EtcdClusterReconciler) issuerRefSwitch(ctx context.Context, c *etcdv1beta1.EtcdCluster, t tlsObservation) (string, error) {
	leaves := resources.LeafCertificates(c, t.options)
	if c.Spec.TLS.IssuerRef != nil {
		by := ""
		ca := &corev1.Secret{}
		switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CASecretName(c)}, ca); {
		case err == nil:
			by = "the operator's CA (Secret " + ca.Name + ")"
		case !apierrors.IsNotFound(err):
			return "", err
		}
		for _, leaf := range leaves {
			if s := t.leaves[leaf.SecretName]; by == "" && s != nil && issuedCertificate(s) == "" {
				by = "the operator's CA (Secret " + s.Name + " was not written by cert-manager)"
			}
		}
		if by == "" {
			return "", nil
		}
		return fmt.Sprintf("spec.tls.issuerRef (%s) was added to a cluster whose certificates %s signs: the members trust "+
			"that CA alone, and certificates from the issuer would cut them off from each other, so nothing was changed. "+
			"Remove spec.tls.issuerRef, or restore a backup into a new cluster with it (spec.bootstrap.fromBackup)",
			issuerDescription(c), by), nil
	}
	for _, leaf := range leaves {
		s := t.leaves[leaf.SecretName]
		if s == nil || issuedCertificate(s) == "" {
			continue
		}
		// The issuer is named by cert-manager's annotations: on the staging Secret it writes, or, for a cluster
		// whose Certificates wrote the mounted Secrets before the staging Secrets existed, on the mounted one.
		by := s
		if staged := t.issued[leaf.SecretName]; staged != nil && staged.Annotations[certManagerIssuerNameAnnotation] != "" {
			by = staged
		}
		return fmt.Sprintf("spec.tls.issuerRef was removed from a cluster whose certificates cert-manager issues (Secret %s, "+
			"from Certificate %s): the members trust the issuer's CA alone, and certificates from the operator's CA would "+
			"cut them off from each other, so nothing was changed. Set spec.tls.issuerRef back (name: %s, kind: %s, group: %s), "+
			"or restore a backup into a new cluster without it (spec.bootstrap.fromBackup)",
			s.Name, issuedCertificate(s), by.Annotations[certManagerIssuerNameAnnotation],
			by.Annotations[certManagerIssuerKindAnnotation], by.Annotations[certManagerIssuerGroupAnnotation]), nil
	}
	return "", nil
}

// issuedCertificate is the cert-manager Certificate a mounted certificate Secret comes from: the operator's
// annotation on a Secret it writes from a staging Secret, or cert-manager's own on a Secret a Certificate wrote
// before staging Secrets existed; "" for a Secret of the operator's CA.
func issuedCertificate(s *corev1.Secret) string {
	if name := s.Annotations[resources.AnnotationCertificate]; name != "" {
		return name
	}
	return s.Annotations[certManagerCertificateAnnotation]
}

// issuerDescription is spec.tls.issuerRef as a message shows it.
func issuerDescription(c *etcdv1beta1.EtcdCluster) string {
	gvk := resources.IssuerGVK(c.Spec.TLS.IssuerRef)
	return gvk.Kind + " " + c.Spec.TLS.IssuerRef.Name + " of " + gvk.Group
}

// issuerRefField indexes the EtcdClusters by the cert-manager issuer of spec.tls.issuerRef ("Issuer/<name>" or
// "ClusterIssuer/<name>"), so that an issuer's event finds the clusters it issues for.
const issuerRefField = "spec.tls.issuerRef"

// issuerRefKey is the index value of a cluster's cert-manager issuer; none for a cluster without one, or with
// an issuer of another group (not watched).
func issuerRefKey(o client.Object) []string {
	c, ok := o.(*etcdv1beta1.EtcdCluster)
	if !ok || c.Spec.TLS.IssuerRef == nil {
		return nil
	}
	gvk := resources.IssuerGVK(c.Spec.TLS.IssuerRef)
	if gvk.Group != resources.CertManagerGroup {
		return nil
	}
	return []string{gvk.Kind + "/" + c.Spec.TLS.IssuerRef.Name}
}

// issuerToClusters maps an Issuer to the clusters of its namespace naming it in spec.tls.issuerRef, and a
// ClusterIssuer to every watched cluster naming it: a cluster waiting for its issuer goes on as soon as the
// issuer is Ready, and a running cluster's status says at once that its issuer broke.
func (r *EtcdClusterReconciler) issuerToClusters(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		opts := []client.ListOption{client.MatchingFields{issuerRefField: kind + "/" + o.GetName()}}
		if kind == "Issuer" {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		clusters := &etcdv1beta1.EtcdClusterList{}
		if err := r.List(ctx, clusters, opts...); err != nil {
			logf.FromContext(ctx).Error(err, "cannot list the clusters of an issuer", "kind", kind, "name", o.GetName())
			return nil
		}
		out := make([]reconcile.Request, 0, len(clusters.Items))
		for _, c := range clusters.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
		return out
	}
}

// watchIssuers watches cert-manager's Issuers (in the watched namespaces) and ClusterIssuers, whole (their
// Ready condition is read), where the API server serves the kinds when the operator starts. ClusterIssuers are
// cluster-scoped: they are watched only where the operator may list and watch them cluster-wide (an install
// confined to namespaces may not), and a cluster naming one is otherwise looked at again every
// certManagerRetry while it waits.
func (r *EtcdClusterReconciler) watchIssuers(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request]) (*builder.TypedBuilder[reconcile.Request], error) {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &etcdv1beta1.EtcdCluster{}, issuerRefField, issuerRefKey); err != nil {
		return nil, fmt.Errorf("index clusters by issuer: %w", err)
	}
	for _, kind := range []string{"Issuer", "ClusterIssuer"} {
		gvk := resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: kind})
		mapping, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case meta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("look up the %s kind: %w", kind, err)
		}
		if kind == "ClusterIssuer" {
			allowed, err := mayWatchClusterWide(ctx, mgr.GetClient(), mapping.Resource)
			if err != nil {
				return nil, err
			}
			if !allowed {
				logf.FromContext(ctx).Info("not watching ClusterIssuers: the operator may not list and watch them cluster-wide")
				continue
			}
			r.clusterIssuersWatched = true
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.issuerToClusters(kind)))
		r.issuers = mgr.GetCache()
	}
	return b, nil
}

// mayWatchClusterWide asks the API server whether the operator may list and watch resource in every namespace.
func mayWatchClusterWide(ctx context.Context, c client.Client, resource schema.GroupVersionResource) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: resource.Group, Resource: resource.Resource}}}
		if err := c.Create(ctx, review); err != nil {
			return false, fmt.Errorf("ask whether the operator may %s %s: %w", verb, resource.GroupResource(), err)
		}
		if !review.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// issuerWatched reports whether the issuer of the cluster's spec.tls.issuerRef is watched (and cached).
func (r *EtcdClusterReconciler) issuerWatched(c *etcdv1beta1.EtcdCluster) bool {
	if r.issuers == nil {
		return false
	}
	gvk := resources.IssuerGVK(c.Spec.TLS.IssuerRef)
	return gvk.Group == resources.CertManagerGroup && (gvk.Kind == "Issuer" || gvk.Kind == "ClusterIssuer" && r.clusterIssuersWatched)
}
