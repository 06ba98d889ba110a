// Package pki issues the certificates of an etcd cluster: a CA, and server, peer and client certificates
// signed by it. It is pure crypto over PEM bytes; the controller decides what to issue and where it lives.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// backdate covers clock skew between the operator and the members that verify a new certificate.
const backdate = 5 * time.Minute

// CA signs certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM is the CA certificate as members and clients trust it (ca.crt).
	CertPEM []byte
}

// Usage says which side of a TLS connection a certificate may authenticate.
type Usage int

const (
	// ServerAndClient: etcd members present their certificates in both directions (peers dial each other;
	// the gRPC gateway dials its own member).
	ServerAndClient Usage = iota
	// ClientOnly: users and the operator.
	ClientOnly
)

// Request describes a certificate to issue.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPAddresses  []net.IP
	Usage        Usage
	Validity     time.Duration
}

// NewCA creates a self-signed ECDSA P-256 CA.
func NewCA(commonName string, validity time.Duration, now time.Time) (*CA, []byte, error) {
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := ParseCA(encodeCert(der), keyPEM)
	return ca, keyPEM, err
}

// ParseCA reads a CA certificate and its private key, and checks that they belong together and that the
// certificate may sign others.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the certificate is not a CA (basic constraints CA:TRUE and key usage certSign are required)")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("the private key does not match the CA certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: encodeCert(cert.Raw)}, nil
}

// Issue creates a key pair and a certificate for req signed by ca. The certificate never outlives its CA.
func (ca *CA) Issue(req Request, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(req.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  extKeyUsage(req.Usage),
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return encodeCert(der), keyPEM, err
}

// RenewalReason says why a certificate must be (re-)issued for req, or "" when it can stay: it is missing
// or unreadable, not signed by ca, not for what req asks, or within renewBefore of its expiry.
func (ca *CA) RenewalReason(certPEM, keyPEM []byte, req Request, now time.Time, renewBefore time.Duration) string {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return "no valid certificate"
	}
	key, err := parseKey(keyPEM)
	if err != nil || !publicKeysEqual(cert.PublicKey, key.Public()) {
		return "the private key does not match the certificate"
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return "not signed by the cluster's CA"
	}
	if cert.Subject.CommonName != req.CommonName || !slices.Equal(cert.Subject.Organization, req.Organization) {
		return "subject changed"
	}
	if !sameStrings(cert.DNSNames, req.DNSNames) || !sameIPs(cert.IPAddresses, req.IPAddresses) {
		return "subject alternative names changed"
	}
	if !slices.Equal(cert.ExtKeyUsage, extKeyUsage(req.Usage)) {
		return "key usage changed"
	}
	if !now.Before(RenewalTime(cert, renewBefore)) {
		return fmt.Sprintf("expires at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

// RenewalTime is when a certificate is due for renewal: renewBefore ahead of its expiry, but never in the
// first tenth of its lifetime (a renewal window as long as the certificate would renew it forever).
func RenewalTime(cert *x509.Certificate, renewBefore time.Duration) time.Time {
	// Lifetime counts from issuance, not from the backdated NotBefore.
	issued := cert.NotBefore.Add(backdate)
	floor := issued.Add(cert.NotAfter.Sub(issued) / 10)
	if due := cert.NotAfter.Add(-renewBefore); due.After(floor) {
		return due
	}
	return floor
}

// ParseCertificate reads the first certificate of a PEM bundle.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(block.Bytes)
}

func extKeyUsage(u Usage) []x509.ExtKeyUsage {
	if u == ClientOnly {
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
}

// newKeyAndSerial makes the key pair and the random serial of a new certificate.
func newKeyAndSerial() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return key, serial, err
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseKey reads a PKCS#8, PKCS#1 (RSA) or SEC 1 (EC) private key, so user-supplied CAs of any usual
// format work.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, errors.New("unsupported private key type")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("unreadable private key (PKCS#8, PKCS#1 or SEC 1 PEM expected)")
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sameIPs(a, b []net.IP) bool {
	if len(a) != len(b) {
		return false
	}
	for _, ip := range a {
		if !slices.ContainsFunc(b, ip.Equal) {
			return false
		}
	}
	return true
}
