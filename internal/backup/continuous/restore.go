package continuous

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
)

// Defaults of RestoreConfig.
const (
	DefaultUnknownLeaseTTL   = 60
	DefaultStartTimeout      = time.Minute
	DefaultQuotaBackendBytes = 8 << 30
)

// etcd's defaults, which the temporary member raises when a revision needs more.
const (
	etcdMaxTxnOps       = 128
	etcdMaxRequestBytes = 1536 * 1024
)

// RestoreConfig restores a cluster's state at a target from its continuous backup.
type RestoreConfig struct {
	Store      backup.Store
	Prefix     string
	ClusterUID string
	Target     Target
	// EtcdBinary runs the temporary member that replays the changes (the cluster's etcd version).
	EtcdBinary string
	// WorkDir holds the downloaded chain and the temporary member; it needs room for the base snapshot,
	// the segments up to the target and the replayed database. What the restore puts there is removed.
	WorkDir string
	// OutputSnapshot receives an etcd snapshot of the cluster at the target revision: what
	// backup.Restore (every member of a new cluster) or etcdutl restores.
	OutputSnapshot string
	// Member, when set, also restores that snapshot into a member's data directory, which must not exist
	// (a volume's mount point exists: store the output snapshot and use backup.Restore, as for any
	// snapshot).
	Member *MemberConfig
	Logger *zap.Logger
	// UnknownLeaseTTL is the TTL in seconds granted to a lease the capturer never learned the TTL of (it
	// was gone when asked); DefaultUnknownLeaseTTL.
	UnknownLeaseTTL int64
	// StartTimeout bounds the temporary member's start (DefaultStartTimeout).
	StartTimeout time.Duration
	// QuotaBackendBytes is the temporary member's database quota (DefaultQuotaBackendBytes).
	QuotaBackendBytes int64
}

// MemberConfig is a member's etcd bootstrap settings, as in backup.RestoreConfig.
type MemberConfig struct {
	DataDir             string
	Name                string
	PeerURL             string
	InitialCluster      string
	InitialClusterToken string
}

// RestorePlan is a verified restore: the chain, the exact revision, and the verified files it replays.
type RestorePlan struct {
	ChainID      string
	BaseRevision int64
	// Revision is the target revision; Time when the capturer received it (the base snapshot's time for
	// the base revision).
	Revision int64
	Time     time.Time
	// Segments, Revisions and Events are what the replay applies.
	Segments  int
	Revisions int64
	Events    int
	// Problems are what the catalog found amiss: with the default target, the newest restorable revision
	// may be older than the newest captured one because of them.
	Problems []string

	dir          string
	snapshotFile string
	segmentFiles []string
	leaseTTLs    map[int64]int64
	limits       memberLimits
	unknownTTL   int64
	startTimeout time.Duration
	outputFile   string
	member       *MemberConfig
	lg           *zap.Logger
	cleanupOnce  sync.Once
	etcdBinary   string
}

// RestoreResult describes a finished restore.
type RestoreResult struct {
	ChainID      string
	BaseRevision int64
	Revision     int64
	Time         time.Time
	Revisions    int64
	Events       int
	Problems     []string
	// LeasesGranted counts leases the replay granted (those in the base snapshot already existed).
	LeasesGranted int
	// Hash and CompactRevision are etcd's HashKV at Revision on the restored state: equal to the source's
	// HashKV at Revision whenever the source reports the same compact revision.
	Hash            uint32
	CompactRevision int64
	// Snapshot is the verified output snapshot.
	Snapshot backup.Info
	Duration time.Duration
}

