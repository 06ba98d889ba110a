package controllers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
)

// statusObservation is a reachable cluster: voters healthy as given (ordinals 0..n-1), plus learners
// (the next ordinals) healthy as given.
func statusObservation(voters, learners []bool) observation {
	obs := observation{reachable: true, statefulSet: &appsv1.StatefulSet{}, podByOrdinal: map[int]*corev1.Pod{}, ordinals: map[uint64]int{},
		healthy: map[uint64]bool{}, statuses: map[uint64]etcd.EndpointStatus{}}
	add := func(healthy, learner bool) {
		ord := len(obs.members)
		id := uint64(100 + ord)
		obs.members = append(obs.members, etcd.Member{ID: id, Name: "c-" + string(rune('0'+ord)), IsLearner: learner})
		obs.ordinals[id], obs.healthy[id] = ord, healthy
		obs.pods = append(obs.pods, corev1.Pod{})
		if healthy && !learner {
			obs.readyReplicas++
		}
	}
	for _, h := range voters {
		add(h, false)
	}
	for _, h := range learners {
		add(h, true)
	}
	return obs
}

// TestComputeStatus: the conditions and the phase for the situations a user sees.
func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	type want struct {
		phase                            etcdv1beta1.ClusterPhase
		available, progressing, degraded metav1.ConditionStatus
		degradedReason                   string
	}
	for _, tc := range []struct {
		name     string
		replicas int32
		paused   bool
		// before is the Available reason status reported last ("" for none: a new cluster).
		before   string
		obs      observation
		decision membership.Decision
		err      error
		want     want
	}{
		{"healthy", 3, false, ReasonQuorumHealthy, statusObservation([]bool{true, true, true}, nil), membership.Decision{},
			nil, want{etcdv1beta1.PhaseRunning, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonAsExpected}},
		// A scale step's learner is starting: the cluster is changing, not degraded.
		{"scale-up, learner starting", 5, false, ReasonQuorumHealthy, statusObservation([]bool{true, true, true}, []bool{false}),
			membership.Decision{Phase: membership.PhaseScaling, Message: "starting learner member 3"},
			nil, want{etcdv1beta1.PhaseProgressing, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse, ReasonAsExpected}},
		{"one voter of three unhealthy", 3, false, ReasonQuorumHealthy, statusObservation([]bool{true, false, true}, nil), membership.Decision{},
			nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, ReasonMembersUnhealthy}},
		// Just promoted: a voter whose pod is not ready yet lowers the failures the cluster tolerates.
		{"promoted voter not ready yet", 5, false, ReasonQuorumHealthy, statusObservation([]bool{true, true, true, false}, nil),
			membership.Decision{Phase: membership.PhaseScaling},
			nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonMembersUnhealthy}},
		{"quorum lost", 3, false, ReasonQuorumHealthy, statusObservation([]bool{true, false, false}, nil), membership.Decision{},
			nil, want{etcdv1beta1.PhaseUnavailable, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue, ReasonMembersUnhealthy}},
		{"reconcile failed", 3, false, ReasonQuorumHealthy, statusObservation([]bool{true, true, true}, nil), membership.Decision{},
			errors.New("boom"), want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonReconcileFailed}},
		// A member restarted onto a version whose image does not pull: reported, never healed.
		{"stalled upgrade", 3, false, ReasonQuorumHealthy, statusObservation([]bool{true, false, true}, nil),
			membership.Decision{Phase: membership.PhaseStalled, Message: "cannot start: member 1 (ImagePullBackOff)"},
			nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, ReasonMemberCannotStart}},
		// A new cluster: etcd answers before its members pass readiness. That is bootstrapping, not a
		// lost quorum, and no member is reported unhealthy for it.
		{"bootstrapping, etcd answers before readiness", 3, false, "", statusObservation([]bool{true, false, false}, nil),
			membership.Decision{}, nil, want{etcdv1beta1.PhasePending, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, ReasonAsExpected}},
		{"bootstrapping, quorum ready", 3, false, "", statusObservation([]bool{true, true, false}, nil),
			membership.Decision{}, nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, ReasonMembersUnhealthy}},
		// Every claim deleted while the pods run: the members are healthy now, but the data of member 2 goes
		// at its pod's next restart. Status says so while the members are replaced one at a time.
		{"a member's claim is being deleted", 3, false, ReasonQuorumHealthy, func() observation {
			obs := statusObservation([]bool{true, true, true}, nil)
			obs.pvcByOrdinal = map[int]*corev1.PersistentVolumeClaim{2: {ObjectMeta: metav1.ObjectMeta{Name: "data-c-2",
				DeletionTimestamp: &metav1.Time{Time: now}, Annotations: map[string]string{AnnotationMemberID: "66"}}}}
			return obs
		}(), membership.Decision{Phase: membership.PhaseScaling, Message: "adding member 0 as a learner"},
			nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonMemberDataDeleting}},
		// An issuer that broke under a running cluster: said in Degraded while the members run on their
		// certificates, never before a member's health.
		{"issuer broken, members healthy", 3, false, ReasonQuorumHealthy, func() observation {
			obs := statusObservation([]bool{true, true, true}, nil)
			obs.tls.held = &certificatesPending{ReasonIssuerNotReady, "Issuer ns/ca named by spec.tls.issuerRef not found"}
			return obs
		}(), membership.Decision{}, nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, ReasonIssuerNotReady}},
		{"issuer broken, a member unhealthy", 3, false, ReasonQuorumHealthy, func() observation {
			obs := statusObservation([]bool{true, false, true}, nil)
			obs.tls.held = &certificatesPending{ReasonIssuerNotReady, "Issuer ns/ca named by spec.tls.issuerRef not found"}
			return obs
		}(), membership.Decision{Phase: membership.PhaseHealing}, nil, want{etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonMembersUnhealthy}},
		{"paused", 3, true, ReasonQuorumHealthy, statusObservation([]bool{true, true, true}, nil), membership.Decision{},
			nil, want{etcdv1beta1.PhasePaused, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonAsExpected}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
			c.Spec.Replicas, c.Spec.Paused = tc.replicas, tc.paused
			if tc.before != "" {
				c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Reason: tc.before}}
			}
			if tc.decision.Phase == "" {
				tc.decision.Phase = membership.PhaseStable
			}
			s := computeStatus(c, tc.obs, tc.decision, maintenance.SpaceStep{}, nil, tc.err, now)
			cond := func(typ string) *metav1.Condition {
				cd := meta.FindStatusCondition(s.Conditions, typ)
				if cd == nil {
					t.Fatalf("no %s condition", typ)
				}
				return cd
			}
			if s.Phase != tc.want.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.want.phase)
			}
			if got := cond(etcdv1beta1.ConditionAvailable); got.Status != tc.want.available {
				t.Errorf("Available %s (%s), want %s", got.Status, got.Message, tc.want.available)
			}
			if got := cond(etcdv1beta1.ConditionProgressing); got.Status != tc.want.progressing {
				t.Errorf("Progressing %s (%s), want %s", got.Status, got.Message, tc.want.progressing)
			}
			if got := cond(etcdv1beta1.ConditionDegraded); got.Status != tc.want.degraded || got.Reason != tc.want.degradedReason {
				t.Errorf("Degraded %s/%s (%s), want %s/%s", got.Status, got.Reason, got.Message, tc.want.degraded, tc.want.degradedReason)
			}
			if s.ObservedGeneration != 2 {
				t.Errorf("observedGeneration %d", s.ObservedGeneration)
			}
		})
	}
}

