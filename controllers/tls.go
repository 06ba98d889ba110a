package controllers

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
)

// tlsObservation is what the controller saw of a cluster's certificates.
type tlsObservation struct {
	// ca signs the cluster's certificates; nil with caErr saying why.
	ca    *pki.CA
	caErr error
	// caOwned: the CA Secret is the operator's (<cluster>-ca), not the user's.
	caOwned  bool
	caSecret *corev1.Secret
	// leaves are the server, peer and client certificate Secrets, by Secret name (absent: not issued).
	leaves map[string]*corev1.Secret
	// clientConfig authenticates the operator to the members; nil until the client certificate exists,
	// or with clientErr saying why its Secret cannot be used.
	clientConfig *tls.Config
	clientErr    error
	// options are the cluster's own (its DNS domain pinned): certificates name what its members are.
	options resources.Options
	// refusal says why the TLS setting cannot be applied (the running members disagree with the spec), and
	// refusalReason is the conditions' reason for it (ReasonTLSRefused when empty).
	refusal, refusalReason string
	// certificates are the cluster's cert-manager Certificates by name, with spec.tls.issuerRef; nil where
	// the API server does not serve the kind.
	certificates map[string]*unstructured.Unstructured
	// issued are the staging Secrets cert-manager writes (resources.IssuedSecretName), by the name of the
	// Secret the members mount (absent: not issued yet).
	issued map[string]*corev1.Secret
	// bundle are the CAs of the mounted Secrets' ca.crt with spec.tls.issuerRef (trustbundle.go); trustDigest is
	// the digest the member template carries for the bundle being written, and caChange, while the issuer's CA
	// changes, what that change waits for.
	bundle      resources.CASet
	trustDigest string
	caChange    string
	// held is what keeps the certificates from cert-manager from being had while the members can run on the
	// Secrets they mount (reconcileIssuedTLS: reported, not stopping the reconcile), looked at again after
	// heldRetry when no event comes.
	held      *certificatesPending
	heldRetry time.Duration
}

// tlsRefusal stops a reconcile that would change a running cluster's scheme or the CA its members trust:
// members that disagree on plaintext and TLS, or on the CA, cannot talk to each other, so nothing is
// applied and status says why under reason (TLSRefused, or IssuerRefRefused for spec.tls.issuerRef).
type tlsRefusal struct{ reason, msg string }

func (e tlsRefusal) Error() string { return e.msg }

// refused is the refusal of t as an error, nil when there is none.
func (t tlsObservation) refused() error {
	if t.refusal == "" {
		return nil
	}
	reason := t.refusalReason
	if reason == "" {
		reason = ReasonTLSRefused
	}
	return tlsRefusal{reason, t.refusal}
}

// statefulSetServesTLS reports whether the members of an existing StatefulSet were started with TLS.
func statefulSetServesTLS(sts *appsv1.StatefulSet) bool {
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name != "etcd" {
			continue
		}
		for _, env := range ctr.Env {
			if env.Name == "ETCD_ADVERTISE_CLIENT_URLS" {
				return strings.HasPrefix(env.Value, "https://")
			}
		}
	}
	return false
}

// settleTLS records the cluster's TLS choice in spec.tls.enabled when the user left it unset: true for a
// new cluster, and what the members already run for a cluster created before TLS existed (an operator
// upgrade must not restart, let alone split, a running cluster). It is the one write the operator makes
// to a spec, once per cluster, so that the spec says what runs; the update brings the cluster back.
func (r *EtcdClusterReconciler) settleTLS(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	enabled, why := true, "TLS is on by default for new clusters"
	sts, err := r.statefulSet(ctx, c)
	switch {
	case err != nil:
		return err
	case sts != nil && !statefulSetServesTLS(sts):
		enabled, why = false, "the members already run without TLS; moving to TLS means restoring a backup into a new cluster"
	}
	patch := client.MergeFromWithOptions(c.DeepCopy(), client.MergeFromWithOptimisticLock{})
	c.Spec.TLS.Enabled = &enabled
	if err := r.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("record spec.tls.enabled: %w", err)
	}
	logf.FromContext(ctx).Info("recorded the TLS setting", "enabled", enabled)
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonTLSDefaulted, "Default", "spec.tls.enabled set to %t: %s", enabled, why)
	return nil
}

