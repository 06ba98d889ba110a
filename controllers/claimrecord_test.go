package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
)

// The claim holding a member's data is recorded once the member is healthy on a claim annotated with its
// ID, kept while the member lives, and a different claim at its ordinal marks the data lost.
func TestVolumeClaimRecord(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	claim := func(uid, member string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-c-1", UID: types.UID(uid)}}
		if member != "" {
			pvc.Annotations = map[string]string{AnnotationMemberID: member}
		}
		return pvc
	}
	obsWith := func(pvc *corev1.PersistentVolumeClaim, healthy bool, previous ...etcdv1beta1.MemberStatus) observation {
		obs := observation{
			reachable:    true,
			members:      []etcd.Member{{ID: 0xb, Name: "c-1", ClientURLs: []string{"https://c-1:2379"}}},
			ordinals:     map[uint64]int{0xb: 1},
			healthy:      map[uint64]bool{0xb: healthy},
			pvcByOrdinal: map[int]*corev1.PersistentVolumeClaim{1: pvc},
			previous:     map[string]etcdv1beta1.MemberStatus{},
		}
		for _, p := range previous {
			obs.previous[p.Name] = p
		}
		return obs
	}
	now := time.Now()
	record := func(obs observation) string { return memberStatuses(c, obs, now)[0].VolumeClaimUID }

	if got := record(obsWith(claim("u1", ""), true)); got != "" {
		t.Errorf("recorded %q before the claim was annotated with the member", got)
	}
	if got := record(obsWith(claim("u1", "b"), false)); got != "" {
		t.Errorf("recorded %q for an unhealthy member", got)
	}
	if got := record(obsWith(claim("u1", "b"), true)); got != "u1" {
		t.Errorf("recorded %q, want u1", got)
	}
	prev := etcdv1beta1.MemberStatus{Name: "c-1", ID: "b", VolumeClaimUID: "u1"}
	replaced := obsWith(claim("u2", ""), true, prev)
	if got := record(replaced); got != "u1" {
		t.Errorf("record moved to %q: a member's data never moves to another claim", got)
	}
	if !replaced.claimReplaced("c-1", 0xb, 1) {
		t.Error("a claim other than the recorded one is not reported as replaced")
	}
	if in := replaced.planInput(c, now, time.Minute); !in.Members[0].ClaimReplaced {
		t.Error("the planner is not told the claim was replaced")
	}
	if obsWith(claim("u1", "b"), true, prev).claimReplaced("c-1", 0xb, 1) {
		t.Error("the recorded claim is reported as replaced")
	}
	// A new member under the same name (another ID) starts a new record.
	other := etcdv1beta1.MemberStatus{Name: "c-1", ID: "a", VolumeClaimUID: "u0"}
	if obsWith(claim("u1", "b"), true, other).claimReplaced("c-1", 0xb, 1) {
		t.Error("the record of a previous member with the same name applied to a new member")
	}
	if got := record(obsWith(claim("u1", "b"), true, other)); got != "u1" {
		t.Errorf("new member recorded %q, want u1", got)
	}
}
