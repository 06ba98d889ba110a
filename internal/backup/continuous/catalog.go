package continuous

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/seedops/etcd-operator/internal/backup"
)

// Object names inside a chain's folder, <prefix>/<chain ID>/.
const (
	manifestName = "manifest.json"
	snapshotName = "snapshot.db"
)

var (
	// A chain ID starts with its base revision, zero-padded, so listings order chains by revision.
	chainIDRE = regexp.MustCompile(`^[0-9]{20}-[0-9a-f]{8}$`)
	// seg-<first revision>-<last revision>-<seq>-<covered until, Unix ms>.seg, zero-padded so that a listing
	// returns a chain's segments in order, and the catalog knows a chain's coverage from names alone.
	segmentNameRE = regexp.MustCompile(`^seg-([0-9]{20})-([0-9]{20})-([0-9]{10})-([0-9]{13})\.seg$`)
)

func newChainID(base int64, random string) string { return fmt.Sprintf("%020d-%s", base, random) }

func segmentName(h SegmentHeader) string {
	return fmt.Sprintf("seg-%020d-%020d-%010d-%013d.seg", h.FirstRevision, h.LastRevision, h.Seq, max(h.CoveredUntil.UnixMilli(), 0))
}

func parseSegmentName(name string) (SegmentRef, bool) {
	m := segmentNameRE.FindStringSubmatch(name)
	if m == nil {
		return SegmentRef{}, false
	}
	first, err1 := strconv.ParseInt(m[1], 10, 64)
	last, err2 := strconv.ParseInt(m[2], 10, 64)
	seq, err3 := strconv.ParseUint(m[3], 10, 64)
	ms, err4 := strconv.ParseInt(m[4], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || first > last+1 {
		return SegmentRef{}, false
	}
	return SegmentRef{Seq: seq, First: first, Last: last, CoveredUntil: time.UnixMilli(ms).UTC()}, true
}

// chainDir is the folder of a chain's objects.
func chainDir(prefix, chainID string) string {
	if prefix == "" {
		return chainID + "/"
	}
	return path.Join(prefix, chainID) + "/"
}

func listPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	return strings.TrimSuffix(prefix, "/") + "/"
}

// SegmentRef is a stored segment as its name describes it.
type SegmentRef struct {
	Key          string
	Seq          uint64
	First        int64
	Last         int64
	CoveredUntil time.Time
	Size         int64
}

// Chain is a full snapshot and the segments that extend it.
type Chain struct {
	ID       string
	Manifest Manifest
	// ManifestSHA256 anchors segment 0 (its PrevSHA256).
	ManifestSHA256 [sha256.Size]byte
	ManifestKey    string
	SnapshotKey    string
	// Segments are the chain's usable segments: numbered from 0 without holes, each starting where the
	// previous one ends.
	Segments []SegmentRef
	// Problem says why coverage stops before the chain's last stored object ("" when nothing is amiss).
	Problem string
	// Keys are all of the chain's objects, Bytes their total size, LastModified the newest one's time.
	Keys         []string
	Bytes        int64
	LastModified time.Time
}

// Newest is the newest revision the chain restores.
func (c *Chain) Newest() int64 {
	if n := len(c.Segments); n > 0 {
		return c.Segments[n-1].Last
	}
	return c.Manifest.BaseRevision
}

// NewestTime is the latest time the chain restores the cluster's state at.
func (c *Chain) NewestTime() time.Time {
	if n := len(c.Segments); n > 0 && c.Segments[n-1].CoveredUntil.After(c.Manifest.TakenAt) {
		return c.Segments[n-1].CoveredUntil
	}
	return c.Manifest.TakenAt
}

// Range is what the chain restores.
func (c *Chain) Range() Range {
	return Range{First: c.Manifest.BaseRevision, Last: c.Newest(), FirstTime: c.Manifest.TakenAt, LastTime: c.NewestTime()}
}