// TestComputeStatusProgressingFromTheFirstReconcileOfAChange: the reconcile that applies a new spec, and
// every one after it until the members run it, reports Progressing=True, never Reconciled.
func TestComputeStatusProgressingFromTheFirstReconcileOfAChange(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 3}}
	c.Spec.Replicas, c.Spec.Version = 3, "3.5.35"
	stable := membership.Decision{Phase: membership.PhaseStable}

	obs := statusObservation([]bool{true, true, true}, nil)
	s := computeStatus(c, obs, stable, maintenance.SpaceStep{}, []string{"StatefulSet c"}, nil, now)
	if got := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing); got.Status != metav1.ConditionTrue || got.Reason != ReasonApplying {
		t.Errorf("the reconcile that applied the change: Progressing %s/%s (%s)", got.Status, got.Reason, got.Message)
	}

	// The next reconcile sees the pods on the old template: the roll's phase reports it.
	s = computeStatus(c, obs, membership.Decision{Phase: membership.PhaseUpgrading, Message: "upgrading c-1 to 3.5.35 (1/3)"}, maintenance.SpaceStep{}, nil, nil, now)
	if got := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing); got.Status != metav1.ConditionTrue || got.Reason != ReasonUpgrading {
		t.Errorf("members still on the old template: Progressing %s/%s (%s)", got.Status, got.Reason, got.Message)
	}

	for id := range obs.healthy {
		obs.statuses[id] = etcd.EndpointStatus{Version: "3.5.35"}
	}
	// A template change that keeps the image (an etcd flag), before the StatefulSet controller has taken it:
	// the pods look up to date, and are not (seen on the node: Reconciled, then the member rolled).
	obs.statefulSet = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 5},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 4}}
	s = computeStatus(c, obs, stable, maintenance.SpaceStep{}, nil, nil, now)
	if got := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing); got.Status != metav1.ConditionTrue || got.Reason != ReasonApplying {
		t.Errorf("StatefulSet generation not yet observed by its controller: Progressing %s/%s (%s)", got.Status, got.Reason, got.Message)
	}

	obs.statefulSet.Status.ObservedGeneration = 5
	s = computeStatus(c, obs, stable, maintenance.SpaceStep{}, nil, nil, now)
	if got := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing); got.Status != metav1.ConditionFalse || got.Reason != ReasonReconciled {
		t.Errorf("converged: Progressing %s/%s (%s)", got.Status, got.Reason, got.Message)
	}
	if s.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d", s.ObservedGeneration)
	}
}

