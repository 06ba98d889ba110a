package resources

import (
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
)

// Certificates of a cluster, as named in status.tls.certificates.
const (
	CertCA     = "ca"
	CertServer = "server"
	CertPeer   = "peer"
	CertClient = "client"
)

// Where the members and the backup pods find their certificates.
const (
	serverTLSMountPath = "/etc/etcd/tls/server"
	peerTLSMountPath   = "/etc/etcd/tls/peer"
	clientTLSMountPath = "/etc/etcd/tls/client"
	serverTLSVolume    = "server-tls"
	peerTLSVolume      = "peer-tls"
	clientTLSVolume    = "client-tls"
	// CAKey is the key of the CA certificate in every certificate Secret, next to tls.crt and tls.key.
	CAKey = "ca.crt"
)

// Defaults of spec.tls (the CRD defaults them too; the builders do not rely on it).
const (
	DefaultCertificateDuration = 90 * 24 * time.Hour
	DefaultRenewBefore         = 30 * 24 * time.Hour
	// CAValidity is the lifetime of a CA the operator creates. CAs are not rotated (members trust one CA
	// for their lifetime), so it is long.
	CAValidity = 10 * 365 * 24 * time.Hour
	// ClientCommonName is the user the client certificate authenticates as when etcd authentication is on.
	ClientCommonName = "root"
)

// TLSEnabled reports whether the cluster serves TLS. Unset means on: the controller records the effective
// value in the spec before it builds anything, so an unset field only reaches the builders in tests.
func TLSEnabled(c *etcdv1beta1.EtcdCluster) bool {
	return c.Spec.TLS.Enabled == nil || *c.Spec.TLS.Enabled
}

func scheme(c *etcdv1beta1.EtcdCluster) string {
	if TLSEnabled(c) {
		return "https"
	}
	return "http"
}

// Secret names of a cluster's certificates.
func CASecretName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.TLS.CASecretName != "" {
		return c.Spec.TLS.CASecretName
	}
	return c.Name + "-ca"
}
func ServerSecretName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-server-tls" }
func PeerSecretName(c *etcdv1beta1.EtcdCluster) string   { return c.Name + "-peer-tls" }
func ClientSecretName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-client-tls" }

// CertificateDuration and RenewBefore are spec.tls's, or their defaults.
func CertificateDuration(c *etcdv1beta1.EtcdCluster) time.Duration {
	if d := c.Spec.TLS.CertificateDuration; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultCertificateDuration
}

func RenewBefore(c *etcdv1beta1.EtcdCluster) time.Duration {
	if d := c.Spec.TLS.RenewBefore; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return DefaultRenewBefore
}

// LeafCertificate is a certificate the operator issues from the cluster's CA.
type LeafCertificate struct {
	// Name is CertServer, CertPeer or CertClient.
	Name       string
	SecretName string
	Request    pki.Request
}

// LeafCertificates are the server, peer and client certificates of a cluster. Members share one server and
// one peer certificate whose names cover every member's stable DNS name (a wildcard under the headless
// Service), so scaling never needs a new certificate.
func LeafCertificates(c *etcdv1beta1.EtcdCluster, o Options) []LeafCertificate {
	svc := c.Namespace + ".svc"
	members := []string{
		"*." + PeerServiceName(c) + "." + svc + "." + o.ClusterDomain,
		"*." + PeerServiceName(c) + "." + svc,
	}
	client := ClientServiceName(c)
	server := append(append([]string{}, members...),
		client+"."+svc+"."+o.ClusterDomain, client+"."+svc, client+"."+c.Namespace, client, "localhost")
	validity := CertificateDuration(c)
	return []LeafCertificate{
		{Name: CertServer, SecretName: ServerSecretName(c), Request: pki.Request{
			CommonName: c.Name + "-server", DNSNames: server, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			Usage: pki.ServerAndClient, Validity: validity}},
		{Name: CertPeer, SecretName: PeerSecretName(c), Request: pki.Request{
			CommonName: PeerCommonName(c), DNSNames: members, Usage: pki.ServerAndClient, Validity: validity}},
		{Name: CertClient, SecretName: ClientSecretName(c), Request: pki.Request{
			CommonName: ClientCommonName, Usage: pki.ClientOnly, Validity: validity}},
	}
}

// TLSSecret holds one issued certificate with its key and the CA that signed it, in the layout of
// kubernetes.io/tls Secrets that cert-manager also uses, so clients can mount it as is.
func TLSSecret(c *etcdv1beta1.EtcdCluster, name string, certPEM, keyPEM, caPEM []byte) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(name, c.Namespace).
		WithLabels(Labels(c, ComponentTLS)).
		WithOwnerReferences(OwnerReference(c)).
		WithType(corev1.SecretTypeTLS).
		WithData(map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, CAKey: caPEM})
}

// PeerCommonName is the common name of the cluster's peer certificate; the peer port accepts no other.
func PeerCommonName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-peer" }

// tlsConfigEnv is etcd's TLS configuration: client and peer listeners over TLS, both requiring a
// certificate signed by the cluster's CA. The metrics listener stays plain HTTP for the kubelet's probes.
// The peer port accepts only the peer certificate's common name: the client and server certificates come
// from the same CA and carry client usage, and without the check a client's certificate (root's) would
// open the raft and member endpoints to any holder (with the operator's own CA the address check is off).
func tlsConfigEnv(c *etcdv1beta1.EtcdCluster) map[string]string {
	return map[string]string{
		"ETCD_PEER_CERT_ALLOWED_CN":  PeerCommonName(c),
		"ETCD_CERT_FILE":             serverTLSMountPath + "/" + corev1.TLSCertKey,
		"ETCD_KEY_FILE":              serverTLSMountPath + "/" + corev1.TLSPrivateKeyKey,
		"ETCD_TRUSTED_CA_FILE":       serverTLSMountPath + "/" + CAKey,
		"ETCD_CLIENT_CERT_AUTH":      "true",
		"ETCD_PEER_CERT_FILE":        peerTLSMountPath + "/" + corev1.TLSCertKey,
		"ETCD_PEER_KEY_FILE":         peerTLSMountPath + "/" + corev1.TLSPrivateKeyKey,
		"ETCD_PEER_TRUSTED_CA_FILE":  peerTLSMountPath + "/" + CAKey,
		"ETCD_PEER_CLIENT_CERT_AUTH": "true",
	}
}

// etcdctlEnv lets `etcdctl` run inside a member container without flags: it authenticates with the
// member's server certificate (which is also a client certificate) against the local member.
func etcdctlEnv() []*corev1ac.EnvVarApplyConfiguration {
	return []*corev1ac.EnvVarApplyConfiguration{
		corev1ac.EnvVar().WithName("ETCDCTL_CACERT").WithValue(serverTLSMountPath + "/" + CAKey),
		corev1ac.EnvVar().WithName("ETCDCTL_CERT").WithValue(serverTLSMountPath + "/" + corev1.TLSCertKey),
		corev1ac.EnvVar().WithName("ETCDCTL_KEY").WithValue(serverTLSMountPath + "/" + corev1.TLSPrivateKeyKey),
	}
}

// secretVolume mounts a certificate Secret readable by the container's group only (fsGroup).
func secretVolume(name, secret string) *corev1ac.VolumeApplyConfiguration {
	return corev1ac.Volume().WithName(name).WithSecret(corev1ac.SecretVolumeSource().
		WithSecretName(secret).WithDefaultMode(0o440))
}
