package continuous

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func put(rev int64, key, value string, create, version, lease int64) Change {
	return Change{KV: &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: rev, Version: version, Lease: lease}}
}

func del(rev int64, key string) Change {
	return Change{Delete: true, KV: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

func testHeader(first int64) SegmentHeader {
	return SegmentHeader{ClusterUID: "uid-1", ChainID: newChainID(first-1, "0123abcd"), Seq: 3, FirstRevision: first,
		PrevSHA256: strings.Repeat("ab", 32), CoveredUntil: t0.Add(time.Hour)}
}

func sameSegment(t *testing.T, got *Segment, h SegmentHeader, revs []Revision, leases []Lease) {
	t.Helper()
	if got.Header.ClusterUID != h.ClusterUID || got.Header.ChainID != h.ChainID || got.Header.Seq != h.Seq || got.Header.PrevSHA256 != h.PrevSHA256 {
		t.Fatalf("header %+v, encoded from %+v", got.Header, h)
	}
	if len(got.Revisions) != len(revs) || len(got.Leases) != len(leases) {
		t.Fatalf("decoded %d revisions and %d leases, encoded %d and %d", len(got.Revisions), len(got.Leases), len(revs), len(leases))
	}
	for i, l := range leases {
		if got.Leases[i] != l {
			t.Fatalf("lease %d: %+v, encoded %+v", i, got.Leases[i], l)
		}
	}
	for i, r := range revs {
		g := got.Revisions[i]
		if g.Revision != r.Revision || !g.Time.Equal(r.Time) || len(g.Changes) != len(r.Changes) {
			t.Fatalf("revision %d: %d at %s with %d changes, encoded %d at %s with %d", i, g.Revision, g.Time, len(g.Changes), r.Revision, r.Time, len(r.Changes))
		}
		for j, c := range r.Changes {
			want := c.KV
			if c.Delete {
				want = &mvccpb.KeyValue{Key: c.KV.Key, ModRevision: c.KV.ModRevision}
			}
			if g.Changes[j].Delete != c.Delete || !proto.Equal(g.Changes[j].KV, want) {
				t.Fatalf("revision %d change %d: %v %v, encoded %v %v", r.Revision, j, g.Changes[j].Delete, g.Changes[j].KV, c.Delete, want)
			}
		}
	}
	if n := len(revs); n > 0 {
		if got.Header.FirstRevision != revs[0].Revision || got.Header.LastRevision != revs[n-1].Revision {
			t.Fatalf("header bounds %d..%d, revisions %d..%d", got.Header.FirstRevision, got.Header.LastRevision, revs[0].Revision, revs[n-1].Revision)
		}
	} else if !got.Header.Empty() {
		t.Fatalf("a segment without revisions is not empty: %+v", got.Header)
	}
}

func TestSegmentRoundTrip(t *testing.T) {
	big := strings.Repeat("v", 1<<20)
	cases := []struct {
		name   string
		first  int64
		revs   []Revision
		leases []Lease
	}{
		{name: "checkpoint without revisions", first: 101},
		{name: "one put", first: 5, revs: []Revision{{Revision: 5, Time: t0, Changes: []Change{put(5, "/a", "1", 5, 1, 0)}}}},
		{name: "a transaction: puts and deletes in one revision, a lease", first: 10,
			leases: []Lease{{ID: 0x694d9c5b2e1f0a01, TTL: 30}, {ID: -7, TTL: 0}},
			revs: []Revision{
				{Revision: 10, Time: t0, Changes: []Change{put(10, "/a", "x", 3, 4, 0x694d9c5b2e1f0a01), del(10, "/b"), put(10, "/c", "", 10, 1, 0)}},
				{Revision: 11, Time: t0.Add(time.Millisecond), Changes: []Change{del(11, "/a"), del(11, "/c")}},
				{Revision: 12, Time: t0.Add(-time.Second), Changes: []Change{put(12, "/a", "y", 12, 1, 0)}},
			}},
		{name: "binary keys and values, a large value", first: 1 << 40,
			revs: []Revision{
				{Revision: 1 << 40, Time: time.Unix(0, 0).UTC(), Changes: []Change{put(1<<40, "\x00\xff/k\n", "\x00\x01\x02", 1, 1, 0)}},
				{Revision: 1<<40 + 1, Time: t0, Changes: []Change{put(1<<40+1, "big", big, 1<<40+1, 1, 0)}},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := testHeader(tc.first)
			data, sum, err := EncodeSegment(h, tc.revs, tc.leases)
			if err != nil {
				t.Fatal(err)
			}
			got, gotSum, err := DecodeSegment(data)
			if err != nil {
				t.Fatal(err)
			}
			if gotSum != sum {
				t.Fatalf("decoded checksum %x, encoded %x", gotSum, sum)
			}
			sameSegment(t, got, h, tc.revs, tc.leases)
			// The encoding is canonical: the decoded segment encodes to the same bytes.
			again, _, err := EncodeSegment(got.Header, got.Revisions, got.Leases)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("re-encoding differs (err %v)", err)
			}
		})
	}
}

// Every single damaged byte of a segment is detected.
func TestSegmentDetectsEveryFlippedByte(t *testing.T) {
	h := testHeader(7)
	data, _, err := EncodeSegment(h, []Revision{{Revision: 7, Time: t0, Changes: []Change{put(7, "/k", "v", 7, 1, 0), del(7, "/d")}}}, []Lease{{ID: 1, TTL: 5}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		if _, _, err := DecodeSegment(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("flipping byte %d of %d: err %v", i, len(data), err)
		}
	}
	for n := range len(data) {
		if _, _, err := DecodeSegment(data[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated to %d bytes: err %v", n, err)
		}
	}
}

func TestEncodeRefusesWhatEtcdCannotHaveWritten(t *testing.T) {
	cases := map[string][]Revision{
		"a revision skipped":           {{Revision: 7, Time: t0, Changes: []Change{put(7, "/k", "v", 7, 1, 0)}}, {Revision: 9, Time: t0, Changes: []Change{put(9, "/k", "v", 7, 2, 0)}}},
		"a revision without a change":  {{Revision: 7, Time: t0}},
		"a change of another revision": {{Revision: 7, Time: t0, Changes: []Change{put(8, "/k", "v", 7, 1, 0)}}},
		"a change without a key":       {{Revision: 7, Time: t0, Changes: []Change{put(7, "", "v", 7, 1, 0)}}},
	}
	for name, revs := range cases {
		if _, _, err := EncodeSegment(testHeader(7), revs, nil); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestSegmentNamesSortInChainOrder(t *testing.T) {
	hs := []SegmentHeader{
		{FirstRevision: 9, LastRevision: 120, Seq: 0, CoveredUntil: t0},
		{FirstRevision: 121, LastRevision: 120, Seq: 1, CoveredUntil: t0.Add(time.Minute)}, // checkpoint
		{FirstRevision: 121, LastRevision: 120, Seq: 2, CoveredUntil: t0.Add(2 * time.Minute)},
		{FirstRevision: 121, LastRevision: 5000, Seq: 3, CoveredUntil: t0.Add(3 * time.Minute)},
		{FirstRevision: 5001, LastRevision: 1 << 50, Seq: 4, CoveredUntil: t0.Add(4 * time.Minute)},
	}
	for i, h := range hs {
		name := segmentName(h)
		ref, ok := parseSegmentName(name)
		if !ok || ref.First != h.FirstRevision || ref.Last != h.LastRevision || ref.Seq != h.Seq || !ref.CoveredUntil.Equal(h.CoveredUntil.Truncate(time.Millisecond)) {
			t.Fatalf("%s parses as %+v, %v", name, ref, ok)
		}
		if i > 0 && segmentName(hs[i-1]) >= name {
			t.Fatalf("%s sorts before %s", name, segmentName(hs[i-1]))
		}
	}
	for _, bad := range []string{"seg-1-2-3-4.seg", "seg-00000000000000000010-00000000000000000005-0000000000-0000000000000.seg", "manifest.json"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Errorf("%s parses", bad)
		}
	}
}

// FuzzSegmentRoundTrip: any revisions etcd can produce (contiguous, each with changes of its own revision)
// decode exactly as encoded.
func FuzzSegmentRoundTrip(f *testing.F) {
	f.Add(int64(1), []byte("/a"), []byte("v"), int64(0), uint8(3), uint8(1), int64(1700000000123456789))
	f.Add(int64(1<<40), []byte{0, 0xff}, []byte{}, int64(-1), uint8(1), uint8(5), int64(0))
	f.Add(int64(77), []byte("k"), bytes.Repeat([]byte{7}, 4096), int64(0x694d9c5b2e1f0a01), uint8(2), uint8(0), int64(-5))
	f.Fuzz(func(t *testing.T, first int64, key, value []byte, lease int64, nrev, deletes uint8, ns int64) {
		if first <= 0 || first > 1<<60 || len(key) == 0 || nrev > 20 {
			return
		}
		var revs []Revision
		var leases []Lease
		if lease != 0 {
			leases = append(leases, Lease{ID: lease, TTL: int64(nrev)})
		}
		for i := int64(0); i < int64(nrev); i++ {
			rev := first + i
			var cs []Change
			for j := int64(0); j <= i%3; j++ {
				k := append(bytes.Clone(key), byte(j))
				if deletes&(1<<(j%8)) != 0 {
					cs = append(cs, Change{Delete: true, KV: &mvccpb.KeyValue{Key: k, ModRevision: rev}})
				} else {
					cs = append(cs, Change{KV: &mvccpb.KeyValue{Key: k, Value: value, CreateRevision: first, ModRevision: rev, Version: i + 1, Lease: lease}})
				}
			}
			revs = append(revs, Revision{Revision: rev, Time: time.Unix(0, ns+i).UTC(), Changes: cs})
		}
		h := testHeader(first)
		data, sum, err := EncodeSegment(h, revs, leases)
		if err != nil {
			t.Fatal(err)
		}
		got, gotSum, err := DecodeSegment(data)
		if err != nil {
			t.Fatal(err)
		}
		if sum != gotSum {
			t.Fatal("checksums differ")
		}
		sameSegment(t, got, h, revs, leases)
	})
}

// FuzzDecodeSegment: DecodeSegment never panics, and what it accepts encodes back to the same bytes.
func FuzzDecodeSegment(f *testing.F) {
	data, _, _ := EncodeSegment(testHeader(3), []Revision{{Revision: 3, Time: t0, Changes: []Change{put(3, "/k", "v", 3, 1, 9), del(3, "/x")}}}, []Lease{{ID: 9, TTL: 10}})
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte("ETCDCHG\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		seg, _, err := DecodeSegment(data)
		if err != nil {
			return
		}
		again, _, err := EncodeSegment(seg.Header, seg.Revisions, seg.Leases)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("accepted %s, re-encodes differently (err %v)", hex.EncodeToString(data), err)
		}
	})
}
