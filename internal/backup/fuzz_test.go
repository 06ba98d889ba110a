package backup

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzFileName: every snapshot name FileName makes is read back by parseFileName (so retention finds it)
// with the same time and revision, and only for its own cluster; parseFileName never panics on any name.
func FuzzFileName(f *testing.F) {
	f.Add("prod-etcd", int64(1795312800), int64(42), "prod-etcd-20261122T020000Z-r42.db")
	f.Add("etcd", int64(0), int64(0), "etcd-20261122T020000Z-r007.db")
	f.Add("a-20261122T020000Z-r1.db", int64(253402300799), int64(9223372036854775807), "a-99999999T999999Z-r99999999999999999999.db")
	f.Fuzz(func(t *testing.T, cluster string, unix, rev int64, name string) {
		parseFileName(cluster, name)                                                                   // any name from a listing: no panic
		if len(validation.IsDNS1123Label(cluster)) > 0 || rev < 0 || unix < 0 || unix > 253402300799 { // years 1970..9999: the layout has 4 digits
			return
		}
		at := time.Unix(unix, 0)
		got, gotRev, ok := parseFileName(cluster, FileName(cluster, at, rev))
		if !ok || !got.Equal(at) || gotRev != rev {
			t.Fatalf("FileName(%q, %s, %d) = %q reads back as (%s, %d, %v)", cluster, at.UTC(), rev, FileName(cluster, at, rev), got, gotRev, ok)
		}
		if other := cluster + "x"; !strings.Contains(cluster, "-") {
			if _, _, ok := parseFileName(other, FileName(cluster, at, rev)); ok {
				t.Fatalf("%q's snapshot %q is taken for cluster %q's", cluster, FileName(cluster, at, rev), other)
			}
		}
	})
}

// FuzzDirStoreKey: a key either is refused or names a file strictly inside the store's root, so a key from
// a spec (spec.bootstrap.fromBackup.key) can never read or write outside the backup claim.
func FuzzDirStoreKey(f *testing.F) {
	for _, k := range []string{"prod/etcd/scheduled/etcd-20261122T020000Z-r42.db", "../x", "/etc/passwd", "a/../../b", "", "/", ".", "a//b", `a\..\b`, "..", "a/..b"} {
		f.Add(k)
	}
	root := filepath.Join(f.TempDir(), "backups")
	s := &DirStore{Root: root, Claim: "c"}
	f.Fuzz(func(t *testing.T, key string) {
		p, err := s.path(key)
		if err != nil {
			return
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			t.Fatalf("key %q maps to %s, outside the root %s", key, p, root)
		}
		if !strings.HasPrefix(s.Location(key), "pvc://c/") {
			t.Fatalf("location %q", s.Location(key))
		}
	})
}

// FuzzClusterPrefix: the keys a run stores under ClusterPrefix are the ones Prune considers (same folder,
// parsable name), for any S3 prefix, namespace and cluster the API accepts.
func FuzzClusterPrefix(f *testing.F) {
	f.Add("", "db", "prod-etcd", true)
	f.Add("prod", "db", "prod-etcd", false)
	f.Add("prod/etcd/", "x", "e", true)
	f.Add("/", "x", "e", true)
	f.Fuzz(func(t *testing.T, prefix, ns, cluster string, scheduled bool) {
		if len(validation.IsDNS1123Label(ns))+len(validation.IsDNS1123Label(cluster)) > 0 {
			return // namespaces and cluster names are DNS labels
		}
		kind := KindOnDemand
		if scheduled {
			kind = KindScheduled
		}
		dir := ClusterPrefix(prefix, ns, cluster, kind)
		key := dir + FileName(cluster, time.Unix(1795312800, 0), 42)
		if _, _, ok := parseFileName(cluster, path.Base(key)); !ok || path.Dir(key)+"/" != dir {
			t.Fatalf("prefix %q: key %q is not one Prune of %q would consider", prefix, key, dir)
		}
	})
}
