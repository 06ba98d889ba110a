package controllers

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
)

// A cluster with spec.tls.issuerRef has cert-manager write each certificate into a staging Secret
// (resources.IssuedSecretName) and the operator write the Secret the members mount from it, with ca.crt the
// trust bundle: every CA the members must trust right now. etcd reloads its certificate and key on every
// handshake but loads its trusted CAs once, at start. So:
//   - a certificate renewed by the CA the members trust is taken into the mounted Secret at once;
//   - a certificate from a CA the bundle lacks (the issuer's CA was replaced) first adds that CA to the
//     bundle, and the members restart one at a time (the member template carries the bundle's digest,
//     resources.WithTrustBundle, and the planner rolls it like any template change) while they keep
//     presenting certificates of the old CA;
//   - once every member runs a template that loads the bundle, the certificates of the new CA are taken;
//   - once every mounted certificate comes from the new CA, the old one leaves the bundle and the members
//     restart once more.
//
// Each step is read back from the Secrets (the bundle and the certificates they hold) and the members'
// template (its digest, the pods' revisions), so an operator restart resumes where the change was.

// issuedCAs are the CAs of the staging Secrets' ca.crt.
func issuedCAs(t tlsObservation, leaves []resources.LeafCertificate) (resources.CASet, error) {
	var out resources.CASet
	for _, leaf := range leaves {
		s := t.issued[leaf.SecretName]
		cas, err := resources.ParseCAs(s.Data[resources.CAKey])
		if err != nil {
			return nil, fmt.Errorf("the CA of staging Secret %s written by cert-manager (key %s): %w", s.Name, resources.CAKey, err)
		}
		if len(cas) == 0 {
			return nil, fmt.Errorf("the staging Secret %s written by cert-manager holds no CA in %s: the members need the issuer's CA "+
				"to verify each other; use an issuer that provides it (a CA or Vault issuer)", s.Name, resources.CAKey)
		}
		out = out.Union(cas)
	}
	return out, nil
}

// membersLoaded reports whether every member runs a template that loads the trust bundle of digest (pods
// carry their template's annotations; a pod without one was started on a single CA); when not, what that
// waits for.
func membersLoaded(obs observation, digest string) (bool, string) {
	sts := obs.statefulSet
	if sts == nil {
		return true, "" // no member runs yet
	}
	if sts.Spec.Template.Annotations[resources.AnnotationTrustBundle] != digest {
		return false, "the member template to carry the trust bundle"
	}
	var waiting []string
	for i := range obs.pods {
		if obs.pods[i].Annotations[resources.AnnotationTrustBundle] != digest {
			waiting = append(waiting, obs.pods[i].Name)
		}
	}
	if len(waiting) > 0 {
		return false, fmt.Sprintf("members %s to restart, one at a time, with the trust bundle", strings.Join(waiting, ", "))
	}
	return true, ""
}

// secretCert is the certificate of a Secret's tls.crt, nil when there is none (or no Secret).
func secretCert(s *corev1.Secret) *x509.Certificate {
	if s == nil {
		return nil
	}
	return certOf(s.Data[corev1.TLSCertKey])
}

// certOf is the first certificate of a PEM bundle, nil when there is none.
func certOf(certPEM []byte) *x509.Certificate {
	cert, err := pki.ParseCertificate(certPEM)
	if err != nil {
		return nil
	}
	return cert
}

