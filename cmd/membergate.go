package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	return memberGate(os.Getenv, messagePath, interval, newLogger())
}

// memberGate runs the gate with the given environment and writes its verdict to messagePath.
func memberGate(getenv func(string) string, messagePath string, interval time.Duration, lg *zap.Logger) int {
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
	if d.Hold {
		return verdict(d.Message(), membergate.HoldExitCode)
	}
	if !d.Start {
		return verdict(d.Message(), membergate.RefusalExitCode)
	}
	return verdict(d.Message(), 0)
}
