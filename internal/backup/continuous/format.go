package continuous

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// FormatVersion is the version of the segment and manifest encodings this package writes and reads.
const FormatVersion = 1

// segmentMagic opens every segment file; its last byte is the format version.
var segmentMagic = []byte{'E', 'T', 'C', 'D', 'C', 'H', 'G', FormatVersion}

// Record kinds in a segment body.
const (
	recordRevision = 1
	recordLease    = 2
)

// Change types inside a revision record.
const (
	changePut    = 0
	changeDelete = 1
)

// maxHeaderBytes bounds the JSON header so a damaged length prefix cannot ask for gigabytes.
const maxHeaderBytes = 1 << 20

// SegmentHeader describes a segment; it is stored as JSON at the start of the file, so `head -c 2000`
// shows what a segment holds.
type SegmentHeader struct {
	// ClusterUID names the captured cluster (given by the caller; a Kubernetes object's UID).
	ClusterUID string `json:"clusterUID"`
	// ChainID is the chain the segment extends.
	ChainID string `json:"chainID"`
	// Seq numbers the chain's segments from 0 without holes.
	Seq uint64 `json:"seq"`
	// FirstRevision and LastRevision bound the revisions the segment holds, every one of them, in order.
	// A checkpoint segment holds none: FirstRevision is LastRevision+1.
	FirstRevision int64 `json:"firstRevision"`
	LastRevision  int64 `json:"lastRevision"`
	// FirstTime and LastTime are when the capturer received the first and last revision.
	FirstTime time.Time `json:"firstTime,omitzero"`
	LastTime  time.Time `json:"lastTime,omitzero"`
	// CoveredUntil is the latest time at which LastRevision is known to have been the cluster's newest
	// revision: LastTime, or later when etcd confirmed that nothing newer existed.
	CoveredUntil time.Time `json:"coveredUntil"`
	Revisions    int       `json:"revisions"`
	Events       int       `json:"events"`
	Leases       int       `json:"leases"`
	// PrevSHA256 is the SHA-256 of the previous segment file (of the chain manifest for segment 0): the
	// chain cannot be reordered, cut or mixed with another chain's segments unnoticed.
	PrevSHA256 string `json:"prevSHA256"`
	// BodySHA256 and BodyBytes describe the records that follow the header.
	BodySHA256 string `json:"bodySHA256"`
	BodyBytes  int64  `json:"bodyBytes"`
}

// Empty reports whether the segment is a checkpoint that holds no revision.
func (h SegmentHeader) Empty() bool { return h.FirstRevision > h.LastRevision }

// Change is one event of a revision: a put of KV (every field as etcd stored it), or a delete of KV.Key.
type Change struct {
	Delete bool
	// KV is the key-value as the watch reported it; a delete carries only Key and ModRevision.
	KV *mvccpb.KeyValue
}

// Revision is every change etcd applied in one revision (one transaction), in etcd's order.
type Revision struct {
	Revision int64
	// Time is when the capturer received the revision, normally milliseconds after etcd committed it.
	Time    time.Time
	Changes []Change
}

// Lease is a lease the capturer saw attached to a key, with the TTL it was granted.
type Lease struct {
	ID int64
	// TTL is the granted time-to-live in seconds; 0 when the lease was gone before the capturer asked.
	TTL int64
}

// Segment is a decoded segment file.
type Segment struct {
	Header    SegmentHeader
	Revisions []Revision
	Leases    []Lease
}

// segmentBody accumulates records; the capturer appends revisions as they arrive.
type segmentBody struct {
	buf       bytes.Buffer
	first     int64
	last      int64
	firstTime time.Time
	lastTime  time.Time
	revisions int
	events    int
	leases    int
	scratch   []byte
}

func (b *segmentBody) reset(next int64) {
	b.buf.Reset()
	b.first, b.last = next, next-1
	b.firstTime, b.lastTime = time.Time{}, time.Time{}
	b.revisions, b.events, b.leases = 0, 0, 0
}

func (b *segmentBody) writeRecord(kind byte, payload []byte) {
	b.buf.WriteByte(kind)
	b.buf.Write(binary.AppendUvarint(nil, uint64(len(payload))))
	b.buf.Write(payload)
}

