package continuous

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seedops/etcd-operator/internal/backup"
)

// Defaults of Config.
const (
	DefaultFlushInterval      = 10 * time.Second
	DefaultMaxSegmentBytes    = 8 << 20
	DefaultChainInterval      = 24 * time.Hour
	DefaultCheckpointInterval = time.Minute
)

// maxPendingProgress bounds the progress requests awaiting an answer (etcd ignores a request while the
// watch catches up).
const maxPendingProgress = 8

// Config configures a Capturer.
type Config struct {
	// Client reads the cluster: the watch, lease lookups and (by default) the snapshots.
	Client *clientv3.Client
	// Store receives snapshots, manifests and segments under Prefix.
	Store  backup.Store
	Prefix string
	// ClusterUID names the cluster in every object, so that a restore never mixes clusters.
	ClusterUID string
	// StagingDir holds snapshots and segments while they are written and stored.
	StagingDir string
	Logger     *zap.Logger
	// FlushInterval is how often buffered changes are stored (DefaultFlushInterval): at most this much
	// recent history is lost if the capturer dies.
	FlushInterval time.Duration
	// MaxSegmentBytes stores a segment early when it grows this large (DefaultMaxSegmentBytes).
	MaxSegmentBytes int
	// ChainInterval starts a new chain (a new full snapshot) this often (DefaultChainInterval; negative:
	// never), which bounds a restore's replay and lets retention drop old history.
	ChainInterval time.Duration
	// ChainMaxBytes also starts a new chain once the chain's segments hold this many bytes (0: no bound).
	ChainMaxBytes int64
	// CheckpointInterval is how often an idle cluster's coverage is extended with an empty segment
	// (DefaultCheckpointInterval; negative: never), so that a time target after the last write resolves.
	CheckpointInterval time.Duration
	// Snapshot writes a full snapshot of the cluster to path and returns etcd's version; nil streams it
	// through Client. backup.Take fits, for a snapshot from one chosen member.
	Snapshot func(ctx context.Context, path string) (string, error)
	// OnEvent, when set, is called from the capture loop for every event; it must not block.
	OnEvent func(Event)

	// watch opens the watch from a revision; tests replace it to lose a watch on purpose.
	watch func(ctx context.Context, from int64) clientv3.WatchChan
}

// EventKind says what happened.
type EventKind string

const (
	// ChainStarted: a full snapshot was stored and a new chain begun (Manifest).
	ChainStarted EventKind = "ChainStarted"
	// ChainResumed: the capturer continues the chain a previous run left (Manifest).
	ChainResumed EventKind = "ChainResumed"
	// SegmentWritten: a segment was stored (Segment, SegmentBytes).
	SegmentWritten EventKind = "SegmentWritten"
	// GapRecorded: history was compacted before the capturer read it (Gap); no chain restores those
	// revisions.
	GapRecorded EventKind = "GapRecorded"
	// CaptureFailed: a step failed and is retried (Err).
	CaptureFailed EventKind = "CaptureFailed"
)

// Event reports progress to the caller (metrics, status).
type Event struct {
	Kind         EventKind
	Time         time.Time
	ChainID      string
	Manifest     *Manifest
	Segment      *SegmentHeader
	SegmentBytes int64
	Gap          *Gap
	Err          error
	// Status is the capturer's status after the event.
	Status Status
}

// Status is what the capturer covers now.
type Status struct {
	// ChainID is the current chain; BaseRevision and BaseTime its snapshot's revision and time.
	ChainID      string
	BaseRevision int64
	BaseTime     time.Time
	// StoredRevision is the newest revision in the store: the current chain restores
	// BaseRevision..StoredRevision, up to StoredTime.
	StoredRevision int64
	StoredTime     time.Time
	// ReceivedRevision is the newest revision received; those after StoredRevision are buffered.
	ReceivedRevision int64
	// Segments counts the current chain's stored segments.
	Segments uint64
	// ChainsStarted and Gaps count what this capturer began and recorded.
	ChainsStarted int
	Gaps          int
	LastError     string
}

