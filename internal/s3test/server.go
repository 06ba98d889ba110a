// Package s3test runs a real S3-compatible server (MinIO, built from its Go module by `make minio`) as a
// local process for tests of the object-store backup destination.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Server is a running MinIO process with one set of root credentials.
type Server struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	cmd       *exec.Cmd
	done      chan struct{}
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
func Start(ctx context.Context, bin, dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", port),
		AccessKey: "etcd-operator-test",
		SecretKey: "etcd-operator-test-secret",
		done:      make(chan struct{}),
		log:       filepath.Join(dir, "minio.log"),
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "server", filepath.Join(dir, "data"), "--address", fmt.Sprintf("127.0.0.1:%d", port),
		"--console-address", "127.0.0.1:0", "--quiet")
	s.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+s.AccessKey, "MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); _ = logf.Close(); close(s.done) }()
	// MinIO's liveness endpoint answers once the server serves requests.
	ready := s.Endpoint + "/minio/health/ready"
	for {
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			return nil, fmt.Errorf("minio exited: %s", b)
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("minio not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
}

// Stop terminates the server and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