// PrepareRestore resolves the target, downloads the base snapshot and the segments up to the target into
// cfg.WorkDir and verifies all of it: the snapshot's digest and revision against its manifest, and for
// every segment its checksums, cluster, chain, number, link to the previous segment and contiguous
// revisions. It starts nothing. A target outside the restorable ranges is refused with a
// NotRestorableError; a damaged, missing, reordered or foreign object with an IntegrityError. Both state
// what remains restorable. Close the plan when done.
func PrepareRestore(ctx context.Context, cfg RestoreConfig) (*RestorePlan, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	if cfg.Store == nil || cfg.ClusterUID == "" || cfg.WorkDir == "" {
		return nil, errors.New("continuous restore: Store, ClusterUID and WorkDir are required")
	}
	if m := cfg.Member; m != nil {
		if _, err := os.Stat(m.DataDir); err == nil {
			return nil, fmt.Errorf("continuous restore: data directory %s exists", m.DataDir)
		}
	}
	cat, err := ReadCatalog(ctx, cfg.Store, cfg.Prefix, cfg.ClusterUID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, err
	}
	if cfg.Target == (Target{}) {
		// The newest revision the listing shows: damage found in verifying it refuses the restore rather
		// than restoring an older revision unasked.
		_, rev, err := cat.resolve(cfg.Target)
		if err != nil {
			return nil, err
		}
		cfg.Target.Revision = rev
	}
	// A damaged chain is set aside (or cut short) and the target resolved again: an overlapping chain
	// may still restore it.
	var damage *IntegrityError
	for {
		ch, rev, err := cat.resolve(cfg.Target)
		if err != nil {
			if damage != nil {
				return nil, damage
			}
			return nil, err
		}
		p, err := newPlan(cfg, lg, cat, ch, rev)
		if err != nil {
			return nil, err
		}
		err = p.verify(ctx, cfg, cat, ch)
		if err == nil {
			return p, nil
		}
		p.Close()
		if !errors.As(err, &damage) {
			return nil, err
		}
		lg.Warn("continuous backup damaged", zap.Error(err))
		cat = cat.withDamage(ch, damage.usable, damage.Key+": "+damage.Reason)
	}
}

func newPlan(cfg RestoreConfig, lg *zap.Logger, cat *Catalog, ch *Chain, rev int64) (*RestorePlan, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "point-in-time-")
	if err != nil {
		return nil, err
	}
	p := &RestorePlan{ChainID: ch.ID, BaseRevision: ch.Manifest.BaseRevision, Revision: rev, Time: ch.Manifest.TakenAt, Problems: cat.Problems,
		dir: dir, leaseTTLs: map[int64]int64{}, unknownTTL: cfg.UnknownLeaseTTL, startTimeout: cfg.StartTimeout,
		outputFile: cfg.OutputSnapshot, member: cfg.Member, lg: lg, etcdBinary: cfg.EtcdBinary,
		limits: memberLimits{maxTxnOps: etcdMaxTxnOps, maxRequestBytes: etcdMaxRequestBytes, quotaBytes: cfg.QuotaBackendBytes}}
	if p.unknownTTL <= 0 {
		p.unknownTTL = DefaultUnknownLeaseTTL
	}
	if p.startTimeout <= 0 {
		p.startTimeout = DefaultStartTimeout
	}
	if p.limits.quotaBytes <= 0 {
		p.limits.quotaBytes = DefaultQuotaBackendBytes
	}
	return p, nil
}

// Close removes what the plan downloaded.
func (p *RestorePlan) Close() {
	p.cleanupOnce.Do(func() { _ = os.RemoveAll(p.dir) })
}

