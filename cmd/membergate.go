package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/membergate"
)

// runMemberGate is `manager member-gate`, the first init container of every member pod. It reads etcd's
// own ETCD_* configuration and exits 0 when etcd may start, or membergate.RefusalExitCode with a
// termination message starting with membergate.RefusalMarker when the data directory holds a member the
// cluster no longer has, or membergate.HoldExitCode while another member is forced to start alone. While an empty member waits for the operator to plan its join, it keeps running.
func runMemberGate(args []string) int {
	fs := flag.NewFlagSet("member-gate", flag.ContinueOnError)
	var messagePath string
	var interval time.Duration
	fs.StringVar(&messagePath, "termination-log", terminationLog, "Where the verdict is written (Kubernetes reads it as the termination message).")
	// A member's join waits on this poll: the learner starts within a quarter second of being added. One
	// peer's member list is a few hundred bytes.
	fs.DurationVar(&interval, "interval", 250*time.Millisecond, "How often a waiting gate asks the peers again.")
	var ticketDir string
	fs.StringVar(&ticketDir, "ticket-dir", "", "The pod's own volume, shared with the etcd container: the gate installs the etcd entry (etcd-start) there, and a forced start's ticket.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if ticketDir != "" {
		if err := installEntry(ticketDir); err != nil {
			fmt.Fprintln(os.Stderr, "error: installing the etcd entry:", err)
			_ = os.WriteFile(messagePath, []byte("error: installing the etcd entry: "+err.Error()+"\n"), 0o644)
			return 1
		}
	}
	return memberGate(os.Getenv, messagePath, interval, ticketDir, newLogger())
}

// entryName is the operator binary's name in the ticket directory, which the etcd container runs.
const entryName = "manager"

// installEntry copies this binary into the pod's own volume: etcd's image has no shell, and its container
// starts etcd through this binary's etcd-start mode (runEtcdStart) to take a forced start's ticket.
func installEntry(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	tmp := filepath.Join(dir, entryName+".tmp")
	dst, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, entryName))
}

// runEtcdStart is `manager etcd-start --ticket-dir DIR -- /usr/local/bin/etcd [flags]`, the etcd container's
// entry: it execs etcd with the container's environment, forcing a new cluster only on this pod's ticket
// (membergate.EtcdStart), which it consumes.
func runEtcdStart(args []string) int {
	fs := flag.NewFlagSet("etcd-start", flag.ContinueOnError)
	var ticketDir string
	fs.StringVar(&ticketDir, "ticket-dir", "", "The pod's own volume where the member gate leaves a forced start's ticket.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if ticketDir == "" || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "usage: etcd-start --ticket-dir DIR -- ETCD [FLAGS]")
		return 2
	}
	env, forced, err := membergate.EtcdStart(os.Environ(), ticketDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	if forced {
		fmt.Fprintf(os.Stderr, "etcd-start: this pod's ticket taken: starting etcd once with %s=true\n", membergate.EnvForceNewCluster)
	}
	err = syscall.Exec(argv[0], argv, env)
	fmt.Fprintln(os.Stderr, "error: exec", argv[0]+":", err)
	return 1
}

// memberGate runs the gate with the given environment and writes its verdict to messagePath. A forced start
// leaves its ticket in ticketDir, and any other verdict removes one an earlier run left.
func memberGate(getenv func(string) string, messagePath string, interval time.Duration, ticketDir string, lg *zap.Logger) int {
	defer func() { _ = lg.Sync() }()
	verdict := func(line string, code int) int {
		fmt.Fprintln(os.Stderr, line)
		_ = os.WriteFile(messagePath, []byte(line+"\n"), 0o644)
		return code
	}
	cfg, err := membergate.ConfigFromEnv(getenv)
	if err != nil {
		return verdict("error: "+err.Error(), 1)
	}
	cfg.Interval, cfg.Log = interval, lg
	// No deadline: waiting for a planned join is this container's job. SIGTERM (the pod is deleted) ends it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	d, err := membergate.Check(ctx, cfg)
	if err != nil {
		return verdict("error: "+err.Error(), 1)
	}
	if ticketDir != "" {
		if err := membergate.ClearForceTicket(ticketDir); err != nil {
			return verdict("error: "+err.Error(), 1)
		}
	}
	if d.Force {
		if ticketDir == "" {
			return verdict("error: a forced start needs the pod's ticket directory (-ticket-dir)", 1)
		}
		if err := membergate.WriteForceTicket(ticketDir, cfg.PodUID); err != nil {
			return verdict("error: "+err.Error(), 1)
		}
	}
	if d.Hold {
		return verdict(d.Message(), membergate.HoldExitCode)
	}
	if !d.Start {
		return verdict(d.Message(), membergate.RefusalExitCode)
	}
	return verdict(d.Message(), 0)
}
