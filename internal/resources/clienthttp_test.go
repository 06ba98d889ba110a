package resources_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/internal/testproc"
)

// localCertificates issues c's certificates as the operator issues them (resources.LeafCertificates), each
// also naming 127.0.0.1 (local members dial each other and are dialled by address), and writes them to dir.
type localCertificates struct {
	ca    *pki.CA
	files *etcdtest.TLSFiles
	caPEM []byte
	pem   map[string][2][]byte       // certificate name -> certificate, key
	pairs map[string]tls.Certificate // certificate name -> key pair
}

func issueLocal(t *testing.T, c *etcdv1beta1.EtcdCluster, dir string) *localCertificates {
	t.Helper()
	now := time.Now()
	ca, _, err := pki.NewCA(c.Name+"-ca", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	l := &localCertificates{ca: ca, files: &etcdtest.TLSFiles{CA: write("ca.crt", ca.CertPEM)}, caPEM: ca.CertPEM,
		pem: map[string][2][]byte{}, pairs: map[string]tls.Certificate{}}
	for _, leaf := range resources.LeafCertificates(c, resources.DefaultOptions()) {
		req := leaf.Request
		req.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		certPEM, keyPEM, err := ca.Issue(req, now)
		if err != nil {
			t.Fatal(err)
		}
		if l.pairs[leaf.Name], err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		l.pem[leaf.Name] = [2][]byte{certPEM, keyPEM}
		crt, key := write(leaf.Name+".crt", certPEM), write(leaf.Name+".key", keyPEM)
		switch leaf.Name {
		case resources.CertServer:
			l.files.ServerCert, l.files.ServerKey = crt, key
		case resources.CertPeer:
			l.files.PeerCert, l.files.PeerKey = crt, key
		}
	}
	return l
}

// TestClientHTTPSplitOnRealEtcd runs three real members with the operator's ConfigMap of a TLS cluster
// (addresses and files made local) and checks what the split of the client port means: gRPC, what the
// operator, its backups and `kubectl etcd` use, works on the client port with the operator's client
// configuration and with etcdctl as the plugin runs it; etcd's HTTP endpoints (/health, /version, the JSON
// gateway) answer on the HTTP port, still requiring a client certificate, and no longer on the client port;
// the kubelet's probes still pass on the plain metrics listener; a renewed server certificate reaches both
// ports without a restart. For the etcd the project ships and the newer one it runs.
func TestClientHTTPSplitOnRealEtcd(t *testing.T) {
	for _, tc := range []struct {
		variable, version string
		binary            func() (string, error)
	}{
		{"ETCD_BIN_DIR", "3.5.35", etcdtest.Binary},
		{"ETCD_NEXT_BIN_DIR", "3.6.16", etcdtest.NextBinary},
	} {
		t.Run(tc.version, func(t *testing.T) {
			bin, err := tc.binary()
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "--version").Output(); err != nil || !strings.Contains(string(out), "etcd Version: "+tc.version+"\n") {
				t.Fatalf("%s is not etcd %s (%v): %s", tc.variable, tc.version, err, out)
			}
			testClientHTTPSplit(t, bin, tc.version)
		})
	}
}