// truncated is the chain restorable only through its first n segments.
func (c *Chain) truncated(n int, problem string) *Chain {
	t := *c
	t.Segments = c.Segments[:n]
	t.Problem = problem
	return &t
}

// Range is a span of restorable revisions, and the times the cluster was in them.
type Range struct {
	First, Last         int64
	FirstTime, LastTime time.Time
}

func (r Range) String() string {
	return fmt.Sprintf("revisions %d..%d (%s .. %s)", r.First, r.Last, r.FirstTime.UTC().Format(time.RFC3339), r.LastTime.UTC().Format(time.RFC3339))
}

// Orphan is an object of the continuous backup that belongs to no usable chain: the start of a chain that
// never got its manifest (the capturer stopped while storing the snapshot), or what a partly applied
// retention left.
type Orphan struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Catalog is the state of one cluster's continuous backup in a store, read from the listing, the chain
// manifests and the segment names (not the segments themselves: RestoreTo verifies every byte it uses).
type Catalog struct {
	Prefix     string
	ClusterUID string
	// Chains are the chains of the cluster's current history (Manifest.History: that of the chain taken
	// last), by base revision: what restores and what a capturer continues.
	Chains []*Chain
	// History is the current history ("" for chains that do not record one).
	History string
	// Superseded are the chains of the cluster's earlier histories, before it was restored from a snapshot:
	// their revision numbers name other states than the current history's, so nothing restores them;
	// retention removes them as it does any chain.
	Superseded []*Chain
	// Orphans are objects of chains without a manifest.
	Orphans []Orphan
	// Foreign are chains of another cluster found under the prefix: left alone, never restored or pruned.
	Foreign []string
	// Problems describe what was found amiss, for status and logs.
	Problems []string
}

// ReadCatalog lists prefix in store and reads the chain manifests of the cluster with clusterUID.
func ReadCatalog(ctx context.Context, store backup.Store, prefix, clusterUID string) (*Catalog, error) {
	lp := listPrefix(prefix)
	objects, err := store.List(ctx, lp)
	if err != nil {
		return nil, err
	}
	type dir struct {
		manifest *backup.Object
		snapshot *backup.Object
		segments []SegmentRef
		all      []backup.Object
	}
	dirs := map[string]*dir{}
	var ids []string
	for _, o := range objects {
		rel := strings.TrimPrefix(o.Key, lp)
		id, name, ok := strings.Cut(rel, "/")
		if !ok || !chainIDRE.MatchString(id) || strings.Contains(name, "/") {
			continue // not ours
		}
		d := dirs[id]
		if d == nil {
			d = &dir{}
			dirs[id] = d
			ids = append(ids, id)
		}
		switch name {
		case manifestName:
			d.manifest = &o
		case snapshotName:
			d.snapshot = &o
		default:
			ref, ok := parseSegmentName(name)
			if !ok {
				continue
			}
			ref.Key, ref.Size = o.Key, o.Size
			d.segments = append(d.segments, ref)
		}
		d.all = append(d.all, o)
	}
	sort.Strings(ids)
	cat := &Catalog{Prefix: prefix, ClusterUID: clusterUID}
	for _, id := range ids {
		d := dirs[id]
		if d.manifest == nil {
			for _, o := range d.all {
				cat.Orphans = append(cat.Orphans, Orphan{Key: o.Key, Size: o.Size, LastModified: o.LastModified})
			}
			continue
		}
		data, err := getBytes(ctx, store, d.manifest.Key)
		if err != nil {
			return nil, err
		}
		m, sum, err := decodeManifest(data)
		if err != nil || m.ChainID != id {
			cat.Problems = append(cat.Problems, fmt.Sprintf("chain %s: unreadable manifest %s: %v", id, d.manifest.Key, err))
			for _, o := range d.all {
				cat.Orphans = append(cat.Orphans, Orphan{Key: o.Key, Size: o.Size, LastModified: o.LastModified})
			}
			continue
		}
		if m.ClusterUID != clusterUID {
			cat.Foreign = append(cat.Foreign, id)
			cat.Problems = append(cat.Problems, fmt.Sprintf("chain %s belongs to cluster %s, not %s", id, m.ClusterUID, clusterUID))
			continue
		}
		c := &Chain{ID: id, Manifest: m, ManifestSHA256: sum, ManifestKey: d.manifest.Key}
		for _, o := range d.all {
			c.Keys = append(c.Keys, o.Key)
			c.Bytes += o.Size
			if o.LastModified.After(c.LastModified) {
				c.LastModified = o.LastModified
			}
		}
		if d.snapshot == nil {
			c.Problem = "its snapshot is missing"
			cat.Problems = append(cat.Problems, fmt.Sprintf("chain %s: %s", id, c.Problem))
			cat.Chains = append(cat.Chains, c)
			continue
		}
		c.SnapshotKey = d.snapshot.Key
		c.Segments, c.Problem = usableSegments(m.BaseRevision, d.segments)
		if c.Problem != "" {
			cat.Problems = append(cat.Problems, fmt.Sprintf("chain %s: %s", id, c.Problem))
		}
		cat.Chains = append(cat.Chains, c)
	}
	sort.SliceStable(cat.Chains, func(i, j int) bool {
		return cat.Chains[i].Manifest.BaseRevision < cat.Chains[j].Manifest.BaseRevision
	})
	cat.splitHistories()
	return cat, nil
}