// observeTLS reads the cluster's CA and certificate Secrets. The operator's own Secrets come from the
// cache (they carry its label); a user-supplied CA is read directly, since unrelated Secrets are not cached.
func (r *EtcdClusterReconciler) observeTLS(ctx context.Context, c *etcdv1beta1.EtcdCluster, sts *appsv1.StatefulSet, o resources.Options) (tlsObservation, error) {
	t := tlsObservation{options: o}
	if sts != nil && statefulSetServesTLS(sts) != resources.TLSEnabled(c) {
		t.refusal = fmt.Sprintf("spec.tls.enabled is %t but the members run with TLS %s; a running cluster cannot switch "+
			"between plaintext and TLS (members would stop understanding each other), so nothing was changed. "+
			"Set spec.tls.enabled back to %t, or restore a backup into a new cluster",
			resources.TLSEnabled(c), map[bool]string{true: "on", false: "off"}[statefulSetServesTLS(sts)], statefulSetServesTLS(sts))
		return t, nil
	}
	if t.refusal = issuerRefSpecProblem(c); t.refusal != "" {
		t.refusalReason = ReasonIssuerRefRefused
		return t, nil
	}
	if !resources.TLSEnabled(c) {
		return t, nil
	}
	var err error
	if c.Spec.TLS.IssuerRef != nil {
		// cert-manager's issuer holds the CA; its Certificates say how issuance goes.
		if err := r.observeIssuedCertificates(ctx, c, &t); err != nil {
			return t, err
		}
	} else if err := r.observeCA(ctx, c, &t); err != nil {
		return t, err
	}
	t.leaves, t.issued = map[string]*corev1.Secret{}, map[string]*corev1.Secret{}
	for _, leaf := range resources.LeafCertificates(c, o) {
		for name, into := range map[string]map[string]*corev1.Secret{leaf.SecretName: t.leaves, resources.IssuedSecretName(leaf): t.issued} {
			s := &corev1.Secret{}
			err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
			switch {
			case err == nil:
				into[leaf.SecretName] = s
			case !apierrors.IsNotFound(err):
				return t, err
			}
		}
	}
	if c.Spec.TLS.IssuerRef != nil {
		for _, leaf := range resources.LeafCertificates(c, o) {
			if s := t.leaves[leaf.SecretName]; s != nil {
				cas, err := resources.ParseCAs(s.Data[resources.CAKey])
				if err != nil {
					return t, fmt.Errorf("the trust bundle of Secret %s (key %s): %w", s.Name, resources.CAKey, err)
				}
				t.bundle = t.bundle.Union(cas)
			}
		}
		t.trustDigest = resources.TrustBundleDigest(t.bundle)
	}
	if t.refusal, err = r.issuerRefSwitch(ctx, c, t); err != nil {
		return t, err
	} else if t.refusal != "" {
		t.refusalReason = ReasonIssuerRefRefused
		return t, nil
	}
	if s := t.leaves[resources.ClientSecretName(c)]; s != nil {
		if t.clientConfig, err = etcd.ClientTLSConfig(s.Data[resources.CAKey], s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
			t.clientErr = fmt.Errorf("the client certificate Secret %s cannot be used (keys %s, %s, %s): %w; "+
				"delete it and the operator issues a new one", s.Name, resources.CAKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
		}
	}
	return t, nil
}

// observeCA reads the CA that signs the cluster's certificates when the operator issues them.
func (r *EtcdClusterReconciler) observeCA(ctx context.Context, c *etcdv1beta1.EtcdCluster, t *tlsObservation) error {
	t.caOwned = c.Spec.TLS.CASecretName == ""
	var reader client.Reader = r.Client
	if !t.caOwned {
		reader = r.liveReader() // the user's: not in the operator's label-filtered cache
	}
	caSecret := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CASecretName(c)}, caSecret)
	switch {
	case err == nil:
		t.caSecret = caSecret
		if t.ca, err = pki.ParseCA(caSecret.Data[corev1.TLSCertKey], caSecret.Data[corev1.TLSPrivateKeyKey]); err != nil {
			t.caErr = fmt.Errorf("CA Secret %s (keys tls.crt, tls.key): %w", caSecret.Name, err)
		}
	case apierrors.IsNotFound(err):
		if !t.caOwned {
			t.caErr = fmt.Errorf("CA Secret %s named by spec.tls.caSecretName not found", resources.CASecretName(c))
		}
	default:
		return err
	}
	return nil
}

