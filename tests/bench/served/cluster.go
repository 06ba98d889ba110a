package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/internal/testproc"
)

// clusterName plays the EtcdCluster's name (the peer certificate's common name derives from it) and
// namespace the one the names in the certificates live in.
const (
	clusterName = "served"
	namespace   = "bench"
	members     = 3
)

// variant is one way of configuring the members.
type variant struct {
	Name string
	Desc string
	// ClientTLS serves clients over TLS with client certificate authentication; PeerTLS the peers, with the
	// operator's peer settings (allowed common name, no address check).
	ClientTLS, PeerTLS bool
	// HTTP is where etcd's HTTP endpoints of the client side (gateway, /health, /debug) are served.
	HTTP httpListener
	// Env is further configuration.
	Env map[string]string
}

// httpListener places etcd's HTTP endpoints of the client side.
type httpListener int

const (
	// httpAsOperator places them as the operator does for the etcd version run (resources.SplitsClientHTTP):
	// with client TLS, on a port of their own from etcd 3.5.8.
	httpAsOperator httpListener = iota
	// httpShared serves them on the client port beside gRPC: the operator's TLS before the split, and on
	// etcd before 3.5.8. With TLS, etcd then serves gRPC through net/http's HTTP/2 server.
	httpShared
	// httpSplit serves them on a port of their own (--listen-client-http-urls), leaving the client port to
	// gRPC's own server.
	httpSplit
)

