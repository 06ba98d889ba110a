package continuous

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/seedops/etcd-operator/internal/backup"
)

// snapshotRevisions returns the revision etcd resumes at from a verified snapshot, and its compact
// revision. backup.Verify reports the newest revision in the key bucket, which is not etcd's revision when
// the bucket is empty (a new cluster is at revision 1) or when compaction removed the newest revision's
// tombstone (etcd before 3.5.16); etcd itself takes the greatest of those and the compaction revisions
// its meta bucket records, and so does this.
func snapshotRevisions(path string, info backup.Info) (rev, compacted int64, err error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = db.Close() }()
	var scheduled int64
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return nil
		}
		compacted = revisionBytes(meta.Get([]byte("finishedCompactRev")))
		scheduled = revisionBytes(meta.Get([]byte("scheduledCompactRev")))
		return nil
	})
	return max(info.Revision, compacted, scheduled, 1), compacted, err
}

// revisionBytes reads the main revision of etcd's revision encoding (8 bytes big-endian, then '_' and the
// sub-revision).
func revisionBytes(b []byte) int64 {
	if len(b) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b[:8]))
}
