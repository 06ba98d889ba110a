package pki

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, validity time.Duration) (*CA, []byte) {
	t.Helper()
	ca, key, err := NewCA("test-ca", validity, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func serverRequest() Request {
	return Request{
		CommonName:  "demo-server",
		DNSNames:    []string{"*.demo.ns.svc.cluster.local", "demo-client.ns.svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		Usage:       ServerAndClient,
		Validity:    90 * 24 * time.Hour,
	}
}

func TestIssueVerifiesForEveryName(t *testing.T) {
	ca, _ := mustCA(t, 10*365*24*time.Hour)
	certPEM, keyPEM, err := ca.Issue(serverRequest(), now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, name := range []string{"demo-0.demo.ns.svc.cluster.local", "demo-client.ns.svc", "localhost", "127.0.0.1"} {
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("verify %s for usage %v: %v", name, usage, err)
			}
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "demo-0.other.ns.svc.cluster.local", Roots: roots, CurrentTime: now}); err == nil {
		t.Error("certificate verified for a name it was not issued for")
	}
	if got := ca.RenewalReason(certPEM, keyPEM, serverRequest(), now, 30*24*time.Hour); got != "" {
		t.Errorf("fresh certificate needs renewal: %s", got)
	}
	if !cert.NotAfter.Equal(now.Add(90 * 24 * time.Hour)) {
		t.Errorf("NotAfter %s, want %s", cert.NotAfter, now.Add(90*24*time.Hour))
	}
}

func TestClientCertificateCannotServe(t *testing.T) {
	ca, _ := mustCA(t, 365*24*time.Hour)
	req := Request{CommonName: "root", Usage: ClientOnly, Validity: time.Hour}
	certPEM, _, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := ParseCertificate(certPEM)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client usage: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verified for server use")
	}
}

func TestRenewalReason(t *testing.T) {
	ca, _ := mustCA(t, 10*365*24*time.Hour)
	other, _ := mustCA(t, 10*365*24*time.Hour)
	req := serverRequest()
	certPEM, keyPEM, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, _ := other.Issue(req, now)
	_, strayKey, _ := ca.Issue(req, now)
	moreNames := serverRequest()
	moreNames.DNSNames = append(moreNames.DNSNames, "extra.example")
	clientReq := serverRequest()
	clientReq.Usage = ClientOnly
	renewBefore := 30 * 24 * time.Hour

	for _, tc := range []struct {
		name      string
		cert, key []byte
		req       Request
		at        time.Time
		want      string
	}{
		{"fresh", certPEM, keyPEM, req, now, ""},
		{"one day before the window", certPEM, keyPEM, req, now.Add(59 * 24 * time.Hour), ""},
		{"in the window", certPEM, keyPEM, req, now.Add(60 * 24 * time.Hour), "expires at"},
		{"expired", certPEM, keyPEM, req, now.Add(100 * 24 * time.Hour), "expires at"},
		{"missing", nil, nil, req, now, "no valid certificate"},
		{"garbage", []byte("not a certificate"), keyPEM, req, now, "no valid certificate"},
		{"foreign key", certPEM, strayKey, req, now, "private key does not match"},
		{"other CA", otherCert, otherKey, req, now, "not signed by the cluster's CA"},
		{"names changed", certPEM, keyPEM, moreNames, now, "subject alternative names changed"},
		{"usage changed", certPEM, keyPEM, clientReq, now, "key usage changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ca.RenewalReason(tc.cert, tc.key, tc.req, tc.at, renewBefore)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("RenewalReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRenewalWindowNeverCoversTheWholeLifetime(t *testing.T) {
	ca, _ := mustCA(t, 365*24*time.Hour)
	req := Request{CommonName: "root", Usage: ClientOnly, Validity: 3 * time.Hour}
	certPEM, _, _ := ca.Issue(req, now)
	cert, _ := ParseCertificate(certPEM)
	// A window of 10h on a certificate living 3h would renew it on every reconcile: it waits 18 minutes.
	got := RenewalTime(cert, 10*time.Hour)
	want := now.Add(18 * time.Minute)
	if !got.Equal(want) {
		t.Errorf("RenewalTime = %s, want %s", got, want)
	}
}

func TestIssuedCertificateNeverOutlivesItsCA(t *testing.T) {
	ca, _ := mustCA(t, 24*time.Hour)
	certPEM, _, _ := ca.Issue(Request{CommonName: "root", Usage: ClientOnly, Validity: 90 * 24 * time.Hour}, now)
	cert, _ := ParseCertificate(certPEM)
	if cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("certificate expires %s after its CA %s", cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestParseCA(t *testing.T) {
	ca, key := mustCA(t, time.Hour)
	if _, err := ParseCA(ca.CertPEM, key); err != nil {
		t.Fatalf("own CA: %v", err)
	}
	_, otherKey := mustCA(t, time.Hour)
	if _, err := ParseCA(ca.CertPEM, otherKey); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched key: %v", err)
	}
	leaf, leafKey, _ := ca.Issue(Request{CommonName: "x", Usage: ClientOnly, Validity: time.Hour}, now)
	if _, err := ParseCA(leaf, leafKey); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("leaf as CA: %v", err)
	}
	if _, err := ParseCA([]byte("junk"), key); err == nil {
		t.Error("junk accepted as a CA")
	}
}