// Capturer records every change of a cluster after a full snapshot into a store. Run one capturer per
// cluster and store prefix: two would fork the chain.
type Capturer struct {
	cfg Config
	lg  *zap.Logger

	mu     sync.Mutex
	status Status
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Capturer, error) {
	if cfg.Client == nil || cfg.Store == nil || cfg.ClusterUID == "" || cfg.StagingDir == "" {
		return nil, errors.New("continuous backup: Client, Store, ClusterUID and StagingDir are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.MaxSegmentBytes <= 0 {
		cfg.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if cfg.ChainInterval == 0 {
		cfg.ChainInterval = DefaultChainInterval
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.Snapshot == nil {
		cli := cfg.Client
		cfg.Snapshot = func(ctx context.Context, path string) (string, error) { return clientSnapshot(ctx, cli, path) }
	}
	if cfg.watch == nil {
		cli := cfg.Client
		cfg.watch = func(ctx context.Context, from int64) clientv3.WatchChan {
			return cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from))
		}
	}
	return &Capturer{cfg: cfg, lg: cfg.Logger}, nil
}

// Status returns what the capturer covers now.
func (c *Capturer) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// chain is the state of the chain being written.
type chain struct {
	manifest Manifest
	seq      uint64
	prevSum  [sha256.Size]byte
	// stored is the newest revision in the store, storedCovered the CoveredUntil of the last segment.
	stored        int64
	storedCovered time.Time
	storedBytes   int64
	// last is the newest revision received, lastTime when; covered is the latest time at which last is
	// known to have been the cluster's newest revision.
	last     int64
	lastTime time.Time
	covered  time.Time
	body     segmentBody
	leases   map[int64]bool
	// etcdClusterID is the etcd cluster the chain records (historyBreak).
	etcdClusterID string
}

func (c *Capturer) update(f func(*Status)) Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.status)
	return c.status
}

func (c *Capturer) emit(e Event, f func(*Status)) {
	e.Time = time.Now()
	e.Status = c.update(f)
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(e)
	}
}

func (c *Capturer) failed(step string, err error) {
	err = fmt.Errorf("%s: %w", step, err)
	c.lg.Warn("continuous backup step failed, retrying", zap.Error(err))
	c.emit(Event{Kind: CaptureFailed, Err: err}, func(s *Status) { s.LastError = err.Error() })
}

func (c *Capturer) chainStatus(ch *chain) func(*Status) {
	return func(s *Status) {
		s.ChainID, s.BaseRevision, s.BaseTime = ch.manifest.ChainID, ch.manifest.BaseRevision, ch.manifest.TakenAt
		s.StoredRevision, s.StoredTime, s.ReceivedRevision, s.Segments = ch.stored, ch.storedCovered, ch.last, ch.seq
	}
}

// lostHistoryError: the watch cannot continue from the revision after the last one received.
type lostHistoryError struct{ reason string }

func (e *lostHistoryError) Error() string { return e.reason }

// identityTimeout bounds the check of the cluster's identity before a chain starts or a watch (re)starts.
const identityTimeout = 10 * time.Second

// historyRestartedError: the cluster's history is not the one the chain records (historyBreak).
type historyRestartedError struct{ reason string }

func (e *historyRestartedError) Error() string { return e.reason }

// identity asks the cluster for its etcd cluster ID (hex) and current revision, for at most timeout.
func (c *Capturer) identity(ctx context.Context, timeout time.Duration) (string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.cfg.Client.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		return "", 0, fmt.Errorf("read the cluster's ID and revision: %w", err)
	}
	return clusterIDString(resp.Header.ClusterId), resp.Header.Revision, nil
}

func clusterIDString(id uint64) string { return strconv.FormatUint(id, 16) }

// historyBreak says whether the etcd cluster clusterID, at revision rev, continues the history ch records:
// a cluster restored from a snapshot (a restore, a quorum-loss recovery) has another cluster ID, or a
// revision below what ch received, and its revisions from then on are not ch's. A chain that does not
// record its cluster's ID takes the first one seen.
func historyBreak(ch *chain, clusterID string, rev int64) error {
	if ch.etcdClusterID == "" {
		ch.etcdClusterID = clusterID
	}
	switch {
	case clusterID != ch.etcdClusterID:
		return &historyRestartedError{reason: fmt.Sprintf("the cluster's history restarted: it is etcd cluster %s, not %s, which chain %s records (restored from a snapshot)",
			clusterID, ch.etcdClusterID, ch.manifest.ChainID)}
	case rev < ch.last:
		return &historyRestartedError{reason: fmt.Sprintf("the cluster's history restarted: its revision %d is below revision %d, which chain %s holds (restored from an older snapshot)",
			rev, ch.last, ch.manifest.ChainID)}
	}
	return nil
}

