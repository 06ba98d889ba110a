package resources_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/resources"
)

// TestPeerPortRefusesClientCertificates runs a real etcd member with the operator's TLS configuration and
// certificates issued as the operator issues them: the peer port serves the peer certificate and refuses
// the client (root) and server certificates, although the cluster's CA signed all three.
func TestPeerPortRefusesClientCertificates(t *testing.T) {
	bin, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "peerauth", Namespace: "ns", UID: "u"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)}}}
	dir := t.TempDir()
	certs := issueLocal(t, c, dir)
	caPEM, pairs, files := certs.caPEM, certs.pairs, certs.files

	m := etcdtest.New(c.Name, filepath.Join(dir, "data"), bin)
	m.TLS = files
	m.Env = map[string]string{}
	for k, v := range resources.ConfigMap(c, resources.BootstrapConfig(c, 1, resources.DefaultOptions())).Data {
		if strings.HasPrefix(k, "ETCD_PEER_CERT_ALLOWED") {
			m.Env[k] = v
		}
	}
	if len(m.Env) == 0 {
		t.Fatal("the operator's configuration restricts no peer certificate")
	}
	t.Cleanup(m.Close)
	if err := m.Start(0, m.MemberName(0)+"="+m.PeerURL(0), "new"); err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	get := func(cert tls.Certificate) error {
		cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
		resp, err := cl.Get(m.PeerURL(0) + "/members")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("peer port answered %s", resp.Status)
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for err := get(pairs[resources.CertPeer]); err != nil; err = get(pairs[resources.CertPeer]) {
		if time.Now().After(deadline) {
			t.Fatalf("the peer certificate is refused on the peer port: %v\n%s", err, m.Log(0))
		}
		time.Sleep(100 * time.Millisecond) // the member is starting
	}
	for _, name := range []string{resources.CertClient, resources.CertServer} {
		if err := get(pairs[name]); err == nil {
			t.Errorf("the %s certificate is accepted on the peer port", name)
		}
	}
}
