// Package s3test runs a real S3-compatible server (MinIO, built from its Go module by `make minio`) as a
// local process for tests of the object-store backup destination.
package s3test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/seedops/etcd-operator/internal/testproc"
)

// Server is a running MinIO process with one set of root credentials.
type Server struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	proc      *testproc.Process
	log       string
}

// Binary returns the MinIO binary named by MINIO_BIN (set by `make test`).
func Binary() (string, error) {
	bin := os.Getenv("MINIO_BIN")
	if bin == "" {
		return "", errors.New("MINIO_BIN is not set: run the tests with `make test`")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("minio binary: %w", err)
	}
	return bin, nil
}

// Start runs MinIO on a free local port with its data under dir and waits until it is ready.
func Start(ctx context.Context, bin, dir string) (*Server, error) { return start(ctx, bin, dir, nil) }

// StartTLS runs MinIO over HTTPS with a certificate for 127.0.0.1 issued by a new CA, and returns the
// server and the CA's PEM.
func StartTLS(ctx context.Context, bin, dir string) (*Server, []byte, error) {
	certs := filepath.Join(dir, "certs")
	caPEM, pool, err := writeCertificates(certs)
	if err != nil {
		return nil, nil, err
	}
	s, err := start(ctx, bin, dir, &tlsSetup{certsDir: certs, pool: pool})
	return s, caPEM, err
}

type tlsSetup struct {
	certsDir string
	pool     *x509.CertPool
}

func start(ctx context.Context, bin, dir string, tlsCfg *tlsSetup) (*Server, error) {
	port := testproc.Port()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	s := &Server{
		Endpoint:  fmt.Sprintf("%s://127.0.0.1:%d", scheme, port),
		AccessKey: "etcd-operator-test",
		SecretKey: "etcd-operator-test-secret",
		log:       filepath.Join(dir, "minio.log"),
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	args := []string{"server", filepath.Join(dir, "data"), "--address", fmt.Sprintf("127.0.0.1:%d", port),
		"--console-address", "127.0.0.1:0", "--quiet"}
	httpClient := http.DefaultClient
	if tlsCfg != nil {
		args = append(args, "--certs-dir", tlsCfg.certsDir)
		httpClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlsCfg.pool, MinVersion: tls.VersionTLS12}}}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	var err error
	if s.proc, err = testproc.Start(cmd, s.log); err != nil {
		return nil, err
	}
	// MinIO's liveness endpoint answers once the server serves requests.
	ready := s.Endpoint + "/minio/health/ready"
	for {
		select {
		case <-s.proc.Done():
			b, _ := os.ReadFile(s.log)
			return nil, fmt.Errorf("minio exited: %s", b)
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("minio not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := httpClient.Get(ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
}

// Stop terminates the server and waits for it.
func (s *Server) Stop() { s.proc.Stop() }

// writeCertificates writes a CA and a server certificate for 127.0.0.1 in MinIO's layout (public.crt,
// private.key) and returns the CA's PEM.
func writeCertificates(dir string) ([]byte, *x509.CertPool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(filepath.Join(dir, "public.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "private.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return caPEM, pool, nil
}