// Run captures until ctx ends; then it stores what it has buffered and returns nil. It continues the
// newest chain in the store when the cluster still holds the history after it, and otherwise begins a new
// chain, recording the revisions it could not capture as a gap. Failures of the store or the cluster are
// retried (and reported as CaptureFailed events); Run returns an error only for a configuration it
// cannot work with.
func (c *Capturer) Run(ctx context.Context) error {
	if err := os.MkdirAll(c.cfg.StagingDir, 0o700); err != nil {
		return err
	}
	ch, prev := c.resume(ctx)
	for ctx.Err() == nil {
		if ch == nil {
			var gap *Gap
			if prev != nil {
				gap = &Gap{DetectedAt: time.Now().UTC(), AfterChain: prev.manifest.ChainID,
					Reason: "not captured: the capturer was not running, or the previous chain's end is damaged"}
			}
			ch = c.startChain(ctx, ReasonStart, prev, gap)
			continue
		}
		err := c.follow(ctx, &ch)
		var lost *lostHistoryError
		var restarted *historyRestartedError
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &restarted):
			// What is buffered was received before the break: it is the chain's own history.
			c.lg.Warn("the cluster's history restarted: starting a new chain", zap.String("reason", restarted.reason), zap.Int64("after", ch.last))
			detected := time.Now()
			if c.flush(ctx, ch) != nil {
				continue
			}
			ch = c.startChain(ctx, ReasonHistoryRestarted, ch, &Gap{DetectedAt: detected.UTC(), Reason: restarted.reason, AfterChain: ch.manifest.ChainID})
		case errors.As(err, &lost):
			c.lg.Warn("history lost before it was captured: starting a new chain", zap.String("reason", lost.reason), zap.Int64("after", ch.last))
			detected := time.Now()
			if c.flush(ctx, ch) != nil {
				continue
			}
			ch = c.startChain(ctx, ReasonLostHistory, ch, &Gap{DetectedAt: detected.UTC(), Reason: lost.reason, AfterChain: ch.manifest.ChainID})
		default:
			c.failed("watch", err)
			sleep(ctx, time.Second)
		}
	}
	if ch != nil && ch.body.revisions > 0 {
		// The run ends with ctx; what is buffered is still stored, within a bound.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.flush(fctx, ch)
	}
	return nil
}

// resume continues the newest chain of the store. When it cannot, it returns the newest chain's end (for
// the gap a new chain records), or nothing when the store holds no chain.
func (c *Capturer) resume(ctx context.Context) (ch, prev *chain) {
	for ctx.Err() == nil {
		cat, err := ReadCatalog(ctx, c.cfg.Store, c.cfg.Prefix, c.cfg.ClusterUID)
		if err != nil {
			c.failed("read the catalog", err)
			sleep(ctx, time.Second)
			continue
		}
		last := cat.Latest()
		if last == nil {
			return nil, nil
		}
		end := &chain{manifest: last.Manifest, last: last.Newest(), etcdClusterID: last.Manifest.EtcdClusterID}
		if last.Problem != "" {
			c.lg.Warn("the newest chain is damaged: starting a new chain", zap.String("chain", last.ID), zap.String("problem", last.Problem))
			return nil, end
		}
		ch := &chain{manifest: last.Manifest, prevSum: last.ManifestSHA256, stored: last.Manifest.BaseRevision,
			storedCovered: last.Manifest.TakenAt, leases: map[int64]bool{}, etcdClusterID: last.Manifest.EtcdClusterID}
		if n := len(last.Segments); n > 0 {
			ref := last.Segments[n-1]
			data, err := getBytes(ctx, c.cfg.Store, ref.Key)
			if err != nil {
				c.failed("read the last segment", err)
				sleep(ctx, time.Second)
				continue
			}
			seg, sum, err := DecodeSegment(data)
			if err != nil || seg.Header.ClusterUID != c.cfg.ClusterUID || seg.Header.ChainID != last.ID || seg.Header.Seq != ref.Seq || seg.Header.LastRevision != ref.Last {
				c.lg.Warn("the newest chain's last segment does not verify: starting a new chain", zap.String("key", ref.Key), zap.Error(err))
				end.last = ref.First - 1
				return nil, end
			}
			ch.seq, ch.prevSum, ch.stored, ch.storedCovered = ref.Seq+1, sum, ref.Last, seg.Header.CoveredUntil
			for _, r := range seg.Revisions {
				ch.lastTime = r.Time
			}
		}
		for _, ref := range last.Segments {
			ch.storedBytes += ref.Size
		}
		ch.last, ch.covered = ch.stored, ch.storedCovered
		if ch.lastTime.IsZero() {
			ch.lastTime = ch.storedCovered
		}
		ch.body.reset(ch.last + 1)
		m := ch.manifest
		c.lg.Info("resuming chain", zap.String("chain", m.ChainID), zap.Int64("from", ch.last+1))
		c.emit(Event{Kind: ChainResumed, ChainID: m.ChainID, Manifest: &m}, c.chainStatus(ch))
		return ch, nil
	}
	return nil, nil
}

