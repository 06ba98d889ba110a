package resources

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
)

// CertManagerGroup is cert-manager's API group, the default of spec.tls.issuerRef.group.
const CertManagerGroup = "cert-manager.io"

// CertificateGVK is cert-manager's Certificate. The operator builds Certificates as unstructured objects:
// cert-manager's Go module pins another Kubernetes minor than the operator and brings dozens of DNS and
// cloud SDKs, for four fields the operator writes and two it reads.
var CertificateGVK = schema.GroupVersionKind{Group: CertManagerGroup, Version: "v1", Kind: "Certificate"}

// IssuerGVK is the kind spec.tls.issuerRef names (Issuer or ClusterIssuer of cert-manager.io).
func IssuerGVK(ref *etcdv1beta1.IssuerReference) schema.GroupVersionKind {
	kind, group := ref.Kind, ref.Group
	if kind == "" {
		kind = "Issuer"
	}
	if group == "" {
		group = CertManagerGroup
	}
	return schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
}

// CertificateName is the name of the cert-manager Certificate behind a leaf certificate's Secret.
func CertificateName(leaf LeafCertificate) string { return leaf.SecretName }

// Certificate asks cert-manager for one leaf certificate with what the operator's own CA would issue: the
// same names, usages, lifetime and an ECDSA P-256 key, in a staging Secret (IssuedSecretName: cert-manager
// writes tls.crt, tls.key and the issuer's CA in ca.crt) from which the operator writes the Secret the members
// and backups mount, with the trust bundle (trustbundle.go). The staging Secret carries the operator's labels
// (secretTemplate) so that its cache, which holds only labelled Secrets, sees it. A new key on every renewal,
// as the operator does.
func Certificate(c *etcdv1beta1.EtcdCluster, leaf LeafCertificate) *unstructured.Unstructured {
	req := leaf.Request
	usages := []any{"digital signature", "key encipherment", "client auth"}
	if req.Usage == pki.ServerAndClient {
		usages = append(usages, "server auth")
	}
	spec := map[string]any{
		"secretName":     IssuedSecretName(leaf),
		"secretTemplate": map[string]any{"labels": stringMap(Labels(c, ComponentTLS))},
		"commonName":     req.CommonName,
		"duration":       CertificateDuration(c).String(),
		"renewBefore":    RenewBefore(c).String(),
		"usages":         usages,
		"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
		"issuerRef": map[string]any{
			"name":  c.Spec.TLS.IssuerRef.Name,
			"kind":  IssuerGVK(c.Spec.TLS.IssuerRef).Kind,
			"group": IssuerGVK(c.Spec.TLS.IssuerRef).Group,
		},
	}
	if len(req.DNSNames) > 0 {
		names := make([]any, len(req.DNSNames))
		for i, n := range req.DNSNames {
			names[i] = n
		}
		spec["dnsNames"] = names
	}
	if len(req.IPAddresses) > 0 {
		ips := make([]any, len(req.IPAddresses))
		for i, ip := range req.IPAddresses {
			ips[i] = ip.String()
		}
		spec["ipAddresses"] = ips
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":            CertificateName(leaf),
			"namespace":       c.Namespace,
			"labels":          stringMap(Labels(c, ComponentTLS)),
			"ownerReferences": []any{ownerReferenceMap(c)},
		},
		"spec": spec,
	}}
	u.SetGroupVersionKind(CertificateGVK)
	return u
}
