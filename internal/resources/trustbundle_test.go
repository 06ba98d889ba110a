package resources

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
)

func testCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, _, err := pki.NewCA(name, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestParseCAs(t *testing.T) {
	a, b := testCA(t, "a"), testCA(t, "b")
	key := []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")
	for _, tc := range []struct {
		name   string
		bundle []byte
		want   []*pki.CA
	}{
		{"empty", nil, nil},
		{"one", a.CertPEM, []*pki.CA{a}},
		{"two, in order", append(append([]byte{}, b.CertPEM...), a.CertPEM...), []*pki.CA{b, a}},
		{"a duplicate counts once", bytes.Join([][]byte{a.CertPEM, b.CertPEM, a.CertPEM}, nil), []*pki.CA{a, b}},
		{"other blocks are skipped", bytes.Join([][]byte{key, a.CertPEM}, nil), []*pki.CA{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCAs(tc.bundle)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d CAs, want %d", len(got), len(tc.want))
			}
			for i, ca := range tc.want {
				if !bytes.Equal(got[i].Raw, ca.Cert.Raw) {
					t.Errorf("CA %d is %s, want %s", i, got[i].Subject, ca.Cert.Subject)
				}
			}
		})
	}
	if _, err := ParseCAs([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")); err == nil {
		t.Error("a certificate block that does not parse is an error")
	}
}

func TestCASetDiff(t *testing.T) {
	a, b, c := testCA(t, "a"), testCA(t, "b"), testCA(t, "c")
	old := CASet{a.Cert}
	issued := CASet{b.Cert}
	bundle := old.Union(issued)
	if len(bundle) != 2 || !bundle.Contains(a.Cert) || !bundle.Contains(b.Cert) {
		t.Fatalf("union of old and issued: %v", bundle.Names())
	}
	if !bundle.Union(issued).Equal(bundle) {
		t.Error("a union with CAs already there adds none")
	}
	if m := old.Missing(issued); len(m) != 1 || !m.Contains(b.Cert) {
		t.Errorf("old misses %v, want b", m.Names())
	}
	if m := bundle.Missing(issued); len(m) != 0 {
		t.Errorf("the bundle misses %v of the issued CAs", m.Names())
	}
	if m := issued.Missing(bundle); len(m) != 1 || !m.Contains(a.Cert) {
		t.Errorf("the CAs to drop once the issuer's alone sign: %v, want a", m.Names())
	}
	if !(CASet{b.Cert, a.Cert}).Equal(bundle) || bundle.Equal(CASet{a.Cert, c.Cert}) || bundle.Equal(old) {
		t.Error("Equal compares the sets, in any order")
	}
	if bundle.Contains(nil) || bundle.Contains(c.Cert) {
		t.Error("Contains holds only the set's CAs")
	}
}

func TestCASetSigner(t *testing.T) {
	a, b := testCA(t, "same name"), testCA(t, "same name")
	leafPEM, _, err := b.Issue(pki.Request{CommonName: "leaf", Usage: pki.ClientOnly, Validity: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCertificate(leafPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := (CASet{a.Cert, b.Cert}).Signer(leaf); got == nil || !bytes.Equal(got.Raw, b.Cert.Raw) {
		t.Error("the signer is the CA whose key signed, not another of the same name")
	}
	if got := (CASet{a.Cert}).Signer(leaf); got != nil {
		t.Error("a set without the signing CA has no signer")
	}
	if got := (CASet{a.Cert}).Signer(nil); got != nil {
		t.Error("no certificate, no signer")
	}
}

func TestTrustBundlePEMRoundTrips(t *testing.T) {
	a, b := testCA(t, "a"), testCA(t, "b")
	bundle := CASet{a.Cert, b.Cert}
	if want := append(append([]byte{}, a.CertPEM...), b.CertPEM...); !bytes.Equal(bundle.PEM(), want) {
		t.Errorf("the bundle is the CAs' PEM concatenated:\n%s\nwant\n%s", bundle.PEM(), want)
	}
	back, err := ParseCAs(bundle.PEM())
	if err != nil || !back.Equal(bundle) {
		t.Errorf("bundle read back: %v, %v", back.Names(), err)
	}
	if len(CASet(nil).PEM()) != 0 {
		t.Error("an empty set is an empty bundle")
	}
}

func TestTrustBundleDigest(t *testing.T) {
	a, b, c := testCA(t, "a"), testCA(t, "b"), testCA(t, "c")
	if d := TrustBundleDigest(nil); d != "" {
		t.Errorf("no CA: %q", d)
	}
	if d := TrustBundleDigest(CASet{a.Cert}); d != "" {
		t.Errorf("one CA leaves the template as before bundles existed, got %q", d)
	}
	ab, ba := TrustBundleDigest(CASet{a.Cert, b.Cert}), TrustBundleDigest(CASet{b.Cert, a.Cert})
	if ab == "" || ab != ba {
		t.Errorf("the digest does not depend on order: %q, %q", ab, ba)
	}
	if ac := TrustBundleDigest(CASet{a.Cert, c.Cert}); ac == ab {
		t.Error("another set, another digest")
	}
}

func TestWithTrustBundle(t *testing.T) {
	c := designCluster()
	c.Spec.Pod.Annotations = map[string]string{"team": "storage"}
	o := DefaultOptions()
	plain := StatefulSet(c, 3, o, nil, CurrentMemberGate(o))
	if got := WithTrustBundle(StatefulSet(c, 3, o, nil, CurrentMemberGate(o)), ""); len(got.Spec.Template.Annotations) != 1 {
		t.Errorf("no digest, no annotation: %v", got.Spec.Template.Annotations)
	}
	got := WithTrustBundle(plain, "0123456789abcdef").Spec.Template.Annotations
	if got[AnnotationTrustBundle] != "0123456789abcdef" || got["team"] != "storage" {
		t.Errorf("template annotations: %v", got)
	}
	if c.Spec.Pod.Annotations[AnnotationTrustBundle] != "" {
		t.Error("the spec's annotations are not written to")
	}
}

func TestIssuedSecrets(t *testing.T) {
	c := designCluster()
	c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca"}
	a, b := testCA(t, "a"), testCA(t, "b")
	for _, leaf := range LeafCertificates(c, DefaultOptions()) {
		cert := Certificate(c, leaf)
		if got, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); got != leaf.SecretName+"-issued" {
			t.Errorf("%s: cert-manager writes %q, want the staging Secret", leaf.Name, got)
		}
		s := IssuedTLSSecret(c, leaf, []byte("cert"), []byte("key"), CASet{a.Cert, b.Cert})
		if *s.Name != leaf.SecretName || s.Annotations[AnnotationCertificate] != CertificateName(leaf) {
			t.Errorf("%s: mounted Secret %s with annotations %v", leaf.Name, *s.Name, s.Annotations)
		}
		if want := append(append([]byte{}, a.CertPEM...), b.CertPEM...); !bytes.Equal(s.Data[CAKey], want) {
			t.Errorf("%s: ca.crt is not the bundle", leaf.Name)
		}
	}
}