// TestStatusReportsAlarms: NOSPACE is Degraded with the recovery's step, quorum still Available; CORRUPT is
// Degraded with what a human must do; both are listed by member name.
func TestStatusReportsAlarms(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
	c.Spec.Replicas = 3
	stable := membership.Decision{Phase: membership.PhaseStable}

	obs := statusObservation([]bool{true, true, true}, nil)
	obs.alarms = []etcd.Alarm{{MemberID: 101, Type: etcd.AlarmNoSpace}}
	step := maintenance.SpaceStep{Kind: maintenance.SpaceDefragment, Reason: "NOSPACE: defragmenting member c-1"}
	s := computeStatus(c, obs, stable, step, nil, nil, now)
	if !slices.Equal(s.Alarms, []string{"NOSPACE on c-1"}) {
		t.Errorf("alarms %v", s.Alarms)
	}
	if !meta.IsStatusConditionTrue(s.Conditions, etcdv1beta1.ConditionAvailable) {
		t.Errorf("NOSPACE made the cluster unavailable: quorum holds and reads work")
	}
	if d := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded); d.Status != metav1.ConditionTrue ||
		d.Reason != ReasonNoSpace || d.Message != step.Reason {
		t.Errorf("Degraded %s/%s %q, want True/%s with the step", d.Status, d.Reason, d.Message, ReasonNoSpace)
	}

	obs.alarms = []etcd.Alarm{{MemberID: 102, Type: etcd.AlarmCorrupt}}
	s = computeStatus(c, obs, stable, maintenance.SpaceStep{}, nil, nil, now)
	if d := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded); d.Status != metav1.ConditionTrue ||
		d.Reason != ReasonDataCorrupt || !strings.Contains(d.Message, "CORRUPT on c-2") || !strings.Contains(d.Message, "hashkv") {
		t.Errorf("Degraded %s/%s %q, want True/%s naming the member and what to do", d.Status, d.Reason, d.Message, ReasonDataCorrupt)
	}

	obs.alarms = []etcd.Alarm{}
	s = computeStatus(c, obs, stable, maintenance.SpaceStep{}, nil, nil, now)
	if len(s.Alarms) != 0 || meta.IsStatusConditionTrue(s.Conditions, etcdv1beta1.ConditionDegraded) {
		t.Errorf("alarms %v, Degraded %v after the alarms were disarmed", s.Alarms, meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded))
	}
}

