package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/membership"
)

// terminationLog is where Kubernetes reads a container's termination message: the controllers read the
// run's result (JSON) from there, so backup pods need no API access of their own.
const terminationLog = "/dev/termination-log"

// destinationFlags select the store: a directory on a mounted claim, or an S3 bucket (credentials from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, never from flags, so they stay out of pod specs and logs).
type destinationFlags struct {
	dir, claim                                   string
	s3Endpoint, s3Bucket, s3Prefix, s3Region, ca string
	// snapshotServer reads a claim through its snapshot server (restore only: registerSnapshotServer).
	snapshotServer     string
	snapshotServerWait time.Duration
}

func (d *destinationFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.dir, "dir", "", "Directory of the mounted backup claim.")
	fs.StringVar(&d.claim, "pvc-claim", "", "Name of the backup claim (for locations).")
	fs.StringVar(&d.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL (http or https).")
	fs.StringVar(&d.s3Bucket, "s3-bucket", "", "S3 bucket.")
	fs.StringVar(&d.s3Prefix, "s3-prefix", "", "Prefix of the object keys.")
	fs.StringVar(&d.s3Region, "s3-region", "", "S3 region.")
	fs.StringVar(&d.ca, "s3-ca-file", "", "PEM CA bundle that verifies the S3 endpoint.")
}

// registerSnapshotServer adds the restore's third source: the snapshot server of a claim the member does
// not mount (its token from SNAPSHOT_SERVER_TOKEN, never from a flag).
func (d *destinationFlags) registerSnapshotServer(fs *flag.FlagSet) {
	fs.StringVar(&d.snapshotServer, "snapshot-server", "", "URL of the snapshot server of the backup claim (--pvc-claim), instead of mounting it.")
	fs.DurationVar(&d.snapshotServerWait, "snapshot-server-wait", 5*time.Minute, "How long a snapshot server that does not answer yet is retried.")
}

func (d *destinationFlags) store() (backup.Store, string, error) {
	sources := 0
	for _, s := range []string{d.dir, d.s3Endpoint, d.snapshotServer} {
		if s != "" {
			sources++
		}
	}
	switch {
	case sources > 1 && d.snapshotServer != "":
		return nil, "", errors.New("--snapshot-server reads the claim in place of --dir or --s3-endpoint")
	case sources > 1:
		return nil, "", errors.New("choose one destination: --dir or --s3-endpoint")
	case d.snapshotServer != "":
		token := os.Getenv(backup.SnapshotTokenEnv)
		if token == "" {
			return nil, "", errors.New("--snapshot-server needs its token in " + backup.SnapshotTokenEnv)
		}
		return &backup.HTTPStore{URL: d.snapshotServer, Token: token, Claim: d.claim, Wait: d.snapshotServerWait, Log: newLogger()}, "", nil
	case d.s3Endpoint != "":
		if d.s3Bucket == "" {
			return nil, "", errors.New("--s3-bucket is required with --s3-endpoint")
		}
		s, err := backup.NewS3Store(backup.S3Config{
			Endpoint: d.s3Endpoint, Bucket: d.s3Bucket, Region: d.s3Region, CAFile: d.ca,
			AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		})
		return s, d.s3Prefix, err
	case d.dir != "":
		return &backup.DirStore{Root: d.dir, Claim: d.claim}, "", nil
	default:
		return nil, "", errors.New("a destination is required: --dir or --s3-endpoint")
	}
}

// report prints the result as one JSON line and writes it as the termination message.
func report(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
	_ = os.WriteFile(terminationLog, b, 0o644)
}

func fail(err error) int {
	report(map[string]string{"error": err.Error()})
	fmt.Fprintln(os.Stderr, "error:", err)
	return 1
}

func signalContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, func() { cancel(); stop() }
}

func newLogger() *zap.Logger {
	lg, err := zap.NewProduction()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}

