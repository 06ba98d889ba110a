package controllers

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// FuzzOrdinalOf: the ordinal of a member name reads back exactly what MemberName wrote, and any other
// name (a pod or claim of another cluster sharing the prefix, "01", "-1", "+1") is not a member (-1).
func FuzzOrdinalOf(f *testing.F) {
	for _, s := range []string{"prod-etcd-0", "prod-etcd-10", "prod-etcd-01", "prod-etcd--1", "prod-etcd-+1", "prod-etcd-x-1", "prod-etcd-9223372036854775808", "prod-etcd"} {
		f.Add("prod-etcd", s, 3)
	}
	f.Fuzz(func(t *testing.T, cluster, name string, i int) {
		c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
		got := ordinalOf(c, name)
		if got < -1 {
			t.Fatalf("ordinalOf(%q) = %d", name, got)
		}
		if got >= 0 && resources.MemberName(c, got) != name {
			t.Fatalf("ordinalOf(%q) = %d, but member %d is named %q", name, got, got, resources.MemberName(c, got))
		}
		if i >= 0 {
			if got := ordinalOf(c, resources.MemberName(c, i)); got != i {
				t.Fatalf("ordinalOf(MemberName(%d)) = %d", i, got)
			}
		}
	})
}

// FuzzVersionLess: versionLess is a strict order on any strings (never both a<b and b<a, never a<a), and
// on X.Y.Z versions it agrees with numeric comparison (status.currentVersion is the lowest member's).
func FuzzVersionLess(f *testing.F) {
	for _, p := range [][2]string{{"3.5.9", "3.5.17"}, {"3.5.17", "3.6.0"}, {"3.5", "3.5.0"}, {"3.5.x", "3.5.0"}, {"", "3"}, {"10.0.0", "9.9.9"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if versionLess(a, a) {
			t.Fatalf("versionLess(%q, %q)", a, a)
		}
		if versionLess(a, b) && versionLess(b, a) {
			t.Fatalf("%q < %q and %q < %q", a, b, b, a)
		}
		pa, okA := numeric(a)
		pb, okB := numeric(b)
		if !okA || !okB {
			return
		}
		want := false
		for i := range 3 {
			if pa[i] != pb[i] {
				want = pa[i] < pb[i]
				break
			}
		}
		if got := versionLess(a, b); got != want {
			t.Fatalf("versionLess(%q, %q) = %v, want %v", a, b, got, want)
		}
	})
}

func numeric(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || strconv.Itoa(n) != p {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// FuzzWatchNamespaces: WATCH_NAMESPACE parses into trimmed, non-empty names without commas, and parsing the
// joined result gives the same list.
func FuzzWatchNamespaces(f *testing.F) {
	for _, s := range []string{"", "a", "a,b", " a , ,b,", ",,,", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nss := WatchNamespaces(s)
		for _, ns := range nss {
			if ns == "" || strings.Contains(ns, ",") || strings.TrimSpace(ns) != ns {
				t.Fatalf("WatchNamespaces(%q) = %q", s, nss)
			}
		}
		if again := WatchNamespaces(strings.Join(nss, ",")); strings.Join(again, ",") != strings.Join(nss, ",") {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, nss, again)
		}
	})
}

// FuzzRestoreFailure: whatever a failed restore container wrote as its termination message (JSON result or
// a log tail), the cluster's message names the member and carries the error.
func FuzzRestoreFailure(f *testing.F) {
	for _, s := range []string{`{"error":"snapshot missing"}`, "panic: boom", "", `{"error":""}`, `{"error":1}`, "{"} {
		f.Add(s, int32(1))
	}
	f.Fuzz(func(t *testing.T, msg string, code int32) {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd-1"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: resources.RestoreContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
		got := restoreFailure([]corev1.Pod{pod})
		if code == 0 {
			if got != "" {
				t.Fatalf("a restore that exited 0 reported %q", got)
			}
			return
		}
		if !strings.Contains(got, "prod-etcd-1") {
			t.Fatalf("restore failure %q does not name the member", got)
		}
	})
}
