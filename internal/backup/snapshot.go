// Package backup takes, verifies, stores, prunes and restores etcd snapshots. It is the code behind the
// operator image's `backup` and `restore` modes: scheduled backups (a CronJob), on-demand backups (an
// EtcdBackup's Job) and a restored cluster's init containers all run it, so every path shares one
// implementation of "what is a good snapshot".
package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Info describes a verified snapshot and, once stored, where it is.
type Info struct {
	// Key is the snapshot's name in its store (<prefix>/<namespace>/<cluster>/<kind>/<file>).
	Key string `json:"key,omitempty"`
	// Location is the user-facing address: pvc://<claim>/<key> or s3://<bucket>/<key>.
	Location string `json:"location,omitempty"`
	// SizeBytes is the size of the snapshot file (the database plus etcd's sha256 trailer).
	SizeBytes int64 `json:"sizeBytes"`
	// Revision is the newest key revision in the snapshot.
	Revision int64 `json:"revision"`
	// TotalKeys is the number of live keys.
	TotalKeys int `json:"totalKeys"`
	// Hash is etcd's CRC-32C over every bucket (what `etcdutl snapshot status` prints).
	Hash uint32 `json:"hash"`
	// SHA256 is the digest etcd appended to the stream, checked against the database.
	SHA256 string `json:"sha256"`
	// EtcdVersion is the version of the server the snapshot came from.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// StartTime and FinishTime bound the backup run.
	StartTime  time.Time `json:"startTime"`
	FinishTime time.Time `json:"finishTime"`
}

// Take streams a snapshot from the etcd server at endpoint into path, and returns the server's version.
// The file is written as path.part and renamed only once complete, so a crash never leaves a partial
// snapshot under the final name.
// A nil tlsConfig dials a plain HTTP endpoint.
func Take(ctx context.Context, lg *zap.Logger, endpoint string, tlsConfig *tls.Config, path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	// Asking for the server's status first fails fast on an unreachable endpoint (the snapshot stream would
	// wait for a connection as long as ctx allows) and gives the version etcd before 3.6 does not send.
	version, err := serverVersion(ctx, lg, endpoint, tlsConfig)
	if err != nil {
		return "", err
	}
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Context: ctx, TLS: tlsConfig}
	if _, err := clientsnapshot.SaveWithVersion(ctx, lg, cfg, path); err != nil {
		return "", fmt.Errorf("snapshot from %s: %w", endpoint, err)
	}
	return version, nil
}

func serverVersion(ctx context.Context, lg *zap.Logger, endpoint string, tlsConfig *tls.Config) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: lg.Named("client"), TLS: tlsConfig})
	if err != nil {
		return "", err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return "", fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return st.Version, nil
}

// ErrCorrupt marks a snapshot that failed verification.
var ErrCorrupt = errors.New("snapshot failed verification")

// Verify checks a snapshot file the way a restore depends on it: the sha256 digest etcd appended must match
// the database, and the database must pass bbolt's consistency check. It returns the snapshot's revision,
// key count and etcd's content hash.
func Verify(lg *zap.Logger, path string) (Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, err
	}
	size := st.Size()
	// etcd pads the database to whole 512-byte sectors and appends a sha256 digest.
	if size < sha256.Size || size%512 != sha256.Size {
		return Info{}, fmt.Errorf("%w: %s has no sha256 trailer (size %d)", ErrCorrupt, filepath.Base(path), size)
	}
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return Info{}, err
	}
	trailer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return Info{}, err
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, trailer) {
		return Info{}, fmt.Errorf("%w: sha256 of %s is %x, its trailer says %x", ErrCorrupt, filepath.Base(path), sum, trailer)
	}
	status, err := snapshot.NewV3(lg).Status(path)
	if err != nil {
		return Info{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return Info{
		SizeBytes: size,
		Revision:  status.Revision,
		TotalKeys: status.TotalKey,
		Hash:      status.Hash,
		SHA256:    hex.EncodeToString(trailer),
	}, nil
}