// runBackup is `manager backup`: snapshot, verify, store, then prune (scheduled runs only).
func runBackup(args []string) int {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	var cfg backup.RunConfig
	var dest destinationFlags
	var retention int
	var timeout time.Duration
	fs.StringVar(&cfg.Cluster, "cluster", "", "EtcdCluster name.")
	fs.StringVar(&cfg.Namespace, "namespace", "", "EtcdCluster namespace.")
	fs.StringVar(&cfg.Endpoint, "endpoint", "", "etcd client URL to take the snapshot from.")
	fs.StringVar(&cfg.Kind, "kind", backup.KindScheduled, "scheduled (pruned to --retention) or on-demand (kept).")
	fs.IntVar(&retention, "retention", 0, "How many scheduled backups to keep (0 keeps all).")
	fs.StringVar(&cfg.StagingDir, "staging-dir", os.TempDir(), "Where the snapshot is written and verified before it is stored.")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "Give up after this long.")
	var caFile, certFile, keyFile string
	fs.StringVar(&caFile, "cacert", "", "CA certificate verifying a TLS endpoint (with --cert and --key).")
	fs.StringVar(&certFile, "cert", "", "Client certificate for a TLS endpoint.")
	fs.StringVar(&keyFile, "key", "", "Client certificate's private key.")
	dest.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Cluster == "" || cfg.Namespace == "" || cfg.Endpoint == "" {
		return fail(errors.New("--cluster, --namespace and --endpoint are required"))
	}
	if caFile != "" || certFile != "" || keyFile != "" {
		tlsConfig, err := etcd.ClientTLSConfigFromFiles(caFile, certFile, keyFile)
		if err != nil {
			return fail(fmt.Errorf("--cacert, --cert and --key: %w", err))
		}
		cfg.TLS = tlsConfig
	}
	if cfg.Kind != backup.KindScheduled && cfg.Kind != backup.KindOnDemand {
		return fail(fmt.Errorf("--kind must be %s or %s", backup.KindScheduled, backup.KindOnDemand))
	}
	store, prefix, err := dest.store()
	if err != nil {
		return fail(err)
	}
	cfg.Prefix, cfg.Retention = prefix, retention
	ctx, cancel := signalContext(timeout)
	defer cancel()
	lg := newLogger()
	res, err := backup.Run(ctx, lg, store, cfg)
	if err != nil {
		return fail(err)
	}
	report(res)
	return 0
}

// runRestore is `manager restore`, the init container of a restored cluster's members. It reads etcd's own
// ETCD_* configuration, so it restores exactly the member etcd is about to start.
func runRestore(args []string) int {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var dest destinationFlags
	var key string
	var timeout time.Duration
	var recovery, token string
	fs.StringVar(&key, "key", "", "Key of the snapshot in the store.")
	fs.StringVar(&token, "initial-cluster-token", "", "Initial cluster token to restore under (default: ETCD_INITIAL_CLUSTER_TOKEN).")
	fs.StringVar(&recovery, "recovery", "", "Quorum-loss recovery this restore is for: another member's data in the data directory is moved aside, not refused.")
	fs.DurationVar(&timeout, "timeout", 60*time.Minute, "Give up after this long.")
	dest.register(fs)
	dest.registerSnapshotServer(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if key == "" {
		return fail(errors.New("--key is required"))
	}
	cfg := backup.RestoreConfig{
		Key:                 key,
		DataDir:             os.Getenv("ETCD_DATA_DIR"),
		Name:                os.Getenv("ETCD_NAME"),
		PeerURL:             os.Getenv("ETCD_INITIAL_ADVERTISE_PEER_URLS"),
		InitialCluster:      os.Getenv("ETCD_INITIAL_CLUSTER"),
		InitialClusterToken: os.Getenv("ETCD_INITIAL_CLUSTER_TOKEN"),
		Recovery:            recovery,
	}
	if token != "" {
		cfg.InitialClusterToken = token
	}
	if cfg.DataDir == "" || cfg.Name == "" || cfg.PeerURL == "" || cfg.InitialCluster == "" {
		return fail(errors.New("ETCD_DATA_DIR, ETCD_NAME, ETCD_INITIAL_ADVERTISE_PEER_URLS and ETCD_INITIAL_CLUSTER must be set"))
	}
	// Only a bootstrapping member restores: one that joins a running cluster must start empty and catch up.
	// In a quorum-loss recovery every member restores (the configuration says "existing" then, so that
	// nothing bootstraps an empty member).
	if state := os.Getenv("ETCD_INITIAL_CLUSTER_STATE"); state != membership.StateNew && recovery == "" {
		report(map[string]any{"restored": false, "reason": "member joins an existing cluster (initial cluster state " + state + ")"})
		return 0
	}
	// The key is the snapshot's full key: it already carries the prefix it was stored under.
	store, _, err := dest.store()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := signalContext(timeout)
	defer cancel()
	res, err := backup.Restore(ctx, newLogger(), store, cfg)
	if err != nil {
		return fail(err)
	}
	if !res.Restored {
		report(map[string]any{"restored": false, "reason": "data directory already holds a member"})
		return 0
	}
	out := map[string]any{"restored": true, "location": res.Location, "revision": res.Revision, "sizeBytes": res.SizeBytes}
	if res.MovedAside != "" {
		out["movedAside"] = res.MovedAside
	}
	report(out)
	return 0
}