// addRevision appends one revision; it must be the revision after the last one added.
func (b *segmentBody) addRevision(r Revision) error {
	if r.Revision != b.last+1 {
		return fmt.Errorf("revision %d does not follow %d", r.Revision, b.last)
	}
	if len(r.Changes) == 0 {
		return fmt.Errorf("revision %d has no change", r.Revision)
	}
	p := b.scratch[:0]
	p = binary.AppendUvarint(p, uint64(r.Revision))
	p = binary.AppendVarint(p, r.Time.UnixNano())
	p = binary.AppendUvarint(p, uint64(len(r.Changes)))
	for _, c := range r.Changes {
		if c.KV == nil || len(c.KV.Key) == 0 {
			return fmt.Errorf("revision %d has a change without a key", r.Revision)
		}
		if c.KV.ModRevision != r.Revision {
			return fmt.Errorf("revision %d holds a change of key %q at revision %d", r.Revision, c.KV.Key, c.KV.ModRevision)
		}
		if c.Delete {
			p = append(p, changeDelete)
			p = binary.AppendUvarint(p, uint64(len(c.KV.Key)))
			p = append(p, c.KV.Key...)
			continue
		}
		kv, err := proto.Marshal(c.KV)
		if err != nil {
			return err
		}
		p = append(p, changePut)
		p = binary.AppendUvarint(p, uint64(len(kv)))
		p = append(p, kv...)
	}
	b.scratch = p
	b.writeRecord(recordRevision, p)
	if b.revisions == 0 {
		b.firstTime = r.Time
	}
	b.last, b.lastTime = r.Revision, r.Time
	b.revisions++
	b.events += len(r.Changes)
	return nil
}

func (b *segmentBody) addLease(l Lease) {
	p := binary.AppendVarint(nil, l.ID)
	p = binary.AppendVarint(p, l.TTL)
	b.writeRecord(recordLease, p)
	b.leases++
}

// seal completes h from the body and returns the segment file and its SHA-256.
func (b *segmentBody) seal(h SegmentHeader) ([]byte, [sha256.Size]byte, SegmentHeader, error) {
	body := b.buf.Bytes()
	sum := sha256.Sum256(body)
	h.FirstRevision, h.LastRevision = b.first, b.last
	h.FirstTime, h.LastTime = b.firstTime.UTC(), b.lastTime.UTC()
	if h.CoveredUntil.Before(b.lastTime) {
		h.CoveredUntil = b.lastTime
	}
	h.CoveredUntil = h.CoveredUntil.UTC()
	h.Revisions, h.Events, h.Leases = b.revisions, b.events, b.leases
	h.BodySHA256, h.BodyBytes = hex.EncodeToString(sum[:]), int64(len(body))
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, [sha256.Size]byte{}, h, err
	}
	out := make([]byte, 0, len(segmentMagic)+binary.MaxVarintLen64+len(hdr)+len(body)+sha256.Size)
	out = append(out, segmentMagic...)
	out = binary.AppendUvarint(out, uint64(len(hdr)))
	out = append(out, hdr...)
	out = append(out, body...)
	fileSum := sha256.Sum256(out)
	out = append(out, fileSum[:]...)
	return out, fileSum, h, nil
}

// EncodeSegment encodes a whole segment: the header's revision bounds, counts and checksums are computed
// from revs and leases (FirstRevision must be set: it is where the segment starts). It returns the file
// and its SHA-256, the value the next segment's PrevSHA256 holds.
func EncodeSegment(h SegmentHeader, revs []Revision, leases []Lease) ([]byte, [sha256.Size]byte, error) {
	var b segmentBody
	b.reset(h.FirstRevision)
	for _, l := range leases {
		b.addLease(l)
	}
	for _, r := range revs {
		if err := b.addRevision(r); err != nil {
			return nil, [sha256.Size]byte{}, err
		}
	}
	data, sum, _, err := b.seal(h)
	return data, sum, err
}