func (p *RestorePlan) verify(ctx context.Context, cfg RestoreConfig, cat *Catalog, ch *Chain) error {
	// integrity reports damage that leaves the chain restorable through its first n segments (n < 0:
	// not at all).
	integrity := func(key string, n int, reason string) error {
		return &IntegrityError{Key: key, Reason: reason, Ranges: cat.withDamage(ch, n, reason).Ranges(), usable: n}
	}
	p.snapshotFile = filepath.Join(p.dir, snapshotName)
	if err := cfg.Store.Get(ctx, ch.SnapshotKey, p.snapshotFile); err != nil {
		return err
	}
	info, err := backup.Verify(p.lg, p.snapshotFile)
	if err != nil {
		return integrity(ch.SnapshotKey, -1, err.Error())
	}
	rev, _, err := snapshotRevisions(p.snapshotFile, info)
	if err != nil {
		return integrity(ch.SnapshotKey, -1, err.Error())
	}
	if rev != ch.Manifest.BaseRevision || info.SHA256 != ch.Manifest.SnapshotSHA256 {
		return integrity(ch.SnapshotKey, -1, fmt.Sprintf("the snapshot holds revision %d with SHA-256 %s, its manifest says revision %d with %s",
			rev, info.SHA256, ch.Manifest.BaseRevision, ch.Manifest.SnapshotSHA256))
	}

	byTime := cfg.Target.Revision <= 0 && !cfg.Target.Time.IsZero()
	if byTime {
		p.Revision = ch.Manifest.BaseRevision
	}
	prev := ch.ManifestSHA256
	next := ch.Manifest.BaseRevision + 1
	for i, ref := range ch.Segments {
		if !byTime && ref.First > p.Revision {
			break
		}
		data, err := getBytes(ctx, cfg.Store, ref.Key)
		if err != nil {
			return err
		}
		seg, sum, err := DecodeSegment(data)
		if err != nil {
			return integrity(ref.Key, i, err.Error())
		}
		h := seg.Header
		var problem string
		switch {
		case h.ClusterUID != cfg.ClusterUID:
			problem = fmt.Sprintf("the segment belongs to cluster %q", h.ClusterUID)
		case h.ChainID != ch.ID:
			problem = fmt.Sprintf("the segment belongs to chain %s", h.ChainID)
		case h.Seq != uint64(i) || h.Seq != ref.Seq:
			problem = fmt.Sprintf("the segment is number %d of its chain, stored as number %d", h.Seq, ref.Seq)
		case h.PrevSHA256 != hex.EncodeToString(prev[:]):
			problem = fmt.Sprintf("the segment does not follow the previous one (it names SHA-256 %s, the previous is %x)", h.PrevSHA256, prev)
		case h.FirstRevision != next || h.FirstRevision != ref.First || h.LastRevision != ref.Last:
			problem = fmt.Sprintf("the segment holds revisions %d..%d, where %d..%d (from %d) was expected", h.FirstRevision, h.LastRevision, ref.First, ref.Last, next)
		}
		if problem != "" {
			return integrity(ref.Key, i, problem)
		}
		file := filepath.Join(p.dir, fmt.Sprintf("segment-%010d.seg", i))
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return err
		}
		p.segmentFiles = append(p.segmentFiles, file)
		p.Segments++
		for _, l := range seg.Leases {
			p.leaseTTLs[l.ID] = l.TTL
		}
		for _, r := range seg.Revisions {
			if byTime {
				if r.Time.After(cfg.Target.Time) {
					break
				}
				p.Revision, p.Time = r.Revision, r.Time
			} else if r.Revision > p.Revision {
				break
			} else {
				p.Time = r.Time
			}
			p.Revisions++
			p.Events += len(r.Changes)
			size := 0
			for _, c := range r.Changes {
				size += len(c.KV.Key) + len(c.KV.Value) + 32
			}
			p.limits.maxTxnOps = max(p.limits.maxTxnOps, len(r.Changes))
			p.limits.maxRequestBytes = max(p.limits.maxRequestBytes, size+(1<<20))
		}
		prev, next = sum, h.LastRevision+1
		if byTime && !h.CoveredUntil.Before(cfg.Target.Time) {
			break
		}
	}
	if byTime && p.Revision == ch.Manifest.BaseRevision {
		p.Time = ch.Manifest.TakenAt
	}
	if !byTime && next <= p.Revision {
		return integrity(ch.ManifestKey, len(ch.Segments), fmt.Sprintf("the chain's segments end at revision %d", next-1))
	}
	return nil
}

// RestoreTo restores the state of a cluster at cfg.Target into cfg.OutputSnapshot (and cfg.Member's data
// directory, if set). Everything is verified before anything starts (see PrepareRestore). It restores
// the chain's base snapshot into a temporary single-member etcd, grants the leases the replay needs with
// their original IDs, replays each captured revision as exactly one transaction (so revision numbers
// line up one to one), checks the member reached the target revision with every replayed key as
// captured, records etcd's HashKV there, and snapshots the member.
func RestoreTo(ctx context.Context, cfg RestoreConfig) (*RestoreResult, error) {
	p, err := PrepareRestore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Execute(ctx)
}