// reconcileTLS creates the CA when the operator owns it, and issues each server, peer and client
// certificate that is missing, due for renewal or no longer right for the cluster. Members read their
// certificate files on every new connection, so a renewed certificate reaches them through the kubelet's
// Secret volume update without a restart; existing connections are not interrupted.
func (r *EtcdClusterReconciler) reconcileTLS(ctx context.Context, s *reconcileScope) error {
	c, t := s.cluster, s.obs.tls
	if err := t.refused(); err != nil {
		return err
	}
	if !resources.TLSEnabled(c) {
		return nil
	}
	if c.Spec.TLS.IssuerRef != nil {
		return r.reconcileIssuedTLS(ctx, s)
	}
	if t.caErr != nil {
		return waitError{t.caErr, 15 * time.Second}
	}
	now := r.now()
	ca := t.ca
	if ca == nil { // the operator's CA, not in the cache
		existing, err := r.liveSecret(ctx, c, resources.CASecretName(c), "the CA every member and client certificate of the cluster chains to",
			"make every certificate of the cluster stop verifying")
		if err != nil {
			return err
		}
		if existing != nil { // the cache is behind: sign with the CA the API server has
			if ca, err = pki.ParseCA(existing.Data[corev1.TLSCertKey], existing.Data[corev1.TLSPrivateKeyKey]); err != nil {
				return fmt.Errorf("CA Secret %s (keys tls.crt, tls.key): %w", existing.Name, err)
			}
		}
	}
	if ca == nil { // the operator's CA, not created yet
		var keyPEM []byte
		var err error
		if ca, keyPEM, err = pki.NewCA(c.Namespace+"/"+c.Name+" etcd CA", resources.CAValidity, now); err != nil {
			return err
		}
		secret := resources.TLSSecret(c, resources.CASecretName(c), ca.CertPEM, keyPEM, ca.CertPEM)
		if err := r.Apply(ctx, secret, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("create CA Secret: %w", err)
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCertificateIssued, "Issue",
			"CA created in Secret %s (valid until %s)", resources.CASecretName(c), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, leaf := range resources.LeafCertificates(c, t.options) {
		existing := t.leaves[leaf.SecretName]
		var certPEM, keyPEM []byte
		if existing != nil {
			// The CA a member trusts is fixed for its lifetime: a certificate from another CA would be
			// refused by members that still have the old one. Rotating the CA is not supported.
			if trusted := existing.Data[resources.CAKey]; len(trusted) > 0 && !bytes.Equal(trusted, ca.CertPEM) {
				return fmt.Errorf("the CA in Secret %s is not the one the members trust (Secret %s, key %s): "+
					"rotating a cluster's CA is not supported; restore the original CA", resources.CASecretName(c), leaf.SecretName, resources.CAKey)
			}
			certPEM, keyPEM = existing.Data[corev1.TLSCertKey], existing.Data[corev1.TLSPrivateKeyKey]
		}
		reason := ca.RenewalReason(certPEM, keyPEM, leaf.Request, now, resources.RenewBefore(c))
		if reason == "" {
			continue
		}
		certPEM, keyPEM, err := ca.Issue(leaf.Request, now)
		if err != nil {
			return fmt.Errorf("issue %s certificate: %w", leaf.Name, err)
		}
		if err := r.Apply(ctx, resources.TLSSecret(c, leaf.SecretName, certPEM, keyPEM, ca.CertPEM),
			client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("store %s certificate: %w", leaf.Name, err)
		}
		eventReason, verb := ReasonCertificateIssued, "issued"
		if existing != nil {
			eventReason, verb = ReasonCertificateRenewed, "renewed ("+reason+")"
		}
		logf.FromContext(ctx).Info("certificate "+verb, "certificate", leaf.Name, "secret", leaf.SecretName)
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, eventReason, "Issue", "%s certificate %s in Secret %s",
			leaf.Name, verb, leaf.SecretName)
		failpoint.Inject(failpoint.AfterCertificateIssued)
	}
	return nil
}

// tlsStatus reports the certificates as observed at the start of the reconcile; a renewal's Secret
// update brings the cluster back, and the next status shows it.
func tlsStatus(c *etcdv1beta1.EtcdCluster, t tlsObservation, o resources.Options) *etcdv1beta1.TLSStatus {
	if c.Spec.TLS.Enabled == nil {
		return c.Status.TLS
	}
	s := &etcdv1beta1.TLSStatus{Enabled: resources.TLSEnabled(c)}
	if !s.Enabled || t.refusal != "" {
		return s
	}
	s.ClientSecretName = resources.ClientSecretName(c)
	if t.ca != nil {
		s.Certificates = append(s.Certificates, etcdv1beta1.CertificateStatus{
			Name: resources.CertCA, SecretName: resources.CASecretName(c), NotAfter: metav1.NewTime(t.ca.Cert.NotAfter)})
	}
	for _, leaf := range resources.LeafCertificates(c, o) {
		sec := t.leaves[leaf.SecretName]
		if sec == nil {
			continue
		}
		cert, err := pki.ParseCertificate(sec.Data[corev1.TLSCertKey])
		if err != nil {
			continue
		}
		renew := metav1.NewTime(pki.RenewalTime(cert, resources.RenewBefore(c)))
		s.Certificates = append(s.Certificates, etcdv1beta1.CertificateStatus{
			Name: leaf.Name, SecretName: leaf.SecretName, NotAfter: metav1.NewTime(cert.NotAfter), RenewalTime: &renew})
	}
	return s
}

// nextRenewal is the earliest time a certificate of the cluster is due, or zero.
func nextRenewal(s *etcdv1beta1.TLSStatus) time.Time {
	if s == nil {
		return time.Time{}
	}
	var times []time.Time
	for _, cert := range s.Certificates {
		if cert.RenewalTime != nil {
			times = append(times, cert.RenewalTime.Time)
		}
	}
	if len(times) == 0 {
		return time.Time{}
	}
	return slices.MinFunc(times, func(a, b time.Time) int { return a.Compare(b) })
}