// reconcileIssuedSecrets writes the Secrets the members mount from cert-manager's staging Secrets, carrying a
// change of the issuer's CA through the trust bundle (see above). It records the digest of the bundle for the
// member template (t.trustDigest) and, while a CA change is under way, what it waits for (t.caChange).
func (r *EtcdClusterReconciler) reconcileIssuedSecrets(ctx context.Context, s *reconcileScope) error {
	c, t := s.cluster, &s.obs.tls
	leaves := resources.LeafCertificates(c, t.options)
	issuer, err := issuedCAs(*t, leaves)
	if err != nil {
		return err
	}
	bundle := t.bundle
	loaded, _ := membersLoaded(s.obs, resources.TrustBundleDigest(bundle))
	// The CAs every running member trusts: the bundle once every member loaded it; before, at least the CAs
	// of the certificates mounted now (none is mounted before every member trusts its CA).
	trusted := resources.CASet{}
	if loaded {
		trusted = bundle
	}
	mountedSigners := resources.CASet{}
	for _, leaf := range leaves {
		if ca := bundle.Signer(secretCert(t.leaves[leaf.SecretName])); ca != nil {
			mountedSigners = mountedSigners.Union(resources.CASet{ca})
		}
	}
	trusted = trusted.Union(mountedSigners)

	// The certificates to mount: the issued one where every member trusts its CA (or no member runs on the
	// mounted one yet), else the one mounted now.
	type mount struct{ cert, key []byte }
	mounts := map[string]mount{}
	var held []string
	heldCAs := resources.CASet{}
	finalSigners := resources.CASet{}
	for _, leaf := range leaves {
		issued, mounted := t.issued[leaf.SecretName], t.leaves[leaf.SecretName]
		m := mount{issued.Data[corev1.TLSCertKey], issued.Data[corev1.TLSPrivateKeyKey]}
		signer := issuer.Signer(certOf(m.cert))
		if secretCert(mounted) != nil && !bytes.Equal(mounted.Data[corev1.TLSCertKey], m.cert) &&
			(signer == nil || !trusted.Contains(signer)) {
			m = mount{mounted.Data[corev1.TLSCertKey], mounted.Data[corev1.TLSPrivateKeyKey]}
			held = append(held, leaf.Name)
			if signer != nil {
				heldCAs = heldCAs.Union(resources.CASet{signer})
			}
		}
		mounts[leaf.SecretName] = m
		if ca := issuer.Union(bundle).Signer(certOf(m.cert)); ca != nil {
			finalSigners = finalSigners.Union(resources.CASet{ca})
		}
	}

	// The bundle: the issuer's CAs, and every CA a mounted certificate still comes from (as observed, and as
	// written now: an old CA leaves only after the reconcile that saw every certificate from the new one).
	var desired resources.CASet
	for _, ca := range bundle.Union(issuer) {
		if issuer.Contains(ca) || mountedSigners.Contains(ca) || finalSigners.Contains(ca) {
			desired = append(desired, ca)
		}
	}
	added, dropped := bundle.Missing(desired), desired.Missing(bundle)
	t.trustDigest = resources.TrustBundleDigest(desired)

	for _, leaf := range leaves {
		m, existing := mounts[leaf.SecretName], t.leaves[leaf.SecretName]
		if existing != nil && bytes.Equal(existing.Data[corev1.TLSCertKey], m.cert) && bytes.Equal(existing.Data[corev1.TLSPrivateKeyKey], m.key) &&
			bytes.Equal(existing.Data[resources.CAKey], desired.PEM()) && existing.Annotations[resources.AnnotationCertificate] == resources.CertificateName(leaf) &&
			metav1.IsControlledBy(existing, c) {
			continue
		}
		if err := r.Apply(ctx, resources.IssuedTLSSecret(c, leaf, m.cert, m.key, desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("store %s certificate: %w", leaf.Name, err)
		}
		logf.FromContext(ctx).Info("certificate taken from cert-manager", "certificate", leaf.Name, "secret", leaf.SecretName)
		switch {
		case existing == nil:
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCertificateIssued, "Issue", "%s certificate issued by cert-manager, in Secret %s",
				leaf.Name, leaf.SecretName)
		case !bytes.Equal(existing.Data[corev1.TLSCertKey], m.cert):
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCertificateRenewed, "Issue", "%s certificate renewed by cert-manager, in Secret %s",
				leaf.Name, leaf.SecretName)
		}
	}
	switch {
	case len(bundle) == 0: // a new cluster
	case len(added) > 0:
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCARotating, "TrustBundle",
			"the issuer's CA changed: CA %s added to the trust bundle; the members restart one at a time to load it, "+
				"and keep their certificates of the old CA until every one has", strings.Join(added.Names(), ", "))
	case len(dropped) > 0:
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCARotating, "TrustBundle",
			"every certificate comes from the issuer's CA: CA %s dropped from the trust bundle; the members restart one at a time to drop it",
			strings.Join(dropped.Names(), ", "))
	case len(mountedSigners.Missing(finalSigners)) > 0:
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonCARotating, "Certificates",
			"every member trusts CA %s: its certificates are taken into the mounted Secrets", strings.Join(mountedSigners.Missing(finalSigners).Names(), ", "))
	}

	// What the change waits for, until the members trust the issuer's CAs alone.
	loadedDesired, waitsForDesired := membersLoaded(s.obs, t.trustDigest)
	switch {
	case len(bundle) == 0:
	case len(held) > 0:
		t.caChange = fmt.Sprintf("the issuer's CA changed: the %s certificates of CA %s wait until every member trusts it "+
			"(trust bundle: %s); waiting for %s", strings.Join(held, ", "), strings.Join(heldCAs.Names(), ", "),
			strings.Join(desired.Names(), ", "), orDefault(waitsForDesired, "the next reconcile"))
	case !desired.Equal(issuer):
		t.caChange = fmt.Sprintf("the issuer's CA changed: every certificate comes from CA %s; CA %s leaves the trust bundle next",
			strings.Join(issuer.Names(), ", "), strings.Join(issuer.Missing(desired).Names(), ", "))
	case !loadedDesired:
		t.caChange = fmt.Sprintf("the issuer's CA changed: the members restart one at a time to trust CA %s alone; waiting for %s",
			strings.Join(desired.Names(), ", "), waitsForDesired)
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
