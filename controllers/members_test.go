package controllers

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/membership"
)

// ordinalURLs names a member's client URL by its ordinal only.
type ordinalURLs struct{}

func (ordinalURLs) PeerURL(_ *etcdv1beta1.EtcdCluster, i int) string {
	return fmt.Sprintf("peer-%d", i)
}
func (ordinalURLs) ClientURL(_ *etcdv1beta1.EtcdCluster, i int) string {
	return fmt.Sprintf("client-%d", i)
}

// TestVoterClientURLs: membership steps are sent to voting members with a pod only; a learner answers
// every such request with "rpc not supported for learner" (seen on the node: a promotion failed and was
// retried). Without a member list, every pod's URL is used.
func TestVoterClientURLs(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	pods := map[int]*corev1.Pod{0: {}, 1: {}, 2: {}, 3: {}}
	for _, tc := range []struct {
		name    string
		members []etcd.Member
		want    []string
	}{
		{"learner left out", []etcd.Member{{ID: 10}, {ID: 11}, {ID: 12}, {ID: 13, IsLearner: true}},
			[]string{"client-0", "client-1", "client-2"}},
		{"voter without a pod left out", []etcd.Member{{ID: 10}, {ID: 11}, {ID: 14}},
			[]string{"client-0", "client-1"}},
		{"member list unknown: every pod", nil, []string{"client-0", "client-1", "client-2", "client-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observation{members: tc.members, podByOrdinal: pods,
				ordinals: map[uint64]int{10: 0, 11: 1, 12: 2, 13: 3, 14: 4}}
			if got := voterClientURLs(c, obs, ordinalURLs{}); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStepEndpoints: a removal is never sent to the member it removes while another voter can take it (that
// member stops as it applies the removal and answers "server stopped", seen under load: a removal that
// succeeded was reported as failed, with a ReconcileFailed warning and Degraded=True); a leadership move
// goes to the leader only.
func TestStepEndpoints(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	obs := observation{urls: ordinalURLs{}, podByOrdinal: map[int]*corev1.Pod{0: {}, 1: {}, 2: {}, 3: {}},
		members:  []etcd.Member{{ID: 10}, {ID: 11}, {ID: 12}, {ID: 13}},
		ordinals: map[uint64]int{10: 0, 11: 1, 12: 2, 13: 3},
		statuses: map[uint64]etcd.EndpointStatus{10: {Leader: 12}, 11: {Leader: 12}, 12: {Leader: 12}}}
	alone := obs
	alone.members, alone.ordinals = []etcd.Member{{ID: 13}}, map[uint64]int{13: 3}
	for _, tc := range []struct {
		name string
		a    membership.Action
		obs  observation
		want []string
	}{
		{"removal: every voter but the removed one", membership.Action{Type: membership.ActionRemove, Ordinal: 3, ID: 13}, obs,
			[]string{"client-0", "client-1", "client-2"}},
		{"removal of the last voter known: itself", membership.Action{Type: membership.ActionRemove, Ordinal: 3, ID: 13}, alone,
			[]string{"client-3"}},
		{"promotion: every voter", membership.Action{Type: membership.ActionPromote, Ordinal: 3, ID: 13}, obs,
			[]string{"client-0", "client-1", "client-2", "client-3"}},
		{"leadership move: the leader", membership.Action{Type: membership.ActionMoveLeader, Ordinal: 1, ID: 11}, obs,
			[]string{"client-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stepEndpoints(c, tc.a, tc.obs)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	noLeader := obs
	noLeader.statuses = nil
	if _, err := stepEndpoints(c, membership.Action{Type: membership.ActionMoveLeader, Ordinal: 1}, noLeader); err == nil {
		t.Error("a leadership move without a known leader: no error")
	}
}

// TestRequeueAfterLooksSoonerAtAwaitedLearners: a starting or catching-up learner, and a step etcd deferred,
// are looked at again within learnerPollInterval (no event says when etcd is ready); other steps at the
// step interval.
func TestRequeueAfterLooksSoonerAtAwaitedLearners(t *testing.T) {
	r := &EtcdClusterReconciler{}
	c := &etcdv1beta1.EtcdCluster{}
	obs := observation{pods: []corev1.Pod{{}}}
	awaiting := membership.Decision{Phase: membership.PhaseScaling, AwaitsLearner: true}
	if got := r.requeueAfter(c, obs, awaiting, false, false); got != learnerPollInterval {
		t.Errorf("awaiting a learner: requeue after %s, want %s", got, learnerPollInterval)
	}
	if got := r.requeueAfter(c, obs, membership.Decision{Phase: membership.PhaseScaling}, false, false); got != r.stepInterval() {
		t.Errorf("another step: requeue after %s, want the step interval %s", got, r.stepInterval())
	}
	if got := r.requeueAfter(c, obs, membership.Decision{Phase: membership.PhaseScaling}, false, true); got != learnerPollInterval {
		t.Errorf("a step etcd deferred: requeue after %s, want %s (its refusal clears within seconds)", got, learnerPollInterval)
	}
	stable := membership.Decision{Phase: membership.PhaseStable}
	obs.members = []etcd.Member{{ID: 1, ClientURLs: []string{"https://m-0.m.ns.svc:2379"}}, {ID: 2}}
	obs.statuses = map[uint64]etcd.EndpointStatus{1: {MemberID: 1}}
	if got := r.requeueAfter(c, obs, stable, false, false); got != r.healthInterval() {
		t.Errorf("every started member answered: requeue after %s, want the health interval %s", got, r.healthInterval())
	}
	obs.statuses = map[uint64]etcd.EndpointStatus{}
	if got := r.requeueAfter(c, obs, stable, false, false); got != r.stepInterval() {
		t.Errorf("a started member did not answer: requeue after %s, want the step interval %s", got, r.stepInterval())
	}
	obs.members, obs.statuses = nil, nil
	r.StepInterval = 100 * time.Millisecond
	if got := r.requeueAfter(c, obs, awaiting, false, false); got != r.StepInterval {
		t.Errorf("awaiting a learner with a shorter step interval: requeue after %s, want %s", got, r.StepInterval)
	}
}

// TestMemberConfigNamesLateMembers: the planner's late members reach the members' configuration by pod
// name, which is what the member gate compares with its own ETCD_NAME.
func TestMemberConfigNamesLateMembers(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	cfg := &membership.Config{State: membership.StateNew, Late: []int{3, 4}}
	for i := range 5 {
		cfg.Members = append(cfg.Members, membership.ConfigMember{Ordinal: i, Name: fmt.Sprintf("c-%d", i)})
	}
	mc := memberConfig(c, cfg, ordinalURLs{})
	if want := []string{"c-3", "c-4"}; !slices.Equal(mc.LateBootstrap, want) || mc.InitialClusterState != membership.StateNew {
		t.Fatalf("late %v, state %s: want %v, new", mc.LateBootstrap, mc.InitialClusterState, want)
	}
	if want := "c-0=peer-0,c-1=peer-1,c-2=peer-2,c-3=peer-3,c-4=peer-4"; mc.InitialCluster != want {
		t.Fatalf("initial cluster %q, want %q", mc.InitialCluster, want)
	}
}
