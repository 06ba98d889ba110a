package backup

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/membergate"
)

// Kinds of backups: scheduled ones are pruned to the retention count; on-demand ones are kept until a
// person deletes them (they are usually taken before something risky).
const (
	KindScheduled = "scheduled"
	KindOnDemand  = "on-demand"
)

const timeLayout = "20060102T150405Z"

// ClusterPrefix is the folder of one cluster's snapshots of one kind: <prefix>/<namespace>/<cluster>/<kind>/.
func ClusterPrefix(prefix, namespace, cluster, kind string) string {
	return path.Join(prefix, namespace, cluster, kind) + "/"
}

// FileName carries the cluster, the time and the revision: <cluster>-<YYYYMMDDThhmmssZ>-r<revision>.db.
func FileName(cluster string, t time.Time, revision int64) string {
	return fmt.Sprintf("%s-%s-r%d.db", cluster, t.UTC().Format(timeLayout), revision)
}

var fileNameRE = regexp.MustCompile(`^(.+)-([0-9]{8}T[0-9]{6}Z)-r([0-9]+)\.db$`)

// parseFileName returns the time and revision of a name made by FileName for cluster.
// RevisionOf is the etcd revision a snapshot stored under key by a backup of cluster holds, from its file
// name (false for a key no backup of cluster wrote).
func RevisionOf(cluster, key string) (int64, bool) {
	_, rev, ok := parseFileName(cluster, path.Base(key))
	return rev, ok
}

func parseFileName(cluster, name string) (time.Time, int64, bool) {
	m := fileNameRE.FindStringSubmatch(name)
	if m == nil || m[1] != cluster {
		return time.Time{}, 0, false
	}
	t, err := time.Parse(timeLayout, m[2])
	if err != nil {
		return time.Time{}, 0, false
	}
	rev, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return time.Time{}, 0, false
	}
	return t, rev, true
}

// RunConfig is one backup run.
type RunConfig struct {
	// Endpoint is the etcd client URL to take the snapshot from (the cluster's client Service).
	Endpoint string
	// TLS authenticates to a cluster serving TLS; nil for plain HTTP.
	TLS       *tls.Config
	Namespace string
	Cluster   string
	Kind      string
	// Prefix is prepended to every key (the S3 destination's prefix).
	Prefix string
	// Retention is how many scheduled backups to keep; 0 keeps all.
	Retention int
	// StagingDir holds the snapshot while it is taken and verified.
	StagingDir string
	// Now is the clock (tests fix it).
	Now func() time.Time
}

// Result is what a run reports: the snapshot, and what retention removed.
type Result struct {
	Info
	Pruned []string `json:"pruned,omitempty"`
	// PruneError is set when the backup is stored but retention could not remove old ones.
	PruneError string `json:"pruneError,omitempty"`
}

// Run takes a snapshot, verifies it, stores it and then applies retention. Nothing is deleted unless the
// new snapshot is verified and stored, so a failing run never costs a good backup.
func Run(ctx context.Context, lg *zap.Logger, store Store, cfg RunConfig) (Result, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	start := now().UTC()
	if err := os.MkdirAll(cfg.StagingDir, 0o700); err != nil {
		return Result{}, err
	}
	tmp := filepath.Join(cfg.StagingDir, "snapshot-"+randomSuffix()+".db")
	defer func() { _ = os.Remove(tmp) }()

	version, err := Take(ctx, lg, cfg.Endpoint, cfg.TLS, tmp)
	if err != nil {
		return Result{}, err
	}
	info, err := Verify(lg, tmp)
	if err != nil {
		return Result{}, err
	}
	info.EtcdVersion = version
	info.StartTime = start
	info.Key = ClusterPrefix(cfg.Prefix, cfg.Namespace, cfg.Cluster, cfg.Kind) + FileName(cfg.Cluster, start, info.Revision)
	meta := map[string]string{
		"etcd-revision": strconv.FormatInt(info.Revision, 10),
		"etcd-version":  info.EtcdVersion,
		"etcd-hash":     strconv.FormatUint(uint64(info.Hash), 10),
		"sha256":        info.SHA256,
	}
	if err := store.Put(ctx, info.Key, tmp, meta); err != nil {
		return Result{}, err
	}
	info.Location = store.Location(info.Key)
	info.FinishTime = now().UTC()
	res := Result{Info: info}
	if cfg.Kind == KindScheduled && cfg.Retention > 0 {
		pruned, err := Prune(ctx, store, ClusterPrefix(cfg.Prefix, cfg.Namespace, cfg.Cluster, cfg.Kind), cfg.Cluster, cfg.Retention)
		res.Pruned = pruned
		if err != nil {
			res.PruneError = err.Error()
		}
	}
	return res, nil
}

// Prune deletes all but the newest keep snapshots of cluster under prefix. Objects that are not named
// like our snapshots are left alone.
func Prune(ctx context.Context, store Store, prefix, cluster string, keep int) ([]string, error) {
	objects, err := store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	type snap struct {
		key string
		t   time.Time
		rev int64
	}
	var snaps []snap
	for _, o := range objects {
		if t, rev, ok := parseFileName(cluster, path.Base(o.Key)); ok && path.Dir(o.Key)+"/" == prefix {
			snaps = append(snaps, snap{o.Key, t, rev})
		}
	}
	sort.Slice(snaps, func(i, j int) bool {
		if !snaps[i].t.Equal(snaps[j].t) {
			return snaps[i].t.After(snaps[j].t)
		}
		return snaps[i].rev > snaps[j].rev
	})
	var deleted []string
	for i := keep; i < len(snaps); i++ {
		if err := store.Delete(ctx, snaps[i].key); err != nil {
			return deleted, err
		}
		deleted = append(deleted, snaps[i].key)
	}
	return deleted, nil
}

