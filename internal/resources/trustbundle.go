package resources

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// A cluster whose certificates come from cert-manager carries a CA change through without losing quorum:
// cert-manager writes each certificate into a staging Secret the members do not mount (IssuedSecretName),
// and the operator writes the Secrets they mount, with ca.crt the trust bundle, every CA the members must
// trust right now. etcd loads its trusted CAs once, at start, so a CA new to the bundle reaches a member
// only through a restart: the member template carries the bundle's digest (AnnotationTrustBundle) while it
// holds more than one CA, and a change of it restarts the members one at a time.
const (
	// AnnotationTrustBundle on the member template is TrustBundleDigest of the CAs the members load.
	AnnotationTrustBundle = "etcd.seedops.io/trust-bundle"
	// AnnotationCertificate on a Secret the operator writes from a cert-manager Certificate names the
	// Certificate: its certificates come from spec.tls.issuerRef's issuer.
	AnnotationCertificate = "etcd.seedops.io/certificate"
)

// IssuedSecretName is the staging Secret cert-manager writes a leaf certificate into.
func IssuedSecretName(leaf LeafCertificate) string { return leaf.SecretName + "-issued" }

// CASet is a set of CA certificates, each once (by its DER encoding), in the order first seen.
type CASet []*x509.Certificate

// ParseCAs reads every certificate of a PEM bundle (other blocks are skipped); an empty bundle is an empty set.
func ParseCAs(bundle []byte) (CASet, error) {
	var out CASet
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse CA certificate %d: %w", len(out)+1, err)
		}
		out = out.Union(CASet{cert})
	}
	return out, nil
}

// Contains reports whether cert is in s.
func (s CASet) Contains(cert *x509.Certificate) bool {
	return cert != nil && slices.ContainsFunc(s, func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, cert.Raw) })
}

// Union is s with the CAs of o it lacks appended.
func (s CASet) Union(o CASet) CASet {
	out := slices.Clone(s)
	for _, c := range o {
		if !out.Contains(c) {
			out = append(out, c)
		}
	}
	return out
}

// Missing are the CAs of o that s lacks.
func (s CASet) Missing(o CASet) CASet {
	var out CASet
	for _, c := range o {
		if !s.Contains(c) {
			out = append(out, c)
		}
	}
	return out
}

// Equal: s and o hold the same CAs, in any order.
func (s CASet) Equal(o CASet) bool { return len(s.Missing(o)) == 0 && len(o.Missing(s)) == 0 }

// Signer is the CA of s that signed cert, nil when none did.
func (s CASet) Signer(cert *x509.Certificate) *x509.Certificate {
	if cert == nil {
		return nil
	}
	for _, ca := range s {
		if bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}

// PEM is the trust bundle: the CAs' PEM blocks, concatenated in the set's order.
func (s CASet) PEM() []byte {
	var buf bytes.Buffer
	for _, c := range s {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// Names are the CAs' subjects, for messages.
func (s CASet) Names() []string {
	out := make([]string, len(s))
	for i, c := range s {
		out[i] = fmt.Sprintf("%q", c.Subject.String())
	}
	return out
}

// TrustBundleDigest identifies the set, whatever its order; "" for a set of at most one CA, which the member
// template does not record (a cluster that trusts one CA keeps the template it had before bundles existed).
func TrustBundleDigest(s CASet) string {
	if len(s) <= 1 {
		return ""
	}
	sums := make([]string, len(s))
	for i, c := range s {
		sum := sha256.Sum256(c.Raw)
		sums[i] = hex.EncodeToString(sum[:])
	}
	slices.Sort(sums)
	sum := sha256.New()
	for _, s := range sums {
		sum.Write([]byte(s))
	}
	return hex.EncodeToString(sum.Sum(nil))[:16]
}

// WithTrustBundle records the digest of the CAs the members are to load on the member template (nothing for
// a digest of ""); a change of it restarts the members one at a time.
func WithTrustBundle(sts *appsv1ac.StatefulSetApplyConfiguration, digest string) *appsv1ac.StatefulSetApplyConfiguration {
	if digest != "" && sts.Spec != nil && sts.Spec.Template != nil {
		sts.Spec.Template.WithAnnotations(map[string]string{AnnotationTrustBundle: digest})
	}
	return sts
}

// IssuedTLSSecret is a Secret the members mount, written by the operator from cert-manager's staging Secret of
// Certificate certificate: its certificate and key, and the trust bundle in ca.crt.
func IssuedTLSSecret(c *etcdv1beta1.EtcdCluster, leaf LeafCertificate, certPEM, keyPEM []byte, bundle CASet) *corev1ac.SecretApplyConfiguration {
	return TLSSecret(c, leaf.SecretName, certPEM, keyPEM, bundle.PEM()).
		WithAnnotations(map[string]string{AnnotationCertificate: CertificateName(leaf)})
}
