package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

var metricsEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// metricsCluster is a cluster with a leader, a healthy voter, a learner catching up, an unhealthy voter
// and a member the operator did not add; TLS certificates and a successful backup; voters sharing a zone.
func metricsCluster(ns, name string) *etcdv1beta1.EtcdCluster {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(metricsEpoch.Add(d)) }
	backup := at(-time.Hour)
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 3, StorageSize: resource.MustParse("8Gi"),
			Etcd: etcdv1beta1.EtcdSettingsSpec{QuotaBackendSize: ptr.To(resource.MustParse("2Gi"))}},
		Status: etcdv1beta1.EtcdClusterStatus{
			CurrentVersion: "3.5.34",
			Conditions: []metav1.Condition{
				{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonQuorumHealthy},
				{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Upgrading"},
				{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionUnknown, Reason: "Unknown"},
				{Type: etcdv1beta1.ConditionSpread, Status: metav1.ConditionFalse, Reason: ReasonVotersShareZone},
			},
			FailureTolerance: &etcdv1beta1.FailureTolerance{Nodes: 1},
			Members: []etcdv1beta1.MemberStatus{
				{Name: name + "-0", ID: "8e9e05c52164694d", Leader: true, Healthy: true, DBSizeBytes: 4096, DBSizeInUseBytes: 2048},
				{Name: name + "-1", ID: "91bc3c398fb3c146", Healthy: true, DBSizeBytes: 8192, DBSizeInUseBytes: 1024},
				{Name: name + "-2", ID: "fd422379fda50e48", Healthy: false},
				{Name: name + "-3", ID: "1a2b3c4d5e6f7a8b", Learner: true, Healthy: true, DBSizeBytes: 4096, DBSizeInUseBytes: 4096},
				{Name: "stranger", ID: "aaaaaaaaaaaaaaaa", Healthy: true, Unknown: true, DBSizeBytes: 100, DBSizeInUseBytes: 50},
			},
			Alarms:         []string{"NOSPACE on " + name + "-0", "NOSPACE on " + name + "-1"},
			LastBackupTime: &backup,
			TLS: &etcdv1beta1.TLSStatus{Enabled: true, Certificates: []etcdv1beta1.CertificateStatus{
				{Name: "ca", SecretName: name + "-ca", NotAfter: at(10 * 365 * 24 * time.Hour)},
				{Name: "server", SecretName: name + "-server", NotAfter: at(90 * 24 * time.Hour)},
			}},
		},
	}
}