// ErrForeignData: the data directory holds a member that this restore did not create (a claim kept from a
// deleted cluster of the same name, say). Starting on it would bring the old data back as if restored.
var ErrForeignData = errors.New("the data directory holds another cluster's member")

// ownData checks that the member in cfg.DataDir is the one this restore creates: etcd derives a member's ID
// from its peer URLs and the initial cluster token (which names the cluster object's UID), so a member
// restored for this cluster, then restarted, has exactly that ID; any other member's data is refused.
func ownData(cfg RestoreConfig) error {
	want, err := membergate.BootstrapMemberID(cfg.Name, []string{cfg.PeerURL}, cfg.InitialClusterToken)
	if err != nil {
		return err
	}
	md, ok, err := membergate.ReadWALMetadata(membergate.WALDir(cfg.DataDir))
	switch {
	case err != nil:
		return fmt.Errorf("%w: its log cannot be read (%v)", ErrForeignData, err)
	case !ok:
		return fmt.Errorf("%w: it has data but no log", ErrForeignData)
	case md.MemberID != want:
		return fmt.Errorf("%w: member %x, where this cluster's restored member is %x; delete the claim to restore onto an empty volume", ErrForeignData, md.MemberID, want)
	}
	return nil
}

// RestoreConfig restores one member's data directory from a stored snapshot.
type RestoreConfig struct {
	Key string
	// DataDir is the member's etcd data directory.
	DataDir string
	// Name, PeerURL, InitialCluster and InitialClusterToken are the member's etcd bootstrap settings: every
	// member restores the same snapshot with the same initial cluster, which gives the data a new cluster ID.
	Name                string
	PeerURL             string
	InitialCluster      string
	InitialClusterToken string
	// Recovery names a quorum-loss recovery: data of another member in DataDir (the lost cluster's) is
	// moved aside, to MovedAsideDir, and the snapshot restored in its place ("" refuses such data).
	Recovery string
}

// MovedAsideDir is where a quorum-loss recovery keeps the data it found in a member's data directory: on the
// same volume (a rename, not a copy), for a human to inspect or delete. Nothing deletes it.
func (cfg RestoreConfig) MovedAsideDir() string {
	return filepath.Join(filepath.Dir(cfg.DataDir), "lost-before-"+cfg.Recovery)
}

// Restored is what a restore did.
type Restored struct {
	Info
	// Restored: the snapshot was restored (false: the data directory already held this restore's member).
	Restored bool
	// MovedAside is where data found in the data directory went ("" when none was moved).
	MovedAside string
}

// Restore fills an empty data directory from the snapshot at cfg.Key and reports what it did. A data
// directory that already holds this restore's member is left alone: the member was restored before, and
// its data is newer than any snapshot; any other member's data is refused, or, in a quorum-loss recovery,
// moved aside first. The snapshot is verified before anything is written, and the data directory appears
// complete or not at all.
func Restore(ctx context.Context, lg *zap.Logger, store Store, cfg RestoreConfig) (Restored, error) {
	var aside string
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "member")); err == nil {
		err := ownData(cfg)
		if !errors.Is(err, ErrForeignData) || cfg.Recovery == "" {
			return Restored{}, err
		}
		if aside, err = moveAside(cfg); err != nil {
			return Restored{}, err
		}
		lg.Info("moved the lost cluster's data aside", zap.String("to", aside), zap.String("recovery", cfg.Recovery))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Restored{}, err
	}
	info, err := restoreSnapshot(ctx, lg, store, cfg)
	return Restored{Info: info, Restored: err == nil, MovedAside: aside}, err
}

// moveAside renames the data directory to MovedAsideDir (another name if that is taken) and makes the
// rename durable before anything is restored in its place.
func moveAside(cfg RestoreConfig) (string, error) {
	to := cfg.MovedAsideDir()
	if _, err := os.Lstat(to); err == nil {
		to += "-" + randomSuffix()
	}
	if err := os.Rename(cfg.DataDir, to); err != nil {
		return "", fmt.Errorf("move the data directory aside: %w", err)
	}
	return to, syncDir(filepath.Dir(cfg.DataDir))
}

func restoreSnapshot(ctx context.Context, lg *zap.Logger, store Store, cfg RestoreConfig) (Info, error) {
	staging := filepath.Join(filepath.Dir(cfg.DataDir), "restore")
	if err := os.RemoveAll(staging); err != nil {
		return Info{}, err
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return Info{}, err
	}
	defer func() { _ = os.RemoveAll(staging) }()
	file := filepath.Join(staging, "snapshot.db")
	if err := store.Get(ctx, cfg.Key, file); err != nil {
		return Info{}, err
	}
	info, err := Verify(lg, file)
	if err != nil {
		return Info{}, err
	}
	info.Key, info.Location = cfg.Key, store.Location(cfg.Key)
	out := filepath.Join(staging, "data")
	err = snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                cfg.Name,
		OutputDataDir:       out,
		PeerURLs:            []string{cfg.PeerURL},
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.InitialClusterToken,
	})
	if err != nil {
		return Info{}, fmt.Errorf("restore %s: %w", cfg.Key, err)
	}
	// An empty data directory (a fresh volume's mount point, say) is replaced by the restored one.
	if err := os.Remove(cfg.DataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("data directory %s is not empty and holds no member: %w", cfg.DataDir, err)
	}
	if err := os.Rename(out, cfg.DataDir); err != nil {
		return Info{}, err
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return Info{}, err
	}
	return info, syncDir(filepath.Dir(cfg.DataDir))
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