func TestHealthIgnoresOnlyTheNoSpaceAlarm(t *testing.T) {
	if got := healthErrors(1, []string{"memberID:1 alarm:NOSPACE "}); len(got) != 0 {
		t.Errorf("NOSPACE counted against a member: %v", got)
	}
	if got := healthErrors(1, []string{"memberID:1 alarm:CORRUPT ", "etcdserver: no leader"}); len(got) != 2 {
		t.Errorf("errors %v: CORRUPT and no leader must count", got)
	}
	// etcd lists every member's alarms in every member's status: another member's CORRUPT is not this one's.
	if got := healthErrors(2, []string{"memberID:1 alarm:CORRUPT ", "etcdserver: no leader"}); len(got) != 1 || got[0] != "etcdserver: no leader" {
		t.Errorf("errors %v: another member's CORRUPT counted, or no leader not", got)
	}
}

// TestQuorumLostSaysWhatSurvives: without a majority the member list cannot be read, so Available=False
// names the members that still answer, with the raft index and revision each has applied, and the silent.
func TestQuorumLostSaysWhatSurvives(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
	c.Spec.Replicas = 3
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonQuorumHealthy}}
	obs := observation{statefulSet: &appsv1.StatefulSet{}, pods: make([]corev1.Pod, 3), readyReplicas: 0,
		etcdErr: errors.New("list etcd members: context deadline exceeded"),
		survivors: []survivor{
			{name: "c-0", answered: true, status: etcd.EndpointStatus{RaftIndex: 1234, Revision: 567}},
			{name: "c-1"}, {name: "c-2"},
		}}
	s := computeStatus(c, obs, membership.Decision{Phase: membership.PhaseWaiting}, maintenance.SpaceStep{}, nil, nil, now)
	got := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionAvailable)
	want := "only 0 of 3 voting members healthy; quorum needs 2; answering: c-0 (raft index 1234, revision 567); not answering: c-1, c-2"
	if got.Status != metav1.ConditionFalse || got.Reason != ReasonQuorumLost || got.Message != want {
		t.Errorf("Available %s/%s %q, want False/%s %q", got.Status, got.Reason, got.Message, ReasonQuorumLost, want)
	}
}

// TestStatusKeepsMembersWhileEtcdCannotBeAsked: with no member list, status keeps what etcd last said of each
// member (ID, role, version, the claim holding its data), with its pod's readiness, and keeps a member
// whose pod is gone: quorum-loss recovery, and a human, need exactly these then.
func TestStatusKeepsMembersWhileEtcdCannotBeAsked(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
	c.Spec.Replicas = 3
	c.Status.Members = []etcdv1beta1.MemberStatus{
		{Name: "c-0", ID: "a0", Healthy: true, Leader: true, Version: "3.5.35", VolumeClaimUID: "claim-0", DBSizeBytes: 1 << 20},
		{Name: "c-1", ID: "a1", Healthy: true, Version: "3.5.35", VolumeClaimUID: "claim-1"},
		{Name: "c-2", ID: "a2", Healthy: true, Version: "3.5.35", VolumeClaimUID: "claim-2"},
	}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "c-0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c-1"}}}
	obs := observation{statefulSet: &appsv1.StatefulSet{}, pods: pods, clientURLs: map[int]string{0: "https://c-0:2379", 1: "https://c-1:2379"},
		etcdErr: errors.New("list etcd members: context deadline exceeded"), previous: map[string]etcdv1beta1.MemberStatus{}}
	for _, m := range c.Status.Members {
		obs.previous[m.Name] = m
	}
	got := memberStatuses(c, obs, now)
	want := []etcdv1beta1.MemberStatus{
		{Name: "c-0", ID: "a0", Version: "3.5.35", VolumeClaimUID: "claim-0", ClientURL: "https://c-0:2379"},
		{Name: "c-1", ID: "a1", Version: "3.5.35", VolumeClaimUID: "claim-1", ClientURL: "https://c-1:2379"},
		{Name: "c-2", ID: "a2", Version: "3.5.35", VolumeClaimUID: "claim-2"},
	}
	for i := range want {
		since := metav1.NewTime(now)
		want[i].UnhealthySince = &since
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("members\n%+v\nwant\n%+v", got, want)
	}
}