func TestClusterMetrics(t *testing.T) {
	cc := newClusterCollector()
	c := metricsCluster("prod", "main")
	cc.observe(c)

	const want = `
# HELP etcd_operator_backup_last_success_timestamp_seconds Unix time the cluster's last successful backup finished.
# TYPE etcd_operator_backup_last_success_timestamp_seconds gauge
etcd_operator_backup_last_success_timestamp_seconds{cluster="main",namespace="prod"} 1.7723628e+09
# HELP etcd_operator_certificate_expiry_timestamp_seconds Unix time the operator-managed certificate expires.
# TYPE etcd_operator_certificate_expiry_timestamp_seconds gauge
etcd_operator_certificate_expiry_timestamp_seconds{certificate="ca",cluster="main",namespace="prod"} 2.0877264e+09
etcd_operator_certificate_expiry_timestamp_seconds{certificate="server",cluster="main",namespace="prod"} 1.7801424e+09
# HELP etcd_operator_cluster_alarms Active etcd alarms by type (one per member raising it).
# TYPE etcd_operator_cluster_alarms gauge
etcd_operator_cluster_alarms{alarm="CORRUPT",cluster="main",namespace="prod"} 0
etcd_operator_cluster_alarms{alarm="NOSPACE",cluster="main",namespace="prod"} 2
# HELP etcd_operator_cluster_condition 1 when the status condition is True, 0 when False or Unknown; absent conditions have no series.
# TYPE etcd_operator_cluster_condition gauge
etcd_operator_cluster_condition{cluster="main",condition="Available",namespace="prod"} 1
etcd_operator_cluster_condition{cluster="main",condition="Degraded",namespace="prod"} 0
etcd_operator_cluster_condition{cluster="main",condition="Progressing",namespace="prod"} 1
etcd_operator_cluster_condition{cluster="main",condition="Spread",namespace="prod"} 0
# HELP etcd_operator_cluster_db_quota_bytes The members' configured database space quota (spec.etcd.quotaBackendSize, or the default derived from spec.storageSize).
# TYPE etcd_operator_cluster_db_quota_bytes gauge
etcd_operator_cluster_db_quota_bytes{cluster="main",namespace="prod"} 2.147483648e+09
# HELP etcd_operator_cluster_failures_tolerated How many nodes (topology=node) or zones (topology=zone) may fail at once without costing the cluster's quorum, judged from where its healthy voting members run now.
# TYPE etcd_operator_cluster_failures_tolerated gauge
etcd_operator_cluster_failures_tolerated{cluster="main",namespace="prod",topology="node"} 1
etcd_operator_cluster_failures_tolerated{cluster="main",namespace="prod",topology="zone"} 0
# HELP etcd_operator_cluster_has_leader 1 when a member of the cluster reports itself the raft leader, else 0 (also when etcd cannot be reached).
# TYPE etcd_operator_cluster_has_leader gauge
etcd_operator_cluster_has_leader{cluster="main",namespace="prod"} 1
# HELP etcd_operator_cluster_info Always 1: the desired etcd version and the version the members report (the lowest, while an upgrade runs).
# TYPE etcd_operator_cluster_info gauge
etcd_operator_cluster_info{cluster="main",current_version="3.5.34",namespace="prod",version="3.5.35"} 1
# HELP etcd_operator_cluster_members Members in the cluster's status by state, each counted once in the first state that applies: unknown (in etcd but not added by the operator), unhealthy, learner, voter (healthy voting member).
# TYPE etcd_operator_cluster_members gauge
etcd_operator_cluster_members{cluster="main",namespace="prod",state="learner"} 1
etcd_operator_cluster_members{cluster="main",namespace="prod",state="unhealthy"} 1
etcd_operator_cluster_members{cluster="main",namespace="prod",state="unknown"} 1
etcd_operator_cluster_members{cluster="main",namespace="prod",state="voter"} 2
# HELP etcd_operator_cluster_quorum 1 when the cluster's Available condition is True (a quorum of members is healthy), else 0.
# TYPE etcd_operator_cluster_quorum gauge
etcd_operator_cluster_quorum{cluster="main",namespace="prod"} 1
# HELP etcd_operator_member_db_size_bytes Size of the member's backend database file, as last reported by the member.
# TYPE etcd_operator_member_db_size_bytes gauge
etcd_operator_member_db_size_bytes{cluster="main",member="main-0",namespace="prod"} 4096
etcd_operator_member_db_size_bytes{cluster="main",member="main-1",namespace="prod"} 8192
etcd_operator_member_db_size_bytes{cluster="main",member="main-3",namespace="prod"} 4096
etcd_operator_member_db_size_bytes{cluster="main",member="stranger",namespace="prod"} 100
# HELP etcd_operator_member_db_size_in_use_bytes Part of the member's database file that holds data, as last reported by the member.
# TYPE etcd_operator_member_db_size_in_use_bytes gauge
etcd_operator_member_db_size_in_use_bytes{cluster="main",member="main-0",namespace="prod"} 2048
etcd_operator_member_db_size_in_use_bytes{cluster="main",member="main-1",namespace="prod"} 1024
etcd_operator_member_db_size_in_use_bytes{cluster="main",member="main-3",namespace="prod"} 4096
etcd_operator_member_db_size_in_use_bytes{cluster="main",member="stranger",namespace="prod"} 50
`
	if err := testutil.CollectAndCompare(cc, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// The collector is consistent with what it describes (a registry checks every series against it).
	if problems, err := testutil.CollectAndLint(cc); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestClusterMetricsFollowStatus: each report replaces the cluster's series, so a member that left and a
// condition or certificate that is gone take their series with them; other clusters keep theirs; a
// forgotten cluster has none left.
func TestClusterMetricsFollowStatus(t *testing.T) {
	cc := newClusterCollector()
	main, other := metricsCluster("prod", "main"), metricsCluster("dev", "other")
	cc.observe(main)
	cc.observe(other)
	if n := testutil.CollectAndCount(cc, "etcd_operator_member_db_size_bytes"); n != 8 {
		t.Fatalf("%d member size series for two clusters of 4 reporting members, want 8", n)
	}

	// Quorum lost: the leader and main-1 left, main-2 recovered without a leader, no TLS, no backup yet.
	lost := main.DeepCopy()
	lost.Status.Members = []etcdv1beta1.MemberStatus{{Name: "main-2", Healthy: true, DBSizeBytes: 1 << 20, DBSizeInUseBytes: 1 << 19}}
	lost.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: "QuorumLost"}}
	lost.Status.TLS, lost.Status.LastBackupTime, lost.Status.Alarms, lost.Status.FailureTolerance = nil, nil, nil, nil
	cc.observe(lost)

	const want = `
# HELP etcd_operator_member_db_size_bytes Size of the member's backend database file, as last reported by the member.
# TYPE etcd_operator_member_db_size_bytes gauge
etcd_operator_member_db_size_bytes{cluster="main",member="main-2",namespace="prod"} 1.048576e+06
etcd_operator_member_db_size_bytes{cluster="other",member="other-0",namespace="dev"} 4096
etcd_operator_member_db_size_bytes{cluster="other",member="other-1",namespace="dev"} 8192
etcd_operator_member_db_size_bytes{cluster="other",member="other-3",namespace="dev"} 4096
etcd_operator_member_db_size_bytes{cluster="other",member="stranger",namespace="dev"} 100
# HELP etcd_operator_cluster_quorum 1 when the cluster's Available condition is True (a quorum of members is healthy), else 0.
# TYPE etcd_operator_cluster_quorum gauge
etcd_operator_cluster_quorum{cluster="main",namespace="prod"} 0
etcd_operator_cluster_quorum{cluster="other",namespace="dev"} 1
# HELP etcd_operator_cluster_has_leader 1 when a member of the cluster reports itself the raft leader, else 0 (also when etcd cannot be reached).
# TYPE etcd_operator_cluster_has_leader gauge
etcd_operator_cluster_has_leader{cluster="main",namespace="prod"} 0
etcd_operator_cluster_has_leader{cluster="other",namespace="dev"} 1
# HELP etcd_operator_cluster_condition 1 when the status condition is True, 0 when False or Unknown; absent conditions have no series.
# TYPE etcd_operator_cluster_condition gauge
etcd_operator_cluster_condition{cluster="main",condition="Available",namespace="prod"} 0
etcd_operator_cluster_condition{cluster="other",condition="Available",namespace="dev"} 1
etcd_operator_cluster_condition{cluster="other",condition="Degraded",namespace="dev"} 0
etcd_operator_cluster_condition{cluster="other",condition="Progressing",namespace="dev"} 1
etcd_operator_cluster_condition{cluster="other",condition="Spread",namespace="dev"} 0
# HELP etcd_operator_cluster_members Members in the cluster's status by state, each counted once in the first state that applies: unknown (in etcd but not added by the operator), unhealthy, learner, voter (healthy voting member).
# TYPE etcd_operator_cluster_members gauge
etcd_operator_cluster_members{cluster="main",namespace="prod",state="learner"} 0
etcd_operator_cluster_members{cluster="main",namespace="prod",state="unhealthy"} 0
etcd_operator_cluster_members{cluster="main",namespace="prod",state="unknown"} 0
etcd_operator_cluster_members{cluster="main",namespace="prod",state="voter"} 1
etcd_operator_cluster_members{cluster="other",namespace="dev",state="learner"} 1
etcd_operator_cluster_members{cluster="other",namespace="dev",state="unhealthy"} 1
etcd_operator_cluster_members{cluster="other",namespace="dev",state="unknown"} 1
etcd_operator_cluster_members{cluster="other",namespace="dev",state="voter"} 2
`
	if err := testutil.CollectAndCompare(cc, strings.NewReader(want), "etcd_operator_member_db_size_bytes",
		"etcd_operator_cluster_quorum", "etcd_operator_cluster_has_leader", "etcd_operator_cluster_condition",
		"etcd_operator_cluster_members"); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{
		"etcd_operator_certificate_expiry_timestamp_seconds":  2, // other's only
		"etcd_operator_backup_last_success_timestamp_seconds": 1,
		"etcd_operator_member_db_size_in_use_bytes":           5,
		"etcd_operator_cluster_failures_tolerated":            2, // other's only
	} {
		if got := testutil.CollectAndCount(cc, name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}

	cc.forget(types.NamespacedName{Namespace: "dev", Name: "other"})
	cc.forget(types.NamespacedName{Namespace: "prod", Name: "main"})
	if n := testutil.CollectAndCount(cc); n != 0 {
		t.Fatalf("%d series left after both clusters were forgotten", n)
	}
}

// TestStepCounters: steps count per cluster, action and result, and go with their cluster.
func TestStepCounters(t *testing.T) {
	cc := newClusterCollector()
	main, other := metricsCluster("prod", "main"), metricsCluster("dev", "other")
	cc.countMembershipStep(main, "AddLearner", stepDeferred)
	cc.countMembershipStep(main, "AddLearner", stepTaken)
	cc.countMembershipStep(main, "AddLearner", stepTaken)
	cc.countMembershipStep(other, "Remove", stepFailed)
	cc.countMaintenanceStep(main, "Defragment", stepTaken)
	const want = `
# HELP etcd_operator_membership_steps_total Membership steps (etcd calls and the pod and claim writes of a replacement) by action and result: taken; deferred (etcd refused for now, such as a member added too soon after another, and the step is retried); failed.
# TYPE etcd_operator_membership_steps_total counter
etcd_operator_membership_steps_total{action="AddLearner",cluster="main",namespace="prod",result="deferred"} 1
etcd_operator_membership_steps_total{action="AddLearner",cluster="main",namespace="prod",result="taken"} 2
etcd_operator_membership_steps_total{action="Remove",cluster="other",namespace="dev",result="failed"} 1
# HELP etcd_operator_maintenance_steps_total Maintenance steps by kind (Recover: NOSPACE compaction and defragmentation of every member; Disarm; Defragment: one member, routinely; SweepDefragment: one member of a scheduled or requested sweep) and result: taken or failed.
# TYPE etcd_operator_maintenance_steps_total counter
etcd_operator_maintenance_steps_total{cluster="main",namespace="prod",result="taken",step="Defragment"} 1
`
	if err := testutil.CollectAndCompare(cc, strings.NewReader(want), "etcd_operator_membership_steps_total",
		"etcd_operator_maintenance_steps_total"); err != nil {
		t.Fatal(err)
	}
	// A status report replaces the cluster's gauges, never its counters.
	cc.observe(main)
	if n := testutil.CollectAndCount(cc, "etcd_operator_membership_steps_total"); n != 3 {
		t.Errorf("%d membership step series after a status report, want 3", n)
	}
	cc.forget(types.NamespacedName{Namespace: "prod", Name: "main"})
	if n := testutil.CollectAndCount(cc, "etcd_operator_membership_steps_total", "etcd_operator_maintenance_steps_total"); n != 1 {
		t.Errorf("%d step series after main was forgotten, want other's 1", n)
	}
	if problems, err := testutil.CollectAndLint(cc); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	var nilCollector *clusterCollector
	nilCollector.countMembershipStep(main, "Promote", stepTaken) // a reconciler without metrics
}

// TestConditionTransitionTimes: each condition's last transition is exported, so time() minus it says how
// long a cluster has been Progressing or Degraded; a condition without a transition time has no series.
func TestConditionTransitionTimes(t *testing.T) {
	cc := newClusterCollector()
	c := metricsCluster("prod", "main")
	c.Status.Conditions[1].LastTransitionTime = metav1.NewTime(metricsEpoch.Add(-90 * time.Second))
	cc.observe(c)
	const want = `
# HELP etcd_operator_cluster_condition_last_transition_timestamp_seconds Unix time the status condition last changed status: time() minus it is how long the cluster has been Progressing (scaling, upgrading, healing), Degraded or Available as it is now.
# TYPE etcd_operator_cluster_condition_last_transition_timestamp_seconds gauge
etcd_operator_cluster_condition_last_transition_timestamp_seconds{cluster="main",condition="Progressing",namespace="prod"} 1.77236631e+09
`
	if err := testutil.CollectAndCompare(cc, strings.NewReader(want), "etcd_operator_cluster_condition_last_transition_timestamp_seconds"); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMetricsBeforeFirstObservation: a new cluster reports no member and no leader, and only the
// series its status can back.
func TestClusterMetricsBeforeFirstObservation(t *testing.T) {
	cc := newClusterCollector()
	cc.observe(&etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.6.7", StorageSize: resource.MustParse("10Gi")}})
	const want = `
# HELP etcd_operator_cluster_db_quota_bytes The members' configured database space quota (spec.etcd.quotaBackendSize, or the default derived from spec.storageSize).
# TYPE etcd_operator_cluster_db_quota_bytes gauge
etcd_operator_cluster_db_quota_bytes{cluster="new",namespace="ns"} 4.294967296e+09
# HELP etcd_operator_cluster_quorum 1 when the cluster's Available condition is True (a quorum of members is healthy), else 0.
# TYPE etcd_operator_cluster_quorum gauge
etcd_operator_cluster_quorum{cluster="new",namespace="ns"} 0
# HELP etcd_operator_cluster_info Always 1: the desired etcd version and the version the members report (the lowest, while an upgrade runs).
# TYPE etcd_operator_cluster_info gauge
etcd_operator_cluster_info{cluster="new",current_version="",namespace="ns",version="3.6.7"} 1
`
	if err := testutil.CollectAndCompare(cc, strings.NewReader(want), "etcd_operator_cluster_db_quota_bytes",
		"etcd_operator_cluster_quorum", "etcd_operator_cluster_info"); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{
		"etcd_operator_cluster_members":                       4,
		"etcd_operator_cluster_condition":                     0,
		"etcd_operator_member_db_size_bytes":                  0,
		"etcd_operator_backup_last_success_timestamp_seconds": 0,
		"etcd_operator_certificate_expiry_timestamp_seconds":  0,
		"etcd_operator_cluster_failures_tolerated":            0,
	} {
		if got := testutil.CollectAndCount(cc, name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
}

// TestClusterCollectorRegistration: a second Setup in one process (another manager, or a restarted one)
// reports to the collector already registered, so the registry serves every reconciler's clusters, once.
func TestClusterCollectorRegistration(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, err := registerClusterCollector(reg, newClusterCollector())
	if err != nil {
		t.Fatal(err)
	}
	second, err := registerClusterCollector(reg, newClusterCollector())
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatal("a second registration got a collector the registry does not serve")
	}
	first.observe(metricsCluster("a", "one"))
	second.observe(metricsCluster("b", "two"))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var clusters []string
	for _, mf := range families {
		if mf.GetName() != "etcd_operator_cluster_quorum" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" {
					clusters = append(clusters, l.GetValue())
				}
			}
		}
	}
	if strings.Join(clusters, ",") != "one,two" {
		t.Fatalf("registry serves clusters %v, want [one two]", clusters)
	}
	// A registry already serving another metric of one of these names refuses the collector.
	other := prometheus.NewPedanticRegistry()
	other.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcd_operator_cluster_quorum", Help: "other"}, clusterLabels))
	if _, err := registerClusterCollector(other, newClusterCollector()); err == nil {
		t.Fatal("a conflicting collector was registered")
	}
}

// TestReconcileReportsAndForgetsMetrics: the reconcile reports what it wrote in status, even when it
// cannot observe the cluster, and forgets a cluster that is gone.
func TestReconcileReportsAndForgetsMetrics(t *testing.T) {
	scheme := testScheme(t)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 2},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 3, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(false)}}}
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue,
		Reason: ReasonQuorumHealthy, LastTransitionTime: metav1.Now()}}
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "c-0", Leader: true, Healthy: true, DBSizeBytes: 1 << 20}}
	boom := errors.New("the API server refused to list pods")
	cl := clientRefusingPodLists(scheme, c, boom)
	r := &EtcdClusterReconciler{Client: cl, Recorder: &events.FakeRecorder{}, Options: resources.DefaultOptions(),
		metrics: newClusterCollector()}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	if _, err := r.Reconcile(context.Background(), req); !errors.Is(err, boom) {
		t.Fatalf("reconcile error %v, want the observation's", err)
	}
	const want = `
# HELP etcd_operator_cluster_condition 1 when the status condition is True, 0 when False or Unknown; absent conditions have no series.
# TYPE etcd_operator_cluster_condition gauge
etcd_operator_cluster_condition{cluster="c",condition="Available",namespace="ns"} 1
etcd_operator_cluster_condition{cluster="c",condition="Degraded",namespace="ns"} 1
etcd_operator_cluster_condition{cluster="c",condition="Progressing",namespace="ns"} 1
# HELP etcd_operator_member_db_size_bytes Size of the member's backend database file, as last reported by the member.
# TYPE etcd_operator_member_db_size_bytes gauge
etcd_operator_member_db_size_bytes{cluster="c",member="c-0",namespace="ns"} 1.048576e+06
`
	if err := testutil.CollectAndCompare(r.metrics, strings.NewReader(want), "etcd_operator_cluster_condition",
		"etcd_operator_member_db_size_bytes"); err != nil {
		t.Fatal(err)
	}

	if err := cl.Delete(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(r.metrics); n != 0 {
		t.Fatalf("%d series left for a deleted cluster", n)
	}
}

