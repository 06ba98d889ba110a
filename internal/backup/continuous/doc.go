// Package continuous backs an etcd cluster up continuously and restores it to any revision in the covered
// range: a Capturer records every change after a full snapshot, and RestoreTo rebuilds the state at a
// chosen revision or time, verified to be the one the source had.
//
// # Chains and segments
//
// A chain is a full snapshot (revision B, taken with the cluster's own snapshot API and checked by
// backup.Verify) and the segments that follow it: every revision after B, in order, each with all of its
// changes. The capturer watches the whole key space from B+1 and groups events by revision (one etcd
// revision is one transaction, possibly of several changes; etcd never splits a revision across watch
// responses). Segments are stored every FlushInterval, or sooner when they reach MaxSegmentBytes. A new
// chain begins every ChainInterval: the old chain keeps recording until the new snapshot's revision, so
// consecutive chains overlap and a restore replays at most one interval of changes.
//
// Objects, under the caller's prefix (one prefix per cluster):
//
//	<chain>/snapshot.db      the full snapshot, etcd's format (sha256 trailer)
//	<chain>/manifest.json    base revision, its compact revision, snapshot digest, cluster UID, why the
//	                         chain began, the gap before it; written last: it makes the chain exist
//	<chain>/seg-<first>-<last>-<seq>-<covered until>.seg
//
// <chain> is <base revision, 20 digits>-<8 random hex digits>; the numbers in segment names are zero-padded
// so that a listing returns chains and segments in order, and the catalog knows what a chain covers from
// its listing alone (ReadCatalog reads only the manifests).
//
// A segment file is: the magic "ETCDCHG" and a format version byte; a uvarint length and a JSON header
// (SegmentHeader: cluster UID, chain ID, sequence number, first and last revision, their receive times,
// the time the coverage extends to, counts, the SHA-256 of the previous segment file — of the manifest
// for segment 0 — and the SHA-256 and length of the body); the body; and a SHA-256 of all of it. The body
// is length-prefixed records: a lease (ID, granted TTL), or a revision (number, receive time, its changes:
// a delete of a key, or a put as etcd's own protobuf of mvccpb.KeyValue, with create and modify revision,
// version and lease). Protobuf keeps keys and values binary and exact and is etcd's storage encoding of a
// key-value; the JSON header keeps a segment readable with head(1); the digests make any damaged byte, a
// missing, reordered or truncated segment, or one of another chain or cluster detectable. A reader refuses
// a format version it does not know. A segment with no revision (first = last+1) is a checkpoint: it
// extends the covered time of an idle cluster (every CheckpointInterval).
//
// # Guarantees
//
// The capture never claims coverage it lacks. Every etcd revision changes at least one key, so a chain's
// revisions are contiguous and checked to be: the watch must deliver B+1, B+2, ... without a hole. When
// the watch cannot continue (the cluster compacted the next revision before the capturer read it: the
// capturer was stopped, or its watch was lost for longer than the retained history), the buffered changes
// are stored, a new chain begins from a new snapshot, and its manifest records the revisions between the
// two chains as a Gap; the capturer reports GapRecorded. When the cluster it watches is not the history its
// chain records (another etcd cluster ID, or a current revision below the chain's newest: the cluster was
// restored from a snapshot, and reuses revision numbers for other states), it begins a new chain that begins
// a new history (Manifest.History), records the break as a Gap and reports GapRecorded; the catalog restores
// only the current history (Catalog.Superseded holds the others). The time of a revision is when the capturer
// received it; a chain covers times up to the last revision's, or later when etcd confirmed (a requested
// progress notification) that nothing newer existed.
//
// A restore (PrepareRestore, RestoreTo) picks the chain that restores the target with the least replay,
// downloads the snapshot and the segments up to the target, and verifies all of it before it starts
// anything: the snapshot's digest and revision against the manifest, and for every segment its digests,
// cluster UID, chain, number, link to the previous one and contiguous revisions. A target outside the
// restorable ranges or in a gap is refused with a NotRestorableError, damage with an IntegrityError; both
// state the restorable ranges. The replay then restores the base snapshot into a temporary single-member
// etcd (unfsynced: its result leaves it as a snapshot), applies each revision as exactly one transaction,
// so revision numbers line up one to one (one revision never changes a key twice: etcd refuses a
// transaction that does), checks that every transaction made the expected revision, that the member ends
// at the target revision and that every replayed key reads back as captured (value, create and modify
// revisions, version, lease), and snapshots the member. The output is an ordinary etcd snapshot, which
// backup.Restore or etcdutl restores onto every member of a new cluster.
//
// # HashKV
//
// etcd's HashKV(rev) is a CRC-32C over the key bucket: every entry with revision in (C, rev], where C is
// the member's compact revision, plus the entries at or below C that compaction kept and that are still
// current at rev. The hash therefore depends on C, and etcd reports C with it. A restored cluster has
// exactly the source's key history from the base snapshot's contents on, and the base snapshot's compact
// revision (Manifest.CompactRevision). Hence: the restored cluster's HashKV(rev) equals the source's
// whenever both report the same compact revision — always when the source has not compacted since the
// base snapshot; after the source compacted at C' <= rev, compact the restored cluster at C' too and the
// hashes are equal again (the tests prove both). A source compacted past rev can no longer hash rev.
// RestoreResult carries the restored HashKV and compact revision for that comparison.
//
// # Leases
//
// A replayed put carries its original lease ID. The capturer learns of a lease from the first key attached
// to it (a grant changes no key) and asks its granted TTL then; leases already in the base snapshot exist
// on the temporary member. Before the first revision that uses a lease, the replay grants it with its ID
// and granted TTL (UnknownLeaseTTL when the lease was gone before the capturer asked). While the replay
// runs every lease is kept alive: an expiry on the temporary member would delete keys in a revision of its
// own. Deletions by a lease's expiry or revocation at the source are replayed as the deletes they were.
// On the restored cluster every lease has its granted TTL, counted from when the restored cluster elects
// its leader (as after any etcd restart): a key whose lease holder is gone disappears one TTL after the
// restore, not when it would have at the source. The remaining TTL at the target time is not kept. A lease
// revoked at the source after the base snapshot stays, without keys, until its TTL runs out.
//
// What is not a change of the key space comes from the base snapshot: users, roles and whether
// authentication is on, and the leases' TTLs. The temporary member authenticates the replay with a client
// certificate of its own throwaway CA whose common name is root, so a snapshot with authentication on needs
// no password.
//
// # Costs
//
// Capture: one watch of the whole key space (etcd sends each change once), one lease lookup per lease per
// chain, a full snapshot per chain, and one object per FlushInterval while the cluster changes (a
// checkpoint per CheckpointInterval while it is idle). A change takes its key and value plus about 40
// bytes. Restore: downloads the base snapshot and the segments up to the target, starts a temporary member,
// and replays one transaction per revision, in order; ChainInterval bounds how many. Run one capturer per
// cluster and prefix: two would fork a chain (the catalog reports a fork and stops the chain's coverage
// before it).
package continuous