var allVariants = []variant{
	{Name: "plain", Desc: "no TLS anywhere (spec.tls.enabled: false)"},
	{Name: "tls", Desc: "the operator's default: client and peer TLS, client certificates required on both, HTTP endpoints on a port of their own from etcd 3.5.8",
		ClientTLS: true, PeerTLS: true},
	{Name: "tls-shared", Desc: "tls with the HTTP endpoints on the client port (the operator before the split, and on etcd before 3.5.8)",
		ClientTLS: true, PeerTLS: true, HTTP: httpShared},
	{Name: "client-tls", Desc: "the operator's client TLS only, peers plain, HTTP endpoints on the client port", ClientTLS: true, HTTP: httpShared},
	{Name: "peer-tls", Desc: "the operator's peer TLS only, clients plain", PeerTLS: true},
	{Name: "client-tls-split", Desc: "client-tls + --listen-client-http-urls", ClientTLS: true, HTTP: httpSplit},
	{Name: "plain-split", Desc: "plain + --listen-client-http-urls (control: what the split does without TLS)",
		HTTP: httpSplit},
	{Name: "tls12-aes128", Desc: "tls capped at TLS 1.2 with ECDHE-ECDSA-AES128-GCM-SHA256 only",
		ClientTLS: true, PeerTLS: true, Env: map[string]string{
			"ETCD_TLS_MAX_VERSION": "TLS1.2", "ETCD_CIPHER_SUITES": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
	// etcd refuses a cipher list without AES-128-GCM for its HTTP/2 listener, split or not (and Go picks
	// AES-GCM over ChaCha20 on a machine with AES instructions whatever the order): this variant shows it.
	{Name: "tls12-chacha-split", Desc: "tls, split, capped at TLS 1.2 with ECDHE-ECDSA-CHACHA20-POLY1305 only (etcd refuses it)",
		ClientTLS: true, PeerTLS: true, HTTP: httpSplit, Env: map[string]string{
			"ETCD_TLS_MAX_VERSION": "TLS1.2", "ETCD_CIPHER_SUITES": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}},
	{Name: "tls13", Desc: "tls with --tls-min-version=TLS1.3", ClientTLS: true, PeerTLS: true,
		Env: map[string]string{"ETCD_TLS_MIN_VERSION": "TLS1.3"}},
}

func variantNamed(name string) *variant {
	for i := range allVariants {
		if allVariants[i].Name == name {
			return &allVariants[i]
		}
	}
	return nil
}

// certificates are the files of the cluster's CA and the server, peer and client certificates, issued by
// internal/pki as the operator issues them (resources.LeafCertificates), from one CA.
type certificates struct {
	CA, ServerCert, ServerKey, PeerCert, PeerKey, ClientCert, ClientKey string
	client                                                              *tls.Config
}

func newCertificates(dir string) (*certificates, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	ca, _, err := pki.NewCA(clusterName+"-ca", 10*365*24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	validity := 90 * 24 * time.Hour
	peerSvc := clusterName + "-peer"
	svc := namespace + ".svc"
	memberNames := []string{"*." + peerSvc + "." + svc + ".cluster.local", "*." + peerSvc + "." + svc}
	clientSvc := clusterName + "-client"
	server := append(append([]string{}, memberNames...),
		clientSvc+"."+svc+".cluster.local", clientSvc+"."+svc, clientSvc+"."+namespace, clientSvc, "localhost")
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	leaves := []struct {
		name string
		req  pki.Request
	}{
		{"server", pki.Request{CommonName: clusterName + "-server", DNSNames: server, IPAddresses: loopback,
			Usage: pki.ServerAndClient, Validity: validity}},
		// The operator's peer certificate names the members' DNS names only; members here dial each other
		// at 127.0.0.1, so it also carries that address (one more SAN: the handshake's work is the same).
		{"peer", pki.Request{CommonName: clusterName + "-peer", DNSNames: memberNames, IPAddresses: loopback,
			Usage: pki.ServerAndClient, Validity: validity}},
		{"client", pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: validity}},
	}
	c := &certificates{CA: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(c.CA, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	var clientCert, clientKey []byte
	for _, l := range leaves {
		certPEM, keyPEM, err := ca.Issue(l.req, now)
		if err != nil {
			return nil, err
		}
		cert, key := filepath.Join(dir, l.name+".crt"), filepath.Join(dir, l.name+".key")
		if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
			return nil, err
		}
		switch l.name {
		case "server":
			c.ServerCert, c.ServerKey = cert, key
		case "peer":
			c.PeerCert, c.PeerKey = cert, key
		case "client":
			c.ClientCert, c.ClientKey = cert, key
			clientCert, clientKey = certPEM, keyPEM
		}
	}
	// The operator's own client configuration (internal/etcd), with its client certificate.
	c.client, err = etcd.ClientTLSConfig(ca.CertPEM, clientCert, clientKey)
	return c, err
}

// cluster is three running members of one variant.
type cluster struct {
	v     variant
	quota int64
	// skipSANEnv names the setting that skips the peer address check in this etcd version
	// (resources.peerSkipSANEnv): experimental before 3.6.
	skipSANEnv string
	// split: the HTTP endpoints of the client side are served on a port of their own.
	split   bool
	version string
	dir     string
	ports   [members]struct{ peer, client, http, metrics int }
	procs   [members]*testproc.Process
}

func (c *cluster) scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

func (c *cluster) peerURL(i int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", c.scheme(c.v.PeerTLS), c.ports[i].peer)
}

func (c *cluster) clientURL(i int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", c.scheme(c.v.ClientTLS), c.ports[i].client)
}

// httpURL is where member i serves HTTP (/debug/pprof among others): its client URL unless split.
func (c *cluster) httpURL(i int) string {
	if c.split {
		return fmt.Sprintf("%s://127.0.0.1:%d", c.scheme(c.v.ClientTLS), c.ports[i].http)
	}
	return c.clientURL(i)
}

func (c *cluster) clientURLs() []string {
	var out []string
	for i := range members {
		out = append(out, c.clientURL(i))
	}
	return out
}

// env is member i's environment: what the operator's ConfigMap and StatefulSet give etcd
// (resources.configData, tlsConfigEnv, etcdContainer), with local addresses and files for the pod's.
func (c *cluster) env(i int, certs *certificates, token string) map[string]string {
	var initial []string
	for j := range members {
		initial = append(initial, fmt.Sprintf("%s-%d=%s", clusterName, j, c.peerURL(j)))
	}
	env := map[string]string{
		"ETCD_NAME":                        fmt.Sprintf("%s-%d", clusterName, i),
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": c.peerURL(i),
		"ETCD_ADVERTISE_CLIENT_URLS":       c.clientURL(i),
		"ETCD_DATA_DIR":                    filepath.Join(c.dir, fmt.Sprintf("member-%d", i)),
		"ETCD_LISTEN_PEER_URLS":            c.peerURL(i),
		"ETCD_LISTEN_CLIENT_URLS":          c.clientURL(i),
		"ETCD_LISTEN_METRICS_URLS":         fmt.Sprintf("http://127.0.0.1:%d", c.ports[i].metrics),
		"ETCD_INITIAL_CLUSTER":             strings.Join(initial, ","),
		"ETCD_INITIAL_CLUSTER_STATE":       "new",
		"ETCD_INITIAL_CLUSTER_TOKEN":       token,
		"ETCD_AUTO_COMPACTION_MODE":        "periodic",
		"ETCD_AUTO_COMPACTION_RETENTION":   "1h",
		"ETCD_QUOTA_BACKEND_BYTES":         strconv.FormatInt(c.quota, 10),
		// Not the operator's: the profiles come from it. It only registers handlers.
		"ETCD_ENABLE_PPROF": "true",
	}
	if c.v.ClientTLS {
		maps.Copy(env, map[string]string{
			"ETCD_CERT_FILE":        certs.ServerCert,
			"ETCD_KEY_FILE":         certs.ServerKey,
			"ETCD_TRUSTED_CA_FILE":  certs.CA,
			"ETCD_CLIENT_CERT_AUTH": "true",
		})
	}
	if c.v.PeerTLS {
		maps.Copy(env, map[string]string{
			"ETCD_PEER_CERT_ALLOWED_CN":  clusterName + "-peer",
			"ETCD_PEER_CERT_FILE":        certs.PeerCert,
			"ETCD_PEER_KEY_FILE":         certs.PeerKey,
			"ETCD_PEER_TRUSTED_CA_FILE":  certs.CA,
			"ETCD_PEER_CLIENT_CERT_AUTH": "true",
			c.skipSANEnv:                 "true",
		})
	}
	if c.split {
		env["ETCD_LISTEN_CLIENT_HTTP_URLS"] = c.httpURL(i)
	}
	maps.Copy(env, c.v.Env)
	return env
}

// startCluster starts the three members of v in dir and waits until they serve a linearizable read.
func startCluster(ctx context.Context, o options, certs *certificates, v variant, dir, token string) (*cluster, error) {
	c := &cluster{v: v, dir: dir, quota: o.quota, skipSANEnv: "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"}
	version, err := etcdVersion(o.etcdBin)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(version, "3.5.") || strings.HasPrefix(version, "3.4.") {
		c.skipSANEnv = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	}
	c.version = version
	switch v.HTTP {
	case httpAsOperator:
		c.split = v.ClientTLS && resources.SplitsClientHTTP(&etcdv1beta1.EtcdCluster{Spec: etcdv1beta1.EtcdClusterSpec{
			Version: version, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)}}})
	case httpSplit:
		c.split = true
	}
	for i := range members {
		c.ports[i].peer, c.ports[i].client, c.ports[i].http, c.ports[i].metrics =
			testproc.Port(), testproc.Port(), testproc.Port(), testproc.Port()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i := range members {
		cmd := exec.Command(o.etcdBin)
		// Only what a pod's container would have: no ETCD_* of the caller's.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		for k, v := range c.env(i, certs, token) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		p, err := testproc.Start(cmd, filepath.Join(dir, fmt.Sprintf("member-%d.log", i)))
		if err != nil {
			c.stop()
			return nil, err
		}
		c.procs[i] = p
	}
	cli, err := c.dial(certs, c.clientURLs())
	if err != nil {
		c.stop()
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "health")
		cancel()
		if err == nil {
			return c, nil
		}
		for i, p := range c.procs {
			if !p.Alive() {
				c.stop()
				return nil, fmt.Errorf("member %d exited: %s", i, tail(filepath.Join(dir, fmt.Sprintf("member-%d.log", i))))
			}
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("no linearizable read within 60 s: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dial is a clientv3 client to the given endpoints as the operator dials (internal/etcd), with its client
// certificate when the client port serves TLS.
func (c *cluster) dial(certs *certificates, endpoints []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.v.ClientTLS {
		cfg.TLS = certs.client.Clone()
	}
	return clientv3.New(cfg)
}

// leader returns the ordinal of the leader.
func (c *cluster) leader(ctx context.Context, cli *clientv3.Client) (int, error) {
	for i := range members {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(sctx, c.clientURL(i))
		cancel()
		if err != nil {
			return -1, err
		}
		if st.Leader == st.Header.MemberId {
			return i, nil
		}
	}
	return -1, errors.New("no member is the leader")
}

func (c *cluster) pids() []int {
	var out []int
	for _, p := range c.procs {
		if p != nil && p.Alive() {
			out = append(out, p.PID())
		}
	}
	return out
}

// serverPorts are the ports the members accept connections on, by kind.
func (c *cluster) serverPorts() map[int]string {
	m := map[int]string{}
	for _, p := range c.ports {
		m[p.client] = "client"
		m[p.peer] = "peer"
		if c.split {
			m[p.http] = "http"
		}
	}
	return m
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		if p != nil {
			p.Stop()
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// etcdVersion is the version the etcd binary reports ("3.5.35").
func etcdVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s --version: no version in %q", bin, out)
}

// itoa is strconv.Itoa, for brevity in format strings.
func itoa(i int) string { return strconv.Itoa(i) }
