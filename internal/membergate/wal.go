package membergate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// WALDir is where etcd keeps the write-ahead log of a data directory (unless ETCD_WAL_DIR moves it).
func WALDir(dataDir string) string { return filepath.Join(dataDir, "member", "wal") }

// WALMetadata is the identity a WAL was written under: the member ID and the cluster ID etcd recorded
// when it created the log.
type WALMetadata struct {
	MemberID  uint64
	ClusterID uint64
}

// BootstrapMemberID is the ID etcd gives a member it bootstraps (or restores from a snapshot) under the
// given peer URLs and initial cluster token: a member's data tells by its ID which bootstrap made it.
func BootstrapMemberID(name string, peerURLs []string, token string) (uint64, error) {
	urls, err := types.NewURLs(peerURLs)
	if err != nil {
		return 0, err
	}
	return uint64(membership.NewMember(name, urls, token, nil).ID), nil
}

// IsInitialCluster reports whether a cluster with this ID and these members (member ID to peer URLs) is
// exactly the cluster a static bootstrap under token derives from those URLs: no member was added or
// removed since. A member of it that never started can then still start as one of the bootstrap's
// members (initial cluster state "new"), under the same member and cluster IDs; etcd itself refuses that
// to a member that started before ("member has already been bootstrapped").
func IsInitialCluster(clusterID uint64, members map[uint64][]string, token string) bool {
	urls := types.URLsMap{}
	for id, peers := range members {
		u, err := types.NewURLs(peers)
		if err != nil {
			return false
		}
		urls[strconv.FormatUint(id, 16)] = u // names do not enter member IDs
	}
	cl, err := membership.NewClusterFromURLsMap(zap.NewNop(), token, urls)
	if err != nil || uint64(cl.ID()) != clusterID {
		return false
	}
	for _, id := range cl.MemberIDs() {
		if _, ok := members[uint64(id)]; !ok {
			return false
		}
	}
	return len(members) > 0
}

// walSegments lists the WAL's segment files, newest first. Names are <seq>-<index>.wal in fixed-width
// hex, so their lexical order is their order in the log. Files that are still being prepared (.tmp) do
// not count: etcd itself ignores them.
func walSegments(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".wal") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	slices.Reverse(names)
	return names, nil
}

// ReadWALMetadata returns the identity recorded in the WAL in dir; ok is false when dir holds no WAL,
// which is how etcd itself tells an empty member from one with data.
//
// The log is not replayed: etcd purges old segments, so index 0 may be gone, but it writes the metadata
// record at the head of every segment it cuts. The newest segment is read first (it is the one etcd
// would continue); an unreadable one falls back to the others.
func ReadWALMetadata(dir string) (md WALMetadata, ok bool, err error) {
	names, err := walSegments(dir)
	if err != nil || len(names) == 0 {
		return WALMetadata{}, false, err
	}
	var errs []error
	for _, name := range names {
		md, err := readSegmentMetadata(filepath.Join(dir, name))
		if err == nil {
			return md, true, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return WALMetadata{}, true, errors.Join(errs...)
}

// readSegmentMetadata decodes the head of one segment: a CRC record (the running checksum carried over
// from the previous segment) followed by the metadata record, whose checksum continues from it.
func readSegmentMetadata(path string) (WALMetadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return WALMetadata{}, err
	}
	defer func() { _ = f.Close() }()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	var rec walpb.Record
	for range 2 {
		if err := dec.Decode(&rec); err != nil {
			return WALMetadata{}, err
		}
		switch rec.GetType() {
		case wal.CrcType:
			dec.UpdateCRC(rec.GetCrc())
		case wal.MetadataType:
			var m etcdserverpb.Metadata
			if err := proto.Unmarshal(rec.Data, &m); err != nil {
				return WALMetadata{}, fmt.Errorf("metadata record: %w", err)
			}
			if m.GetNodeID() == 0 {
				return WALMetadata{}, errors.New("metadata record has no member ID")
			}
			return WALMetadata{MemberID: m.GetNodeID(), ClusterID: m.GetClusterID()}, nil
		default:
			return WALMetadata{}, fmt.Errorf("record of type %d before the metadata", rec.GetType())
		}
	}
	return WALMetadata{}, errors.New("no metadata record at the head of the segment")
}