// TestMemberHealth: how a member that answered its status call is judged.
func TestMemberHealth(t *testing.T) {
	// etcd writes the alarmed member's ID in decimal; the member judged is 100.
	const noLeader, noSpace, corrupt = "etcdserver: no leader", "memberID:64 alarm:NOSPACE ", "memberID:100 alarm:CORRUPT "
	const otherCorrupt = "memberID:64 alarm:CORRUPT "
	for _, tc := range []struct {
		name                  string
		learner, ready        bool
		errs                  []string
		healthy, wantElecting bool
	}{
		{"voter, ready, no errors", false, true, nil, true, false},
		{"voter, not ready", false, false, nil, false, false},
		{"voter, cluster out of space", false, true, []string{noSpace}, true, false},
		// An election: reported by readiness, and nothing is done until it is over.
		{"voter, ready, knows no leader", false, true, []string{noLeader}, false, true},
		{"voter, ready, knows no leader, cluster out of space", false, true, []string{noSpace, noLeader}, false, true},
		// Cut off long enough to fail readiness: unhealthy.
		{"voter, not ready, knows no leader", false, false, []string{noLeader}, false, false},
		{"voter, ready, corrupt", false, true, []string{corrupt, noLeader}, false, false},
		{"voter, not ready, corrupt", false, false, []string{corrupt}, false, false},
		// Another member's CORRUPT alarm fails every member's readiness: the status answer judges.
		{"voter, not ready, another member corrupt", false, false, []string{otherCorrupt}, true, false},
		{"voter, not ready, another member corrupt, knows no leader", false, false, []string{otherCorrupt, noLeader}, false, false},
		{"voter, not ready, another member corrupt, itself too", false, false, []string{otherCorrupt, corrupt}, false, false},
		{"learner, no errors", true, false, nil, true, false},
		{"learner, knows no leader", true, false, []string{noLeader}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			healthy, electing := memberHealth(etcd.Member{ID: 100, IsLearner: tc.learner}, etcd.EndpointStatus{Errors: tc.errs}, tc.ready)
			if healthy != tc.healthy || electing != tc.wantElecting {
				t.Errorf("healthy %v electing %v, want %v %v", healthy, electing, tc.healthy, tc.wantElecting)
			}
		})
	}
}

// TestStatusDuringAnElection: while the members elect a leader (the last one stalled by its own
// defragmentation, say), every one of them says it knows no leader. Status reports the cluster available
// and its members healthy, with the election in the message; the operator acts on none of them meanwhile.
func TestStatusDuringAnElection(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2}}
	c.Spec.Replicas = 3
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonQuorumHealthy,
		LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	obs := statusObservation([]bool{false, false, false}, nil)
	obs.electing, obs.readyReplicas = map[uint64]bool{}, 3
	for _, m := range obs.members {
		obs.electing[m.ID] = true
		obs.statuses[m.ID] = etcd.EndpointStatus{MemberID: m.ID, Errors: []string{"etcdserver: no leader"}, DBSize: 100 << 20}
	}

	s := computeStatus(c, obs, membership.Decision{Phase: membership.PhaseStable}, maintenance.SpaceStep{}, nil, nil, now)
	avail := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionAvailable)
	want := "3 of 3 voting members healthy (quorum 2); 3 of them know no leader yet: electing one"
	if avail.Status != metav1.ConditionTrue || avail.Reason != ReasonQuorumHealthy || avail.Message != want {
		t.Errorf("Available %s/%s %q, want True/%s %q", avail.Status, avail.Reason, avail.Message, ReasonQuorumHealthy, want)
	}
	// No transition: the planner's heal clocks count from Available's last one.
	if !avail.LastTransitionTime.Time.Equal(now.Add(-time.Hour)) {
		t.Errorf("Available changed at %v during an election", avail.LastTransitionTime)
	}
	if d := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded); d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %s/%s %q during an election", d.Status, d.Reason, d.Message)
	}
	for _, m := range s.Members {
		if !m.Healthy || m.UnhealthySince != nil {
			t.Errorf("member %s reported unhealthy during an election: %+v", m.Name, m)
		}
	}

	in := obs.planInput(c, now, 3*time.Minute)
	for _, m := range in.Members {
		if m.Healthy {
			t.Errorf("the planner sees member %s healthy during an election: it must change nothing until it is over", m.Name)
		}
	}
	for _, m := range obs.spaceInput(c).Members {
		if m.Healthy {
			t.Errorf("maintenance sees member %s healthy during an election: no defragmentation may start", m.Name)
		}
	}
}