// splitHistories keeps in Chains only the current history's chains, the history of the chain taken last
// (one capturer writes chains in time order), and moves the others to Superseded.
func (cat *Catalog) splitHistories() {
	var last *Chain
	for _, c := range cat.Chains {
		if last == nil || c.Manifest.TakenAt.After(last.Manifest.TakenAt) {
			last = c
		}
	}
	if last == nil {
		return
	}
	cat.History = last.Manifest.History
	current := cat.Chains[:0:0]
	for _, c := range cat.Chains {
		if c.Manifest.History == cat.History {
			current = append(current, c)
		} else {
			cat.Superseded = append(cat.Superseded, c)
		}
	}
	cat.Chains = current
	if n := len(cat.Superseded); n > 0 {
		cat.Problems = append(cat.Problems, fmt.Sprintf("%d chains record an earlier history of the cluster, before it was restored from a snapshot (history %s began with chain %s): not restorable",
			n, cat.History, cat.History))
	}
}

// historyBreak is the gap before the current history's restorable range while chains of an earlier history
// remain: none of the current history's revisions before its first chain is restorable, and the earlier
// history's chains restore none of them (nil when there is no such gap).
func (cat *Catalog) historyBreak(rs []Range) *Gap {
	if len(cat.Superseded) == 0 || len(rs) == 0 || rs[0].First <= 1 {
		return nil
	}
	g := Gap{From: 1, To: rs[0].First - 1, Reason: "the cluster's history restarted (restored from a snapshot)"}
	for _, c := range cat.Chains {
		if c.ID == cat.History && c.Manifest.Gap != nil {
			g.Reason, g.DetectedAt, g.AfterChain = c.Manifest.Gap.Reason, c.Manifest.Gap.DetectedAt, c.Manifest.Gap.AfterChain
		}
	}
	return &g
}

// usableSegments returns the segments that continue the chain from its base without a hole, and why the
// rest (if any) cannot be used.
func usableSegments(base int64, segs []SegmentRef) ([]SegmentRef, string) {
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].Seq < segs[j].Seq })
	next := base + 1
	for i, s := range segs {
		switch {
		case s.Seq != uint64(i) && i > 0 && s.Seq == segs[i-1].Seq:
			return segs[:i-1], fmt.Sprintf("two segments numbered %d (%s and %s): the chain forked", s.Seq, path.Base(segs[i-1].Key), path.Base(s.Key))
		case s.Seq != uint64(i):
			return segs[:i], fmt.Sprintf("segment %d is missing (revisions from %d)", i, next)
		case s.First != next:
			return segs[:i], fmt.Sprintf("segment %d starts at revision %d, not %d", s.Seq, s.First, next)
		}
		next = s.Last + 1
	}
	return segs, ""
}

