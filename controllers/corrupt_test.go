package controllers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// probeGet asks member i's health endpoint path as the kubelet would and reports whether it passed.
func probeGet(t *testing.T, procs *etcdtest.Cluster, i int, path string) bool {
	t.Helper()
	resp, err := http.Get(procs.ClientURL(i) + path)
	if err != nil {
		t.Fatalf("GET %s on member %d: %v", path, i, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestCorruptAlarmCountsOnlyAgainstTheAlarmedMember: etcd lists every active alarm in every member's status
// errors and fails every member's /health on any of them. With a CORRUPT alarm raised against one member of
// three (real etcd), the operator counts the other two healthy (quorum holds, the alarmed member can be
// replaced), reports the alarmed member, disarms nothing, and the liveness and startup probes still pass,
// so the kubelet restarts no member.
func TestCorruptAlarmCountsOnlyAgainstTheAlarmedMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	procs := etcdtest.StartStatic(t, "corrupt", 3, nil)
	cli := procs.Client(t, nil, 0, 1, 2)
	ecli, err := etcd.NewDialer(5*time.Second).Dial(ctx, []string{procs.ClientURL(0), procs.ClientURL(1), procs.ClientURL(2)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ecli.Close() }()
	members, err := ecli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ordinal := map[uint64]int{}
	var corruptID uint64
	for _, m := range members {
		for i := range 3 {
			if m.Name == procs.MemberName(i) {
				ordinal[m.ID] = i
			}
		}
		if m.Name == procs.MemberName(1) {
			corruptID = m.ID
		}
	}

	// Raised as etcd's hash check raises it, through the maintenance API (clientv3 only lists and disarms).
	if _, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: corruptID, Alarm: pb.AlarmType_CORRUPT}); err != nil {
		t.Fatalf("raise CORRUPT: %v", err)
	}
	statuses := map[uint64]etcd.EndpointStatus{}
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range members {
		for {
			st, err := ecli.Status(ctx, procs.ClientURL(ordinal[m.ID]))
			if err == nil && strings.Contains(strings.Join(st.Errors, ","), "CORRUPT") {
				statuses[m.ID] = st
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %s does not report the CORRUPT alarm: %+v, %v", m.Name, st, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "corrupt", Generation: 1}}
	c.Spec.Replicas = 3
	c.Spec.Version = "3.5.35"
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonQuorumHealthy}}
	tpl := resources.StatefulSet(c, 3, resources.DefaultOptions(), nil, resources.MemberGate{}).Spec.Template.Spec
	var liveness, startup, readiness string
	for _, ctr := range tpl.Containers {
		if *ctr.Name == "etcd" {
			liveness, startup, readiness = *ctr.LivenessProbe.HTTPGet.Path, *ctr.StartupProbe.HTTPGet.Path, *ctr.ReadinessProbe.HTTPGet.Path
		}
	}
	if liveness == "" || startup == "" || readiness == "" {
		t.Fatal("no etcd container with probes in the template")
	}

	obs := observation{reachable: true, statefulSet: &appsv1.StatefulSet{}, members: members, podByOrdinal: map[int]*corev1.Pod{},
		ordinals: ordinal, statuses: statuses, healthy: map[uint64]bool{}, electing: map[uint64]bool{}}
	if obs.alarms, err = ecli.Alarms(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		i := ordinal[m.ID]
		for _, p := range []struct{ kind, path string }{
			{"liveness", liveness}, {"startup", startup}} {
			if !probeGet(t, procs, i, p.path) {
				t.Errorf("the %s probe %s fails on member %s under a CORRUPT alarm: the kubelet would restart it", p.kind, p.path, m.Name)
			}
		}
		// The readiness probe fails on every member (etcd's /health and /readyz fail on any CORRUPT alarm).
		ready := probeGet(t, procs, i, readiness)
		pod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
		if ready {
			pod.Status.Conditions[0].Status = corev1.ConditionTrue
		}
		obs.podByOrdinal[i] = pod
		obs.pods = append(obs.pods, *pod)
		obs.healthy[m.ID], obs.electing[m.ID] = memberHealth(m, statuses[m.ID], ready)
		if want := m.ID != corruptID; obs.healthy[m.ID] != want {
			t.Errorf("member %s healthy=%v, want %v (status errors %v, ready %v)", m.Name, obs.healthy[m.ID], want, statuses[m.ID].Errors, ready)
		}
	}

	now := time.Now()
	for _, m := range obs.planInput(c, now, 3*time.Minute).Members {
		if want := m.ID != corruptID; m.Healthy != want {
			t.Errorf("the planner sees member %s healthy=%v, want %v: the alarmed member's replacement needs the others healthy", m.Name, m.Healthy, want)
		}
	}
	space, _ := planMaintenance(c, obs, maintenance.RecoveryProgress{})
	if space.Kind != maintenance.SpaceNone || len(space.Alarms) != 0 {
		t.Errorf("maintenance step %q on %v for a CORRUPT alarm, want none: CORRUPT is never disarmed", space.Kind, space.Alarms)
	}
	s := computeStatus(c, obs, membership.Decision{Phase: membership.PhaseStable}, space, nil, nil, now)
	if a := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue ||
		!strings.Contains(a.Message, "2 of 3") {
		t.Errorf("Available %+v, want True with 2 of 3 voting members healthy", a)
	}
	if d := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded); d == nil || d.Reason != ReasonDataCorrupt ||
		!strings.Contains(d.Message, "CORRUPT on "+procs.MemberName(1)) {
		t.Errorf("Degraded %+v, want %s naming %s", d, ReasonDataCorrupt, procs.MemberName(1))
	}

	// Nothing disarmed it.
	alarms, err := ecli.Alarms(ctx)
	if err != nil || len(alarms) != 1 || alarms[0].Type != etcd.AlarmCorrupt || alarms[0].MemberID != corruptID {
		t.Errorf("alarms %v (%v), want the CORRUPT alarm of member %x still raised", alarms, err, corruptID)
	}
}