// ErrMalformed marks a segment file that cannot be decoded or fails its own checksums.
var ErrMalformed = errors.New("malformed segment")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// DecodeSegment checks a segment file's checksums and structure and decodes it. It checks everything the
// file says about itself (the file and body digests, the counts, that the revisions are exactly
// FirstRevision..LastRevision in order and each change belongs to its revision); how the segment fits its
// chain is the caller's to check. It never panics, whatever data holds.
func DecodeSegment(data []byte) (*Segment, [sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(data) < len(segmentMagic)+1+sha256.Size {
		return nil, sum, malformed("%d bytes is too short", len(data))
	}
	if !bytes.Equal(data[:len(segmentMagic)-1], segmentMagic[:len(segmentMagic)-1]) {
		return nil, sum, malformed("not a segment file")
	}
	if v := data[len(segmentMagic)-1]; v != FormatVersion {
		return nil, sum, malformed("format version %d, this build reads %d", v, FormatVersion)
	}
	content, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	sum = sha256.Sum256(content)
	if !bytes.Equal(sum[:], trailer) {
		return nil, sum, malformed("file SHA-256 is %x, its trailer says %x", sum, trailer)
	}
	rest := content[len(segmentMagic):]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > maxHeaderBytes || n > uint64(len(rest)-k) {
		return nil, sum, malformed("bad header length")
	}
	var h SegmentHeader
	if err := json.Unmarshal(rest[k:k+int(n)], &h); err != nil {
		return nil, sum, malformed("header: %v", err)
	}
	body := rest[k+int(n):]
	bodySum := sha256.Sum256(body)
	if int64(len(body)) != h.BodyBytes || hex.EncodeToString(bodySum[:]) != h.BodySHA256 {
		return nil, sum, malformed("body of %d bytes with SHA-256 %x, the header says %d bytes with %s", len(body), bodySum, h.BodyBytes, h.BodySHA256)
	}
	seg := &Segment{Header: h}
	next := h.FirstRevision
	events := 0
	for len(body) > 0 {
		kind := body[0]
		plen, k := binary.Uvarint(body[1:])
		if k <= 0 || plen > uint64(len(body)-1-k) {
			return nil, sum, malformed("bad record length")
		}
		p := body[1+k : 1+k+int(plen)]
		body = body[1+k+int(plen):]
		switch kind {
		case recordRevision:
			r, err := decodeRevision(p)
			if err != nil {
				return nil, sum, err
			}
			if r.Revision != next {
				return nil, sum, malformed("revision %d where %d is next", r.Revision, next)
			}
			next++
			events += len(r.Changes)
			seg.Revisions = append(seg.Revisions, r)
		case recordLease:
			id, k1 := binary.Varint(p)
			ttl, k2 := binary.Varint(p[max(k1, 0):])
			if k1 <= 0 || k2 <= 0 || k1+k2 != len(p) {
				return nil, sum, malformed("bad lease record")
			}
			seg.Leases = append(seg.Leases, Lease{ID: id, TTL: ttl})
		default:
			return nil, sum, malformed("unknown record kind %d", kind)
		}
	}
	if next != h.LastRevision+1 || len(seg.Revisions) != h.Revisions || events != h.Events || len(seg.Leases) != h.Leases {
		return nil, sum, malformed("header says revisions %d..%d (%d, %d events, %d leases), the body holds %d revisions up to %d, %d events, %d leases",
			h.FirstRevision, h.LastRevision, h.Revisions, h.Events, h.Leases, len(seg.Revisions), next-1, events, len(seg.Leases))
	}
	return seg, sum, nil
}

func decodeRevision(p []byte) (Revision, error) {
	rev, k := binary.Uvarint(p)
	if k <= 0 || rev == 0 || rev > 1<<62 {
		return Revision{}, malformed("bad revision number")
	}
	p = p[k:]
	ns, k := binary.Varint(p)
	if k <= 0 {
		return Revision{}, malformed("revision %d: bad time", rev)
	}
	p = p[k:]
	count, k := binary.Uvarint(p)
	// Every change takes at least 3 bytes, which bounds count by what the record can hold.
	if k <= 0 || count == 0 || count > uint64(len(p)) {
		return Revision{}, malformed("revision %d: bad change count", rev)
	}
	p = p[k:]
	r := Revision{Revision: int64(rev), Time: time.Unix(0, ns).UTC(), Changes: make([]Change, 0, count)}
	for i := uint64(0); i < count; i++ {
		if len(p) < 2 {
			return Revision{}, malformed("revision %d: truncated change", rev)
		}
		typ := p[0]
		n, k := binary.Uvarint(p[1:])
		if k <= 0 || n == 0 || n > uint64(len(p)-1-k) {
			return Revision{}, malformed("revision %d: bad change length", rev)
		}
		b := p[1+k : 1+k+int(n)]
		p = p[1+k+int(n):]
		switch typ {
		case changeDelete:
			r.Changes = append(r.Changes, Change{Delete: true, KV: &mvccpb.KeyValue{Key: bytes.Clone(b), ModRevision: int64(rev)}})
		case changePut:
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(b, kv); err != nil {
				return Revision{}, malformed("revision %d: %v", rev, err)
			}
			if kv.ModRevision != int64(rev) || len(kv.Key) == 0 {
				return Revision{}, malformed("revision %d holds a put of key %q at revision %d", rev, kv.Key, kv.ModRevision)
			}
			r.Changes = append(r.Changes, Change{KV: kv})
		default:
			return Revision{}, malformed("revision %d: unknown change type %d", rev, typ)
		}
	}
	if len(p) != 0 {
		return Revision{}, malformed("revision %d: %d trailing bytes", rev, len(p))
	}
	return r, nil
}

// Manifest opens a chain: the full snapshot the chain's segments extend, and why the chain began. It is
// written once the snapshot is stored and verified, so a chain without a manifest is an unfinished start
// that nothing uses.
type Manifest struct {
	Format     int    `json:"format"`
	ClusterUID string `json:"clusterUID"`
	ChainID    string `json:"chainID"`
	// BaseRevision is the snapshot's revision: the oldest revision the chain restores.
	BaseRevision int64 `json:"baseRevision"`
	// CompactRevision is the snapshot's compaction revision, which a restored cluster keeps (see the
	// package documentation on HashKV).
	CompactRevision int64 `json:"compactRevision"`
	// SnapshotSHA256 is the digest etcd appended to the snapshot (checked by backup.Verify).
	SnapshotSHA256 string `json:"snapshotSHA256"`
	SnapshotBytes  int64  `json:"snapshotBytes"`
	// TakenAt is when the snapshot was requested: BaseRevision was the cluster's state then.
	TakenAt     time.Time `json:"takenAt"`
	EtcdVersion string    `json:"etcdVersion,omitempty"`
	// Reason says why the chain began: start, rotation or lost-history.
	Reason string `json:"reason"`
	// PreviousChain is the chain this one follows ("" for the first).
	PreviousChain string `json:"previousChain,omitempty"`
	// Gap lists the revisions between the previous chain and this one that no chain restores.
	Gap *Gap `json:"gap,omitempty"`
	// EtcdClusterID is the ID (hex) of the etcd cluster the chain records: a cluster restored from a
	// snapshot has another ("" in chains written before it was recorded).
	EtcdClusterID string `json:"etcdClusterID,omitempty"`
	// History is the chain that began the history this chain records: the first chain, or the first after
	// the cluster's history restarted (ReasonHistoryRestarted). The chains of one history continue each
	// other's revisions; another history's revision numbers name other states. "" in chains written
	// before it was recorded: one history.
	History string `json:"history,omitempty"`
}

// Reasons a chain begins.
const (
	ReasonStart       = "start"
	ReasonRotation    = "rotation"
	ReasonLostHistory = "lost-history"
	// ReasonHistoryRestarted: the etcd the capturer watches is not the history of the chain it was
	// writing (another etcd cluster ID, or a revision below the chain's newest): the cluster was restored
	// from a snapshot. The new chain begins a new history.
	ReasonHistoryRestarted = "history-restarted"
)

// Gap is a run of revisions that no chain can restore: their changes were compacted away before the
// capturer read them.
type Gap struct {
	// From and To bound the lost revisions (both included).
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// AfterChain is the chain that ends before the gap.
	AfterChain string `json:"afterChain,omitempty"`
	// DetectedAt is when the capturer found the history gone.
	DetectedAt time.Time `json:"detectedAt,omitzero"`
	Reason     string    `json:"reason,omitempty"`
}

func (g Gap) String() string {
	if g.From == g.To {
		return fmt.Sprintf("revision %d", g.From)
	}
	return fmt.Sprintf("revisions %d..%d", g.From, g.To)
}

func encodeManifest(m Manifest) ([]byte, [sha256.Size]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	data = append(data, '\n')
	return data, sha256.Sum256(data), nil
}

func decodeManifest(data []byte) (Manifest, [sha256.Size]byte, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return m, [sha256.Size]byte{}, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != FormatVersion {
		return m, [sha256.Size]byte{}, fmt.Errorf("manifest format %d, this build reads %d", m.Format, FormatVersion)
	}
	return m, sha256.Sum256(data), nil
}