func testClientHTTPSplit(t *testing.T, bin, version string) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "split", Namespace: "ns", UID: "u"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: version, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)}}}
	if !resources.SplitsClientHTTP(c) {
		t.Fatalf("etcd %s with TLS does not split", version)
	}
	dir := t.TempDir()
	certs := issueLocal(t, c, dir)
	const n = 3
	data := resources.ConfigMap(c, resources.BootstrapConfig(c, n, resources.DefaultOptions())).Data
	m := etcdtest.New(c.Name, filepath.Join(dir, "data"), bin)
	m.TLS = certs.files
	t.Cleanup(m.Close)

	// A member's environment is the ConfigMap's, but for what the harness gives as flags (its own
	// addresses, data directory, files) and the listeners it does not know: on local ports of their own.
	httpURLs, metricsURLs := make([]string, n), make([]string, n)
	local := func(operators string) string {
		u, err := url.Parse(operators)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = fmt.Sprintf("127.0.0.1:%d", testproc.Port())
		return u.String()
	}
	for i := range n {
		env := map[string]string{}
		for k, v := range data {
			switch {
			case k == "ETCD_DATA_DIR" || k == "ETCD_LISTEN_PEER_URLS" || k == "ETCD_LISTEN_CLIENT_URLS" ||
				strings.HasPrefix(k, "ETCD_INITIAL_CLUSTER") || strings.HasPrefix(v, "/etc/etcd/tls/"):
			case k == "ETCD_CLIENT_CERT_AUTH" || k == "ETCD_PEER_CLIENT_CERT_AUTH":
				// The harness's TLS flags turn both on; etcd refuses a variable a flag shadows.
				if v != "true" {
					t.Fatalf("the operator's configuration has %s=%s", k, v)
				}
			case k == resources.ClientHTTPURLsEnv:
				httpURLs[i] = local(v)
				env[k] = httpURLs[i]
			case k == "ETCD_LISTEN_METRICS_URLS":
				metricsURLs[i] = local(v)
				env[k] = metricsURLs[i]
			default:
				env[k] = v
			}
		}
		if httpURLs[i] == "" || !strings.HasPrefix(httpURLs[i], "https://") {
			t.Fatalf("the operator's configuration has no https %s: %v", resources.ClientHTTPURLsEnv, data)
		}
		if err := m.StartWithEnv(i, m.InitialCluster(etcdtest.Ordinals(n)), "new", env); err != nil {
			t.Fatal(err)
		}
	}

	// gRPC on the client port: the operator's client (its TLS configuration and dialer), then clientv3.
	tlsConfig, err := etcd.ClientTLSConfig(certs.caPEM, certs.pem[resources.CertClient][0], certs.pem[resources.CertClient][1])
	if err != nil {
		t.Fatal(err)
	}
	cli := m.Client(t, tlsConfig, etcdtest.Ordinals(n)...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put over gRPC on the client port: %v", err)
	}
	var clientURLs []string
	for i := range n {
		clientURLs = append(clientURLs, m.ClientURL(i))
	}
	op, err := etcd.NewDialer(5*time.Second).Dial(ctx, clientURLs, tlsConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = op.Close() }()
	if members, err := op.MemberList(ctx); err != nil || len(members) != n {
		t.Fatalf("the operator's member list: %v, %v", members, err)
	}
	for i := range n {
		if st, err := op.Status(ctx, m.ClientURL(i)); err != nil || st.Version != version {
			t.Errorf("the operator's status of member %d: %+v, %v", i, st, err)
		}
	}

	// etcdctl inside a member, as `kubectl etcd` runs it: the member's server certificate, its own address.
	etcdctl := exec.Command(filepath.Join(filepath.Dir(bin), "etcdctl"), "--endpoints="+m.ClientURL(0), "endpoint", "health")
	etcdctl.Env = append(os.Environ(), "ETCDCTL_CACERT="+certs.files.CA, "ETCDCTL_CERT="+certs.files.ServerCert, "ETCDCTL_KEY="+certs.files.ServerKey)
	if out, err := etcdctl.CombinedOutput(); err != nil || !strings.Contains(string(out), "is healthy") {
		t.Errorf("etcdctl endpoint health on the client port: %v: %s", err, out)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certs.caPEM)
	httpClient := func(withCert bool) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if withCert {
			cfg.Certificates = []tls.Certificate{certs.pairs[resources.CertClient]}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	}
	do := func(cl *http.Client, method, u, body string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	key := base64.StdEncoding.EncodeToString([]byte("k"))
	for i := range n {
		// The HTTP endpoints on the HTTP port, with the client certificate.
		if code, body, err := do(httpClient(true), http.MethodGet, httpURLs[i]+"/health", ""); err != nil || code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
			t.Errorf("member %d: /health on the HTTP port: %d %q %v\n%s", i, code, body, err, m.Log(i))
		}
		if code, body, err := do(httpClient(true), http.MethodGet, httpURLs[i]+"/version", ""); err != nil || code != http.StatusOK || !strings.Contains(body, `"etcdserver":"`+version+`"`) {
			t.Errorf("member %d: /version on the HTTP port: %d %q %v", i, code, body, err)
		}
		if code, body, err := do(httpClient(true), http.MethodPost, httpURLs[i]+"/v3/kv/range", `{"key":"`+key+`"}`); err != nil || code != http.StatusOK ||
			!strings.Contains(body, base64.StdEncoding.EncodeToString([]byte("v"))) {
			t.Errorf("member %d: the JSON gateway on the HTTP port: %d %q %v", i, code, body, err)
		}
		// ... which still requires a client certificate of the cluster's CA.
		if code, _, err := do(httpClient(false), http.MethodGet, httpURLs[i]+"/health", ""); err == nil {
			t.Errorf("member %d: the HTTP port answered a client without certificate: %d", i, code)
		}
		// ... and no longer on the client port, which serves gRPC alone.
		if code, body, err := do(httpClient(true), http.MethodGet, m.ClientURL(i)+"/health", ""); err == nil && code == http.StatusOK {
			t.Errorf("member %d: the client port still serves /health: %q", i, body)
		}
		// The kubelet's probes: plain HTTP on the metrics listener.
		for _, path := range []string{resources.StartupProbePath, resources.LivenessProbePath, "/health", "/readyz"} {
			if code, body, err := do(http.DefaultClient, http.MethodGet, metricsURLs[i]+path, ""); err != nil || code != http.StatusOK {
				t.Errorf("member %d: probe %s on the metrics listener: %d %q %v", i, path, code, body, err)
			}
		}
		// etcd took the setting up (it would only warn about an ETCD_* variable it does not know).
		if log := m.FullLog(i); !strings.Contains(log, `"recognized and used environment variable","variable-name":"`+resources.ClientHTTPURLsEnv+`"`) {
			t.Errorf("member %d did not use %s:\n%s", i, resources.ClientHTTPURLsEnv, log)
		}
	}

	// Renewal: the operator rewrites the server certificate's Secret and members read the files on every
	// new connection, on the HTTP port as on the client port (docs/tls.md).
	var req pki.Request
	for _, leaf := range resources.LeafCertificates(c, resources.DefaultOptions()) {
		if leaf.Name == resources.CertServer {
			req = leaf.Request
		}
	}
	req.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	certPEM, keyPEM, err := certs.ca.Issue(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: a handshake between the two writes fails, and the next one reads both anew.
	if err := os.WriteFile(certs.files.ServerKey, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certs.files.ServerCert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	served := func(u string) ([]byte, error) {
		host := strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12,
			Certificates: []tls.Certificate{certs.pairs[resources.CertClient]}})
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].Raw, nil
	}
	for i := range n {
		for name, u := range map[string]string{"client": m.ClientURL(i), "HTTP": httpURLs[i]} {
			if raw, err := served(u); err != nil || !bytes.Equal(raw, renewed.Certificate[0]) {
				t.Errorf("member %d: the %s port does not serve the renewed certificate (%v)", i, name, err)
			}
		}
	}
	if code, _, err := do(httpClient(true), http.MethodGet, httpURLs[0]+"/health", ""); err != nil || code != http.StatusOK {
		t.Errorf("/health on the HTTP port after the renewal: %d %v", code, err)
	}
	if _, err := cli.Get(ctx, "k"); err != nil {
		t.Errorf("gRPC after the renewal: %v", err)
	}
}
