// Package testproc runs the real servers tests start as local processes (etcd members, MinIO): the ports they
// listen on, reserved across every test process of the machine, and their start and graceful stop.
package testproc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Port returns a local TCP port for a server to listen on, reserved for this process until it exits.
//
// The port is free now but not held open (the server binds it later, and again after every restart), so
// three things keep anyone else from taking it meanwhile:
//   - it is drawn from below the kernel's ephemeral range (32768 and up by default), where neither ":0"
//     listeners nor outgoing connections take ports;
//   - this process never hands it out twice;
//   - the other test processes (go test runs packages in parallel) skip it: it is reserved by an exclusive
//     flock on a file named after it, which the kernel drops when this process exits, however it exits.
//     Without it, a port that one process's stopped member was to bind again could be drawn by another.
func Port() int {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		port := 20000 + rand.IntN(12000)
		if portsGiven[port] {
			continue
		}
		portsGiven[port] = true // taken by us or by another process: not drawn again either way
		if !reserve(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use by something that does not take part in the reservation
		}
		_ = l.Close()
		return port
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
	// reservations are the locked files: open for the process's lifetime, since closing one drops its lock.
	reservations []*os.File
)

// reserve takes an exclusive, non-blocking flock on the port's file in a directory every test process shares.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "etcd-operator-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	reservations = append(reservations, f)
	return true
}

// Process is a server started by Start.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts cmd with its output appended to the file log, in its own process group and killed if the test
// process dies, and reaps it in the background.
func Start(cmd *exec.Cmd, log string) (*Process, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// PID of the process.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// stopGrace is how long Stop waits after SIGTERM before it kills.
const stopGrace = 10 * time.Second

// Stop asks the process to exit (SIGTERM), kills it if it has not after stopGrace, and waits for it.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