// usable reports whether a chain can restore anything: its snapshot is there.
func (c *Chain) usable() bool { return c.SnapshotKey != "" }

// Ranges are the restorable revisions, merged across chains, oldest first.
func (cat *Catalog) Ranges() []Range { return mergeRanges(cat.Chains) }

func mergeRanges(chains []*Chain) []Range {
	var rs []Range
	for _, c := range chains {
		if c.usable() {
			rs = append(rs, c.Range())
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].First < rs[j].First })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.First <= out[n-1].Last+1 {
			if r.Last > out[n-1].Last {
				out[n-1].Last = r.Last
			}
			if r.LastTime.After(out[n-1].LastTime) {
				out[n-1].LastTime = r.LastTime
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Gaps are the revisions between restorable ranges that no chain restores, with the reason a chain
// manifest gives for them, and, while an earlier history's chains remain, the current history's revisions
// before its first chain (historyBreak).
func (cat *Catalog) Gaps() []Gap {
	rs := cat.Ranges()
	var gaps []Gap
	if g := cat.historyBreak(rs); g != nil {
		gaps = append(gaps, *g)
	}
	return append(gaps, cat.gapsBetween(rs)...)
}

// gapsBetween are the gaps between the restorable ranges rs, one after each range but the last.
func (cat *Catalog) gapsBetween(rs []Range) []Gap {
	var gaps []Gap
	for i := 1; i < len(rs); i++ {
		g := Gap{From: rs[i-1].Last + 1, To: rs[i].First - 1, Reason: "no chain covers them"}
		for _, c := range cat.Chains {
			if c.Manifest.BaseRevision == rs[i].First && c.Manifest.Gap != nil {
				g.Reason, g.DetectedAt, g.AfterChain = c.Manifest.Gap.Reason, c.Manifest.Gap.DetectedAt, c.Manifest.Gap.AfterChain
			}
		}
		gaps = append(gaps, g)
	}
	return gaps
}

// Newest is the newest chain (by base revision) with a snapshot, or nil.
func (cat *Catalog) Newest() *Chain {
	for i := len(cat.Chains) - 1; i >= 0; i-- {
		if cat.Chains[i].usable() {
			return cat.Chains[i]
		}
	}
	return nil
}

// withDamage is the catalog with chain ch restorable only through its first n segments (n < 0: not at
// all), for the problem found.
func (cat *Catalog) withDamage(ch *Chain, n int, problem string) *Catalog {
	out := *cat
	out.Chains = make([]*Chain, 0, len(cat.Chains))
	for _, c := range cat.Chains {
		switch {
		case c != ch:
			out.Chains = append(out.Chains, c)
		case n >= 0:
			out.Chains = append(out.Chains, c.truncated(n, problem))
		}
	}
	out.Problems = append(slices.Clone(cat.Problems), problem)
	return &out
}

// Latest is the chain that restores the newest revision (of two, the one with the later base), or nil:
// the chain a capturer continues.
func (cat *Catalog) Latest() *Chain {
	var latest *Chain
	for _, c := range cat.Chains {
		if c.usable() && (latest == nil || c.Newest() >= latest.Newest()) {
			latest = c
		}
	}
	return latest
}

// Target is a point to restore to: a revision, a time (the newest revision the cluster was in at that
// time), or, when both are zero, the newest restorable revision (Catalog.Problems say what cut it short,
// if anything did). A revision wins over a time.
type Target struct {
	Revision int64
	Time     time.Time
}

func (t Target) String() string {
	switch {
	case t.Revision > 0:
		return fmt.Sprintf("revision %d", t.Revision)
	case !t.Time.IsZero():
		return "time " + t.Time.UTC().Format(time.RFC3339Nano)
	}
	return "the newest revision"
}

// ErrNotRestorable: the target lies outside every restorable range (before the oldest, after the newest,
// or in a gap).
var ErrNotRestorable = errors.New("target is not restorable")

// NotRestorableError says why a target cannot be restored and what can.
type NotRestorableError struct {
	Target Target
	// Ranges are the restorable ranges; Gap the gap the target falls in, if it does.
	Ranges []Range
	Gap    *Gap
	// Problems are the damages that cut coverage short.
	Problems []string
}

func (e *NotRestorableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s cannot be restored", e.Target)
	if e.Gap != nil {
		fmt.Fprintf(&b, ": it falls in a gap (%s: %s)", e.Gap, e.Gap.Reason)
	}
	b.WriteString("; ")
	b.WriteString(describeRanges(e.Ranges))
	if len(e.Problems) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(e.Problems, "; "))
	}
	return b.String()
}