// startChain takes and stores a full snapshot and its manifest, retrying until it succeeds or ctx ends
// (then it returns nil). prev and gap describe the chain it follows after lost history.
func (c *Capturer) startChain(ctx context.Context, reason string, prev *chain, gap *Gap) *chain {
	for ctx.Err() == nil {
		ch, err := c.newChain(ctx, reason, prev, gap, 0)
		if err == nil {
			return ch
		}
		var restarted *historyRestartedError
		if errors.As(err, &restarted) {
			// Not prev's history after all: the chain begins a new one.
			c.lg.Warn("the cluster's history restarted: the new chain begins a new history", zap.String("reason", restarted.reason))
			reason, gap = ReasonHistoryRestarted, &Gap{DetectedAt: time.Now().UTC(), Reason: restarted.reason, AfterChain: prev.manifest.ChainID}
			continue
		}
		c.failed("start a chain", err)
		sleep(ctx, 2*time.Second)
	}
	return nil
}

// newChain takes a snapshot; one older than atLeast is discarded (errStaleSnapshot), since the chain it
// would begin could not continue from the changes already received.
func (c *Capturer) newChain(ctx context.Context, reason string, prev *chain, gap *Gap, atLeast int64) (*chain, error) {
	file := filepath.Join(c.cfg.StagingDir, "snapshot-"+randomHex(6)+".db")
	defer func() { _ = os.Remove(file) }()
	clusterID, _, err := c.identity(ctx, identityTimeout)
	if err != nil {
		return nil, err
	}
	takenAt := time.Now().UTC()
	version, err := c.cfg.Snapshot(ctx, file)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	info, err := backup.Verify(c.lg, file)
	if err != nil {
		return nil, err
	}
	rev, compacted, err := snapshotRevisions(file, info)
	if err != nil {
		return nil, err
	}
	if prev != nil && reason != ReasonHistoryRestarted {
		// A chain that continues prev's history must snapshot that history: the cluster may have been
		// restored since prev's last check.
		check := *prev
		if err := historyBreak(&check, clusterID, rev); err != nil {
			return nil, err
		}
	}
	if rev < atLeast {
		return nil, errStaleSnapshot
	}
	id := newChainID(rev, randomHex(4))
	m := Manifest{Format: FormatVersion, ClusterUID: c.cfg.ClusterUID, ChainID: id, BaseRevision: rev, CompactRevision: compacted,
		SnapshotSHA256: info.SHA256, SnapshotBytes: info.SizeBytes, TakenAt: takenAt, EtcdVersion: version, Reason: reason,
		EtcdClusterID: clusterID, History: id}
	switch {
	case prev != nil && reason == ReasonHistoryRestarted:
		// A new history: none of its revisions before the snapshot's is restorable (the previous chain's
		// revision numbers name another history's states).
		m.PreviousChain = prev.manifest.ChainID
		if gap != nil {
			gap.From, gap.To = 1, rev-1
			m.Gap = gap
		}
	case prev != nil:
		m.PreviousChain, m.History = prev.manifest.ChainID, prev.manifest.History
		if gap != nil && rev > prev.last+1 {
			gap.From, gap.To = prev.last+1, rev-1
			m.Gap = gap
		}
	}
	dir := chainDir(c.cfg.Prefix, id)
	meta := map[string]string{"etcd-revision": strconv.FormatInt(rev, 10), "sha256": info.SHA256, "cluster-uid": c.cfg.ClusterUID}
	if err := c.cfg.Store.Put(ctx, dir+snapshotName, file, meta); err != nil {
		return nil, err
	}
	data, sum, err := encodeManifest(m)
	if err != nil {
		return nil, err
	}
	if err := c.putBytes(ctx, dir+manifestName, data); err != nil {
		return nil, err
	}
	ch := &chain{manifest: m, prevSum: sum, stored: m.BaseRevision, storedCovered: takenAt, last: m.BaseRevision,
		lastTime: takenAt, covered: takenAt, leases: map[int64]bool{}, etcdClusterID: clusterID}
	ch.body.reset(m.BaseRevision + 1)
	c.lg.Info("started chain", zap.String("chain", id), zap.String("reason", reason), zap.Int64("base-revision", m.BaseRevision))
	c.emit(Event{Kind: ChainStarted, ChainID: id, Manifest: &m}, func(s *Status) {
		c.chainStatus(ch)(s)
		s.ChainsStarted++
	})
	if m.Gap != nil {
		g := *m.Gap
		c.emit(Event{Kind: GapRecorded, ChainID: id, Gap: &g}, func(s *Status) { s.Gaps++ })
	}
	return ch, nil
}