// Execute replays the verified plan (see RestoreTo).
func (p *RestorePlan) Execute(ctx context.Context) (*RestoreResult, error) {
	start := time.Now()
	if p.outputFile == "" {
		return nil, errors.New("continuous restore: OutputSnapshot is required")
	}
	if p.etcdBinary == "" {
		return nil, errors.New("continuous restore: EtcdBinary is required")
	}
	m, err := startTempMember(ctx, p.lg, p.etcdBinary, filepath.Join(p.dir, "member"), p.snapshotFile, p.limits, p.startTimeout)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	res := &RestoreResult{ChainID: p.ChainID, BaseRevision: p.BaseRevision, Revision: p.Revision, Time: p.Time, Revisions: p.Revisions, Events: p.Events, Problems: p.Problems}
	if err := p.replay(ctx, m, res); err != nil {
		return nil, err
	}
	h, err := m.cli.HashKV(ctx, m.clientURL, p.Revision)
	if err != nil {
		return nil, fmt.Errorf("hash of the restored state: %w", err)
	}
	res.Hash, res.CompactRevision = h.Hash, h.CompactRevision
	if err := os.MkdirAll(filepath.Dir(p.outputFile), 0o700); err != nil {
		return nil, err
	}
	if _, err := clientSnapshot(ctx, m.cli, p.outputFile); err != nil {
		return nil, fmt.Errorf("snapshot of the restored state: %w", err)
	}
	m.stop()
	info, err := backup.Verify(p.lg, p.outputFile)
	if err != nil {
		return nil, err
	}
	if info.Revision, _, err = snapshotRevisions(p.outputFile, info); err != nil {
		return nil, err
	}
	if info.Revision != p.Revision {
		return nil, fmt.Errorf("the restored snapshot holds revision %d, not %d", info.Revision, p.Revision)
	}
	res.Snapshot = info
	if mc := p.member; mc != nil {
		err := snapshot.NewV3(p.lg).Restore(snapshot.RestoreConfig{
			SnapshotPath: p.outputFile, Name: mc.Name, OutputDataDir: mc.DataDir, PeerURLs: []string{mc.PeerURL},
			InitialCluster: mc.InitialCluster, InitialClusterToken: mc.InitialClusterToken,
		})
		if err != nil {
			return nil, fmt.Errorf("restore into %s: %w", mc.DataDir, err)
		}
	}
	res.Duration = time.Since(start)
	p.lg.Info("restored", zap.String("chain", p.ChainID), zap.Int64("revision", p.Revision), zap.Int64("replayed", p.Revisions),
		zap.Uint32("hash", res.Hash), zap.Duration("took", res.Duration))
	return res, nil
}

// keyState is what a replayed key must look like at the target: its metadata and a digest of its value,
// or deleted.
type keyState struct {
	deleted                       bool
	create, mod, version, leaseID int64
	value                         [sha256.Size]byte
}

func stateOf(kv *mvccpb.KeyValue) keyState {
	return keyState{create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, leaseID: kv.Lease, value: sha256.Sum256(kv.Value)}
}

// leaseKeeper keeps the leases of the temporary member alive while the replay runs: leases expire on the
// member as on any leader, and an expiry there would delete keys in a revision of its own.
type leaseKeeper struct {
	cli     *clientv3.Client
	ctx     context.Context
	mu      sync.Mutex
	expired []int64
	wg      sync.WaitGroup
}

func (k *leaseKeeper) keep(id int64) error {
	ch, err := k.cli.KeepAlive(k.ctx, clientv3.LeaseID(id))
	if err != nil {
		return err
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for range ch {
		}
		if k.ctx.Err() == nil {
			k.mu.Lock()
			k.expired = append(k.expired, id)
			k.mu.Unlock()
		}
	}()
	return nil
}

func (k *leaseKeeper) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.expired) == 0 {
		return nil
	}
	return fmt.Errorf("lease %x expired on the temporary member during the replay", k.expired[0])
}

