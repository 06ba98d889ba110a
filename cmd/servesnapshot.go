package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
)

// keyFlags collects a repeated --key.
type keyFlags []string

func (k *keyFlags) String() string { return strings.Join(*k, ",") }

func (k *keyFlags) Set(v string) error {
	*k = append(*k, v)
	return nil
}

// runServeSnapshot is `manager serve-snapshot`: the pod that mounts a backup claim while members restore
// from it, and serves them the restore's snapshot (and no other key) over the pod network, to holders of
// the token in SNAPSHOT_SERVER_TOKEN. It fails at once, with the reason as its termination message, when a
// key is not on the claim.
func runServeSnapshot(args []string) int {
	fs := flag.NewFlagSet("serve-snapshot", flag.ContinueOnError)
	var dir, claim, listen string
	var keys keyFlags
	fs.StringVar(&dir, "dir", "", "Directory of the mounted backup claim.")
	fs.StringVar(&claim, "pvc-claim", "", "Name of the backup claim (for locations).")
	fs.Var(&keys, "key", "Key of a snapshot to serve (repeatable); no other key is served.")
	fs.StringVar(&listen, "listen", ":8080", "Address to serve on.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if dir == "" {
		return fail(errors.New("--dir is required"))
	}
	lg := newLogger()
	srv := &backup.SnapshotServer{Store: &backup.DirStore{Root: dir, Claim: claim}, Keys: keys,
		Token: os.Getenv(backup.SnapshotTokenEnv), Log: lg}
	if err := srv.Check(); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serveSnapshots(ctx, lg, ln, srv); err != nil {
		return fail(err)
	}
	return 0
}

// serveSnapshots serves srv on ln until ctx ends, then lets downloads under way finish for a while.
func serveSnapshots(ctx context.Context, lg *zap.Logger, ln net.Listener, srv *backup.SnapshotServer) error {
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	lg.Info("serving snapshots", zap.Strings("keys", srv.Keys), zap.String("listen", ln.Addr().String()))
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