var errStaleSnapshot = errors.New("the snapshot is older than the changes already received")

func (c *Capturer) putBytes(ctx context.Context, key string, data []byte) error {
	f, err := os.CreateTemp(c.cfg.StagingDir, "object-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer func() { _ = os.Remove(name) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return c.cfg.Store.Put(ctx, key, name, nil)
}

// follow watches from the revision after the chain's last and stores segments. It returns when ctx ends,
// the watch fails, or (lostHistoryError) the cluster no longer holds the next revision. *chp changes
// when the chain rotates.
func (c *Capturer) follow(ctx context.Context, chp **chain) error {
	ch := *chp
	// Every (re)start of the watch first checks that the cluster still has the chain's history: a watch
	// from a revision the cluster has not reached yet waits for it, and then would record another history.
	clusterID, rev, err := c.identity(ctx, identityTimeout)
	if err != nil {
		return err
	}
	if err := historyBreak(ch, clusterID, rev); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := c.cfg.watch(wctx, ch.last+1)
	ticker := time.NewTicker(c.cfg.FlushInterval)
	defer ticker.Stop()
	var (
		progressAsked []time.Time
		next          *chain // the rotation's chain, once its snapshot is stored
	)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()

		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if wr.Header.ClusterId != 0 {
				// A member of another cluster answers (the cluster was replaced under the watch), or a
				// progress notification names a revision below the one received: another history.
				rev := ch.last
				if wr.IsProgressNotify() {
					rev = wr.Header.Revision
				}
				if err := historyBreak(ch, clusterIDString(wr.Header.ClusterId), rev); err != nil {
					return err
				}
			}
			if wr.CompactRevision != 0 {
				return &lostHistoryError{reason: fmt.Sprintf("compacted at revision %d before revision %d was read", wr.CompactRevision, ch.last+1)}
			}
			if err := wr.Err(); err != nil {
				if errors.Is(err, rpctypes.ErrCompacted) {
					return &lostHistoryError{reason: err.Error()}
				}
				return err
			}
			if wr.IsProgressNotify() {
				if len(progressAsked) > 0 {
					asked := progressAsked[0]
					progressAsked = progressAsked[1:]
					// Every revision up to the header's was delivered when etcd answered, which was after
					// the question: if the last one had arrived before it, it was the newest then.
					if wr.Header.Revision == ch.last && !ch.lastTime.After(asked) && asked.After(ch.covered) {
						ch.covered = asked
					}
				}
				continue
			}
			now := time.Now().UTC()
			for i := 0; i < len(wr.Events); {
				rev := wr.Events[i].Kv.ModRevision
				j := i
				for j < len(wr.Events) && wr.Events[j].Kv.ModRevision == rev {
					j++
				}
				if next != nil && ch.last == next.manifest.BaseRevision {
					// The old chain ends at the new chain's base: later revisions extend the new one.
					if err := c.flush(ctx, ch); err != nil {
						return err
					}
					ch, next = next, nil
					*chp = ch
				}
				if err := c.add(ctx, ch, rev, wr.Events[i:j], now); err != nil {
					return err
				}
				i = j
				if ch.body.buf.Len() >= c.cfg.MaxSegmentBytes {
					if err := c.flush(ctx, ch); err != nil {
						return err
					}
				}
			}

		case <-ticker.C:
			// The client resumes a watch on a restarted member by itself, and a watch from a revision the
			// cluster has not reached answers nothing: only asking notices that the cluster was restored.
			// Bounded by half a flush interval (at least a second): an unreachable cluster must not hold up
			// storing what is buffered; the next tick asks again.
			if clusterID, rev, err := c.identity(ctx, max(c.cfg.FlushInterval/2, time.Second)); err == nil {
				if err := historyBreak(ch, clusterID, rev); err != nil {
					return err
				}
			}
			if ch.body.revisions > 0 || (c.cfg.CheckpointInterval > 0 && ch.covered.Sub(ch.storedCovered) >= c.cfg.CheckpointInterval) {
				if err := c.flush(ctx, ch); err != nil {
					return err
				}
			}
			if len(progressAsked) < maxPendingProgress {
				asked := time.Now().UTC()
				if err := c.cfg.Client.RequestProgress(wctx); err == nil {
					progressAsked = append(progressAsked, asked)
				}
			}
			if next != nil && ch.last == next.manifest.BaseRevision {
				ch, next = next, nil
				*chp = ch
			}
			if next == nil && c.rotationDue(ch) {
				n, err := c.newChain(ctx, ReasonRotation, ch, nil, ch.last)
				switch {
				case err == nil:
					next = n
				case errors.Is(err, errStaleSnapshot):
				default:
					c.failed("start the next chain", err)
				}
			}
		}
	}
}