func (p *RestorePlan) replay(ctx context.Context, m *tempMember, res *RestoreResult) error {
	cli := m.cli
	got, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if got.Header.Revision != p.BaseRevision {
		return fmt.Errorf("the base snapshot starts at revision %d, its manifest says %d", got.Header.Revision, p.BaseRevision)
	}
	kctx, cancel := context.WithCancel(ctx)
	keeper := &leaseKeeper{cli: cli, ctx: kctx}
	defer func() { cancel(); keeper.wg.Wait() }()
	leases := map[int64]bool{}
	existing, err := cli.Leases(ctx)
	if err != nil {
		return err
	}
	for _, l := range existing.Leases {
		leases[int64(l.ID)] = true
		if err := keeper.keep(int64(l.ID)); err != nil {
			return err
		}
	}
	lc := pb.NewLeaseClient(cli.ActiveConnection())
	want := map[string]keyState{}
	for _, file := range p.segmentFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		seg, _, err := DecodeSegment(data)
		if err != nil {
			return err
		}
		for _, r := range seg.Revisions {
			if r.Revision > p.Revision {
				break
			}
			ops := make([]clientv3.Op, 0, len(r.Changes))
			for _, c := range r.Changes {
				key := string(c.KV.Key)
				if c.Delete {
					ops = append(ops, clientv3.OpDelete(key))
					want[key] = keyState{deleted: true}
					continue
				}
				var opts []clientv3.OpOption
				if id := c.KV.Lease; id != 0 {
					if !leases[id] {
						ttl := p.leaseTTLs[id]
						if ttl <= 0 {
							ttl = p.unknownTTL
						}
						if _, err := lc.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl}); err != nil {
							return fmt.Errorf("grant lease %x for revision %d: %w", id, r.Revision, err)
						}
						if err := keeper.keep(id); err != nil {
							return err
						}
						leases[id] = true
						res.LeasesGranted++
					}
					opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
				}
				ops = append(ops, clientv3.OpPut(key, string(c.KV.Value), opts...))
				want[key] = stateOf(c.KV)
			}
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return fmt.Errorf("replay revision %d: %w", r.Revision, err)
			}
			if resp.Header.Revision != r.Revision {
				if kerr := keeper.err(); kerr != nil {
					return fmt.Errorf("replay revision %d: %w", r.Revision, kerr)
				}
				return fmt.Errorf("replay of revision %d made revision %d: the replay diverged from the source", r.Revision, resp.Header.Revision)
			}
		}
	}
	if err := keeper.err(); err != nil {
		return err
	}
	got, err = cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if got.Header.Revision != p.Revision {
		return fmt.Errorf("the temporary member is at revision %d after the replay, not %d", got.Header.Revision, p.Revision)
	}
	return checkKeys(ctx, cli, want)
}

// checkKeys reads every replayed key back: each must be as the capture recorded its last change (value,
// create and modify revision, version, lease), or absent after a delete.
func checkKeys(ctx context.Context, cli *clientv3.Client, want map[string]keyState) error {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for batch := range slices.Chunk(keys, etcdMaxTxnOps) {
		ops := make([]clientv3.Op, len(batch))
		for i, k := range batch {
			ops[i] = clientv3.OpGet(k)
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		for i, k := range batch {
			kvs := resp.Responses[i].GetResponseRange().GetKvs()
			w := want[k]
			switch {
			case w.deleted && len(kvs) == 0:
			case w.deleted:
				return fmt.Errorf("key %q exists after the replay, the capture deleted it", k)
			case len(kvs) != 1:
				return fmt.Errorf("key %q is missing after the replay", k)
			case stateOf(kvs[0]) != w:
				kv := kvs[0]
				return fmt.Errorf("key %q after the replay: create %d, mod %d, version %d, lease %x, value %s; captured: create %d, mod %d, version %d, lease %x, value %x",
					k, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease, hexSum(kv.Value), w.create, w.mod, w.version, w.leaseID, w.value)
			}
		}
	}
	return nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
