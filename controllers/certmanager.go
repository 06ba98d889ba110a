package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers;clusterissuers,verbs=get;list;watch

const (
	// certManagerRetry: no event says when cert-manager is installed (the operator then needs a restart
	// to watch Certificates) or when an Issuer becomes Ready (Issuers are not watched).
	certManagerRetry = 15 * time.Second
	// issuancePendingRetry backs up the Certificate and Secret watches while cert-manager issues.
	issuancePendingRetry = time.Minute
)

// certificatesPending stops the TLS phase of a cluster whose certificates come from cert-manager while
// they cannot be had: the members keep running on the Secrets they have, nothing else is applied, and
// status says why under reason.
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
// cert-manager Certificate per server, peer and client certificate, and waits until cert-manager has
// written every Secret. Renewal is cert-manager's; members pick up a renewed certificate from their Secret
// volume as they do the operator's own. A Certificate already as desired is not written.
func (r *EtcdClusterReconciler) reconcileIssuedTLS(ctx context.Context, s *reconcileScope) error {
	c, t := s.cluster, s.obs.tls
	if t.certificates == nil {
		return waitError{certificatesPending{ReasonCertManagerMissing, fmt.Sprintf(
			"spec.tls.issuerRef needs cert-manager, but the API server does not serve its Certificate kind (%s) to the operator: "+
				"install cert-manager, then restart the operator so that it watches Certificates; nothing was changed",
			resources.CertificateGVK.GroupVersion().WithResource("certificates").GroupResource())}, certManagerRetry}
	}
	leaves := resources.LeafCertificates(c, t.options)
	if !t.issued(leaves) {
		// Only while a certificate is missing: a Ready set of certificates needs no issuer this minute.
		if msg, reason, err := r.issuerProblem(ctx, c); err != nil {
			return err
		} else if msg != "" {
			return waitError{certificatesPending{reason, msg}, certManagerRetry}
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
			return waitError{certificatesPending{ReasonCertManagerMissing,
				"cert-manager's Certificate kind is no longer served: install cert-manager again; nothing was changed"}, certManagerRetry}
		case err != nil:
			return fmt.Errorf("apply cert-manager Certificate %s: %w", desired.GetName(), err)
		}
		logf.FromContext(ctx).Info("applied cert-manager Certificate", "certificate", desired.GetName())
		s.applied.add(ctx, true, "Certificate", desired.GetName())
	}
	var waiting []string
	for _, leaf := range leaves {
		if t.leaves[leaf.SecretName] == nil {
			waiting = append(waiting, fmt.Sprintf("Certificate %s (%s)", resources.CertificateName(leaf),
				certificateState(t.certificates[resources.CertificateName(leaf)])))
		}
	}
	if len(waiting) > 0 {
		return waitError{certificatesPending{ReasonCertificatesPending,
			"waiting for cert-manager to issue " + strings.Join(waiting, ", ")}, issuancePendingRetry}
	}
	return nil
}

// issued reports whether every certificate's Secret exists and its Certificate is Ready.
func (t tlsObservation) issued(leaves []resources.LeafCertificate) bool {
	for _, leaf := range leaves {
		if t.leaves[leaf.SecretName] == nil {
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
	err := r.liveReader().Get(ctx, key, issuer)
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