func (c *Capturer) rotationDue(ch *chain) bool {
	if c.cfg.ChainInterval > 0 && time.Since(ch.manifest.TakenAt) >= c.cfg.ChainInterval {
		return true
	}
	return c.cfg.ChainMaxBytes > 0 && ch.storedBytes >= c.cfg.ChainMaxBytes
}

// add buffers one revision's events.
func (c *Capturer) add(ctx context.Context, ch *chain, rev int64, evs []*clientv3.Event, now time.Time) error {
	if rev <= ch.last {
		return nil // already captured (a resumed watch may repeat the revision it resumed from)
	}
	if rev != ch.last+1 {
		return &lostHistoryError{reason: fmt.Sprintf("the watch skipped from revision %d to %d", ch.last, rev)}
	}
	r := Revision{Revision: rev, Time: now, Changes: make([]Change, len(evs))}
	for i, ev := range evs {
		r.Changes[i] = Change{Delete: ev.Type == mvccpb.Event_DELETE, KV: ev.Kv}
		if id := ev.Kv.Lease; !r.Changes[i].Delete && id != 0 && !ch.leases[id] {
			ch.body.addLease(Lease{ID: id, TTL: c.leaseTTL(ctx, id)})
			ch.leases[id] = true
		}
	}
	if err := ch.body.addRevision(r); err != nil {
		return err
	}
	ch.last, ch.lastTime, ch.covered = rev, now, now
	c.update(func(s *Status) { s.ReceivedRevision = rev })
	return nil
}

// leaseTTL asks for a lease's granted TTL: the capturer learns of a lease from the first key attached to
// it (a grant is no change of the key space), so it asks then, while the lease most likely exists.
func (c *Capturer) leaseTTL(ctx context.Context, id int64) int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.cfg.Client.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil || resp.TTL < 0 {
		return 0
	}
	return resp.GrantedTTL
}

// flush stores the buffered revisions as the chain's next segment (an empty one is a checkpoint), retrying
// until it is stored or ctx ends.
func (c *Capturer) flush(ctx context.Context, ch *chain) error {
	covered := ch.covered
	if ch.body.revisions == 0 && !covered.After(ch.storedCovered) {
		return nil
	}
	h := SegmentHeader{ClusterUID: c.cfg.ClusterUID, ChainID: ch.manifest.ChainID, Seq: ch.seq,
		PrevSHA256: hex.EncodeToString(ch.prevSum[:]), CoveredUntil: covered}
	data, sum, h, err := ch.body.seal(h)
	if err != nil {
		return err
	}
	key := chainDir(c.cfg.Prefix, ch.manifest.ChainID) + segmentName(h)
	for {
		err := c.putBytes(ctx, key, data)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.failed("store segment "+key, err)
		sleep(ctx, time.Second)
	}
	ch.seq++
	ch.prevSum = sum
	ch.stored, ch.storedCovered = h.LastRevision, h.CoveredUntil
	ch.storedBytes += int64(len(data))
	ch.body.reset(h.LastRevision + 1)
	c.emit(Event{Kind: SegmentWritten, ChainID: h.ChainID, Segment: &h, SegmentBytes: int64(len(data))}, c.chainStatus(ch))
	return nil
}

// clientSnapshot streams a snapshot through the client into path (through path.part, as backup.Take).
func clientSnapshot(ctx context.Context, cli *clientv3.Client, path string) (string, error) {
	part := path + ".part"
	defer func() { _ = os.Remove(part) }()
	f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Snapshot.Close() }()
	if _, err := f.ReadFrom(resp.Snapshot); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return resp.Version, os.Rename(part, path)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