func (e *NotRestorableError) Is(target error) bool { return target == ErrNotRestorable }

func describeRanges(rs []Range) string {
	if len(rs) == 0 {
		return "nothing is restorable"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return "restorable: " + strings.Join(parts, ", ")
}

// ErrIntegrity: an object a restore needs failed verification (damaged, missing, out of order, or of
// another cluster or chain).
var ErrIntegrity = errors.New("continuous backup failed verification")

// IntegrityError names the object that failed verification and what remains restorable without it.
type IntegrityError struct {
	Key    string
	Reason string
	Ranges []Range
	// usable is how many of the chain's segments remain usable (-1: none, the snapshot failed).
	usable int
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("%s: %s; %s", e.Key, e.Reason, describeRanges(e.Ranges))
}

func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

// resolve picks the chain that restores the target with the least replay. For a time target the exact
// revision is found later, in the segments.
func (cat *Catalog) resolve(t Target) (*Chain, int64, error) {
	var best *Chain
	for _, c := range cat.Chains {
		if !c.usable() {
			continue
		}
		r := c.Range()
		switch {
		case t.Revision > 0:
			if t.Revision < r.First || t.Revision > r.Last {
				continue
			}
		case !t.Time.IsZero():
			if t.Time.Before(r.FirstTime) || t.Time.After(r.LastTime) {
				continue
			}
		default:
			if best != nil && r.Last < best.Newest() {
				continue
			}
		}
		// Chains are in base revision order: the last candidate replays the least.
		best = c
	}
	if best == nil {
		return nil, 0, cat.notRestorable(t)
	}
	switch {
	case t.Revision > 0:
		return best, t.Revision, nil
	case !t.Time.IsZero():
		return best, 0, nil
	}
	return best, best.Newest(), nil
}

func (cat *Catalog) notRestorable(t Target) error {
	e := &NotRestorableError{Target: t, Ranges: cat.Ranges(), Problems: cat.Problems}
	for _, g := range cat.Gaps() {
		if t.Revision >= g.From && t.Revision <= g.To {
			e.Gap = &g
		}
	}
	if e.Gap == nil && !t.Time.IsZero() {
		rs := e.Ranges
		for i := 1; i < len(rs); i++ {
			if t.Time.After(rs[i-1].LastTime) && t.Time.Before(rs[i].FirstTime) {
				g := cat.gapsBetween(rs)[i-1]
				e.Gap = &g
			}
		}
	}
	return e
}

// getBytes reads a small object (a manifest, a segment) into memory.
func getBytes(ctx context.Context, store backup.Store, key string) ([]byte, error) {
	f, err := os.CreateTemp("", "continuous-get-*")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	_ = f.Close()
	defer func() { _ = os.Remove(name) }()
	if err := store.Get(ctx, key, name); err != nil {
		return nil, err
	}
	return os.ReadFile(name)
}