// TestComputeStatusMemberPodsCannotStart: a new cluster whose member pods cannot start is degraded, not
// merely bootstrapping, and status names the pod, the container, its image and the kubelet's reason.
func TestComputeStatusMemberPodsCannotStart(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	const image = "gcr.io/etcd-development/etcd:v3.5.99"
	pod := func(name, reason, msg string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: image}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	pullFailure := `failed to pull image "` + image + `": not found`
	for _, tc := range []struct {
		name                                    string
		before                                  string
		obs                                     observation
		decision                                membership.Decision
		progressing                             metav1.ConditionStatus
		progressingReason, degradedReason, want string
	}{
		{name: "bootstrap stalled on an image that does not exist",
			obs:         observation{statefulSet: &appsv1.StatefulSet{}, pods: []corev1.Pod{pod("c-0", "ErrImagePull", pullFailure), pod("c-1", "ImagePullBackOff", "")}},
			decision:    membership.Decision{Phase: membership.PhaseStalled, Message: "cannot start: member 0 (ErrImagePull: " + pullFailure + ")"},
			progressing: metav1.ConditionFalse, progressingReason: ReasonMemberCannotStart, degradedReason: ReasonMemberCannotStart,
			want: "cannot start: member 0 (ErrImagePull: " + pullFailure + "); pod c-0: container etcd (image " + image + "): ErrImagePull: " +
				pullFailure + "; pod c-1: container etcd (image " + image + "): ImagePullBackOff"},
		{name: "bootstrap with a container that cannot be created",
			obs:         observation{statefulSet: &appsv1.StatefulSet{}, pods: []corev1.Pod{pod("c-2", "CreateContainerConfigError", `secret "s" not found`)}},
			decision:    membership.Decision{Phase: membership.PhaseBootstrapping, Message: "bootstrapping 3 members"},
			progressing: metav1.ConditionTrue, progressingReason: ReasonCreating, degradedReason: ReasonMemberCannotStart,
			want: "member pods cannot start: pod c-2: container etcd (image " + image + `): CreateContainerConfigError: secret "s" not found`},
		{name: "etcd unreachable after formation: the pods say why",
			before:      ReasonQuorumHealthy,
			obs:         observation{statefulSet: &appsv1.StatefulSet{}, pods: []corev1.Pod{pod("c-0", "ImagePullBackOff", "Back-off pulling image")}},
			decision:    membership.Decision{Phase: membership.PhaseWaiting, Message: "etcd is unreachable; waiting"},
			progressing: metav1.ConditionTrue, progressingReason: ReasonWaiting, degradedReason: ReasonMemberCannotStart,
			want: "member pods cannot start: pod c-0: container etcd (image " + image + "): ImagePullBackOff: Back-off pulling image"},
		{name: "bootstrap while the containers are being created",
			obs:         observation{statefulSet: &appsv1.StatefulSet{}, pods: []corev1.Pod{pod("c-0", "ContainerCreating", "")}},
			decision:    membership.Decision{Phase: membership.PhaseBootstrapping, Message: "bootstrapping 3 members"},
			progressing: metav1.ConditionTrue, progressingReason: ReasonCreating, degradedReason: ReasonAsExpected, want: "no problems observed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1}}
			c.Spec.Replicas, c.Spec.Version = 3, "3.5.99"
			if tc.before != "" {
				c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Reason: tc.before}}
				c.Status.CurrentVersion = "3.5.17"
			}
			s := computeStatus(c, tc.obs, tc.decision, maintenance.SpaceStep{}, nil, nil, now)
			prog := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing)
			if prog.Status != tc.progressing || prog.Reason != tc.progressingReason {
				t.Errorf("Progressing %s/%s (%s), want %s/%s", prog.Status, prog.Reason, prog.Message, tc.progressing, tc.progressingReason)
			}
			deg := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded)
			wantDegraded := metav1.ConditionTrue
			if tc.degradedReason == ReasonAsExpected {
				wantDegraded = metav1.ConditionFalse
			}
			if deg.Status != wantDegraded || deg.Reason != tc.degradedReason || deg.Message != tc.want {
				t.Errorf("Degraded %s/%s\n%s\nwant %s/%s\n%s", deg.Status, deg.Reason, deg.Message, wantDegraded, tc.degradedReason, tc.want)
			}
		})
	}
}
