package continuous

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/pki"
)

// memberName is the temporary member's name; nothing outside the restore ever sees it.
const memberName = "point-in-time-restore"

// tempMember is a single-member etcd the restore replays changes into. It listens on localhost and
// accepts only clients with a certificate of its own throwaway CA, whose common name, root, is what etcd
// authenticates as when the snapshot has authentication enabled: the replay never needs a password.
type tempMember struct {
	cmd       *exec.Cmd
	done      chan struct{}
	clientURL string
	cli       *clientv3.Client
	log       string
	stopOnce  sync.Once
}

type memberLimits struct {
	maxTxnOps       int
	maxRequestBytes int
	quotaBytes      int64
}

// startTempMember restores the snapshot into dir/data, starts etcd on it and waits until it serves.
func startTempMember(ctx context.Context, lg *zap.Logger, bin, dir, snapshotFile string, limits memberLimits, timeout time.Duration) (*tempMember, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	files, clientTLS, err := writeMemberTLS(tlsDir)
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerURL := "https://127.0.0.1:" + strconv.Itoa(peerPort)
	clientURL := "https://127.0.0.1:" + strconv.Itoa(clientPort)
	dataDir := filepath.Join(dir, "data")
	err = snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotFile,
		Name:                memberName,
		OutputDataDir:       dataDir,
		PeerURLs:            []string{peerURL},
		InitialCluster:      memberName + "=" + peerURL,
		InitialClusterToken: memberName + "-" + randomHex(6),
	})
	if err != nil {
		return nil, fmt.Errorf("restore the base snapshot: %w", err)
	}
	args := []string{
		"--name", memberName,
		"--data-dir", dataDir,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--initial-cluster", memberName + "=" + peerURL, "--initial-cluster-state", "new",
		"--cert-file", files.cert, "--key-file", files.key, "--trusted-ca-file", files.ca, "--client-cert-auth",
		"--peer-cert-file", files.cert, "--peer-key-file", files.key, "--peer-trusted-ca-file", files.ca, "--peer-client-cert-auth",
		// The member is scratch: the result leaves it as a snapshot, which is synced to disk on its own.
		"--unsafe-no-fsync",
		"--heartbeat-interval", "50", "--election-timeout", "500",
		"--auto-compaction-retention", "0",
		"--max-txn-ops", strconv.Itoa(limits.maxTxnOps),
		"--max-request-bytes", strconv.Itoa(limits.maxRequestBytes),
		"--quota-backend-bytes", strconv.FormatInt(limits.quotaBytes, 10),
		"--logger", "zap", "--log-level", "warn",
	}
	m := &tempMember{clientURL: clientURL, log: filepath.Join(dir, "etcd.log"), done: make(chan struct{})}
	logFile, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.Env = memberEnv()
	if err := m.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	go func() { _ = m.cmd.Wait(); _ = logFile.Close(); close(m.done) }()

	m.cli, err = clientv3.New(clientv3.Config{
		Endpoints: []string{clientURL}, TLS: clientTLS, DialTimeout: 5 * time.Second, Logger: lg.Named("client"),
		MaxCallSendMsgSize: limits.maxRequestBytes, MaxCallRecvMsgSize: math.MaxInt32,
	})
	if err != nil {
		m.stop()
		return nil, err
	}
	if err := m.waitReady(ctx, timeout); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

// memberEnv is the restorer's environment without ETCD_* variables, which etcd would read as
// configuration.
func memberEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ETCD_") {
			env = append(env, e)
		}
	}
	return env
}

func (m *tempMember) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := m.cli.Get(rctx, "\x00", clientv3.WithCountOnly())
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("the temporary etcd exited: %s", m.logTail())
		case <-ctx.Done():
			return fmt.Errorf("the temporary etcd did not serve within %s: %v; %s", timeout, err, m.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *tempMember) logTail() string {
	b, _ := os.ReadFile(m.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "etcd log: " + strings.Join(lines, "\n")
}

// stop terminates etcd (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (m *tempMember) stop() { m.stopOnce.Do(m.doStop) }

func (m *tempMember) doStop() {
	if m.cli != nil {
		_ = m.cli.Close()
	}
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

type memberTLSFiles struct{ ca, cert, key string }

// writeMemberTLS issues the temporary member's certificates from a throwaway CA.
func writeMemberTLS(dir string) (memberTLSFiles, *tls.Config, error) {
	now := time.Now()
	ca, _, err := pki.NewCA("point-in-time-restore", 24*time.Hour, now)
	if err != nil {
		return memberTLSFiles{}, nil, err
	}
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: memberName, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAndClient, Validity: 24 * time.Hour}, now)
	if err != nil {
		return memberTLSFiles{}, nil, err
	}
	clientCertPEM, clientKeyPEM, err := ca.Issue(pki.Request{CommonName: "root", Usage: pki.ClientOnly, Validity: 24 * time.Hour}, now)
	if err != nil {
		return memberTLSFiles{}, nil, err
	}
	f := memberTLSFiles{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "member.crt"), key: filepath.Join(dir, "member.key")}
	for name, data := range map[string][]byte{f.ca: ca.CertPEM, f.cert: certPEM, f.key: keyPEM} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return memberTLSFiles{}, nil, err
		}
	}
	pair, err := tls.X509KeyPair(clientCertPEM, clientKeyPEM)
	if err != nil {
		return memberTLSFiles{}, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM) {
		return memberTLSFiles{}, nil, errors.New("the restore CA does not parse")
	}
	return f, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// freePort returns a localhost port that is free now; the member binds it moments later.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