// registrySeries counts the series of c that controller-runtime's registry (what the manager's metrics
// endpoint serves) holds under the metric name, or under any of the operator's metrics for "".
func registrySeries(name string, c *etcdv1beta1.EtcdCluster) int {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return -1
	}
	n := 0
	for _, mf := range families {
		if name != "" && mf.GetName() != name || !strings.HasPrefix(mf.GetName(), metricsPrefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == c.Namespace && labels["cluster"] == c.Name {
				n++
			}
		}
	}
	return n
}

// TestMetricsViewKeepsEverySeries: the collector keeps only a view of each cluster and builds the series
// at each scrape; the view must yield exactly the cluster's own series, with nothing of the cluster shared.
func TestMetricsViewKeepsEverySeries(t *testing.T) {
	c := metricsCluster("ns", "prod")
	c.Status.Conditions[0].LastTransitionTime = metav1.NewTime(metricsEpoch.Add(-time.Minute))
	series := func(c *etcdv1beta1.EtcdCluster) []string {
		var out []string
		for _, m := range clusterMetrics(c) {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Desc().String()+" "+pb.String())
		}
		return out
	}
	view := metricsView(c)
	if got, want := series(view), series(c); !slices.Equal(got, want) {
		t.Fatalf("series of the view:\n%s\nwant those of the cluster:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c.Status.Members[0].DBSizeBytes, c.Status.Alarms[0] = 1, "CORRUPT on prod-0"
	if view.Status.Members[0].DBSizeBytes != 4096 || view.Status.Alarms[0] != "NOSPACE on prod-0" {
		t.Fatal("the view shares the cluster's status: a later change of the reconciler's object shows in it")
	}
}
