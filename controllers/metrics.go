package controllers

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Per-cluster metrics, derived from the status each reconcile computes (docs/metrics.md). Every series
// carries the cluster's namespace and name; the only other labels take a bounded set of values: member
// names (one per member, at most 7 voting members), certificate names, condition types, alarm types,
// versions and the topologies of failure tolerance (node, zone).

const metricsPrefix = "etcd_operator_"

// The controllers' names: the controller label of controller-runtime's metrics (controller_runtime_reconcile_*).
const (
	ClusterControllerName = "etcdcluster"
	BackupControllerName  = "etcdbackup"
)

// Member states of etcd_operator_cluster_members: each member counts once, in the first state that applies.
const (
	memberStateUnknown   = "unknown"
	memberStateUnhealthy = "unhealthy"
	memberStateLearner   = "learner"
	memberStateVoter     = "voter"
)

var (
	clusterLabels = []string{"namespace", "cluster"}

	// metricNames collects every name newClusterDesc is given, so MetricNames cannot drift from the
	// descriptors.
	metricNames []string

	descClusterMembers = newClusterDesc("cluster_members",
		"Members in the cluster's status by state, each counted once in the first state that applies: "+
			"unknown (in etcd but not added by the operator), unhealthy, learner, voter (healthy voting member).",
		append(clusterLabels, "state"), nil)
	descClusterHasLeader = newClusterDesc("cluster_has_leader",
		"1 when a member of the cluster reports itself the raft leader, else 0 (also when etcd cannot be reached).",
		clusterLabels, nil)
	descClusterQuorum = newClusterDesc("cluster_quorum",
		"1 when the cluster's Available condition is True (a quorum of members is healthy), else 0.",
		clusterLabels, nil)
	descClusterCondition = newClusterDesc("cluster_condition",
		"1 when the status condition is True, 0 when False or Unknown; absent conditions have no series.",
		append(clusterLabels, "condition"), nil)
	descClusterConditionSince = newClusterDesc("cluster_condition_last_transition_timestamp_seconds",
		"Unix time the status condition last changed status: time() minus it is how long the cluster has been "+
			"Progressing (scaling, upgrading, healing), Degraded or Available as it is now.",
		append(clusterLabels, "condition"), nil)
	descClusterAlarms = newClusterDesc("cluster_alarms",
		"Active etcd alarms by type (one per member raising it).",
		append(clusterLabels, "alarm"), nil)
	descClusterDBQuota = newClusterDesc("cluster_db_quota_bytes",
		"The members' configured database space quota (spec.etcd.quotaBackendSize, or the default derived from spec.storageSize).",
		clusterLabels, nil)
	descClusterInfo = newClusterDesc("cluster_info",
		"Always 1: the desired etcd version and the version the members report (the lowest, while an upgrade runs).",
		append(clusterLabels, "version", "current_version"), nil)
	descMemberDBSize = newClusterDesc("member_db_size_bytes",
		"Size of the member's backend database file, as last reported by the member.",
		append(clusterLabels, "member"), nil)
	descMemberDBSizeInUse = newClusterDesc("member_db_size_in_use_bytes",
		"Part of the member's database file that holds data, as last reported by the member.",
		append(clusterLabels, "member"), nil)
	descBackupLastSuccess = newClusterDesc("backup_last_success_timestamp_seconds",
		"Unix time the cluster's last successful backup finished.",
		clusterLabels, nil)
	descCertificateExpiry = newClusterDesc("certificate_expiry_timestamp_seconds",
		"Unix time the operator-managed certificate expires.",
		append(clusterLabels, "certificate"), nil)
	descClusterFailuresTolerated = newClusterDesc("cluster_failures_tolerated",
		"How many nodes (topology=node) or zones (topology=zone) may fail at once without costing the cluster's quorum, "+
			"judged from where its healthy voting members run now.",
		append(clusterLabels, "topology"), nil)

	allClusterDescs = []*prometheus.Desc{descClusterMembers, descClusterHasLeader, descClusterQuorum, descClusterCondition, descClusterConditionSince,
		descClusterAlarms, descClusterDBQuota, descClusterInfo, descMemberDBSize, descMemberDBSizeInUse, descBackupLastSuccess,
		descCertificateExpiry, descClusterFailuresTolerated, descMembershipSteps, descMaintenanceSteps}

	// Counters of the steps the operator takes, kept per cluster by the collector (clusterCollector.steps).
	descMembershipSteps = newClusterDesc("membership_steps_total",
		"Membership steps (etcd calls and the pod and claim writes of a replacement) by action and result: "+
			"taken; deferred (etcd refused for now, such as a member added too soon after another, and the step is retried); failed.",
		append(clusterLabels, "action", "result"), nil)
	descMaintenanceSteps = newClusterDesc("maintenance_steps_total",
		"Maintenance steps by kind (Recover: NOSPACE compaction and defragmentation of every member; Disarm; "+
			"Defragment: one member, routinely; SweepDefragment: one member of a scheduled or requested sweep) and result: taken or failed.",
		append(clusterLabels, "step", "result"), nil)

	// metricConditions are the condition types exported, in order.
	metricConditions = []string{etcdv1beta1.ConditionAvailable, etcdv1beta1.ConditionProgressing,
		etcdv1beta1.ConditionDegraded, etcdv1beta1.ConditionBackupSucceeded, etcdv1beta1.ConditionSpread}
	// metricAlarms are the alarm types always exported (zero when none is active).
	metricAlarms = []etcd.AlarmType{etcd.AlarmNoSpace, etcd.AlarmCorrupt}
)

// newClusterDesc creates the descriptor of the operator metric etcd_operator_<name> and records its name.
func newClusterDesc(name, help string, labels []string, constLabels prometheus.Labels) *prometheus.Desc {
	metricNames = append(metricNames, metricsPrefix+name)
	return prometheus.NewDesc(metricsPrefix+name, help, labels, constLabels)
}

// MetricNames returns the name of every metric the operator exports for its clusters (docs/metrics.md),
// for checks of queries and alerting rules that refer to them.
func MetricNames() []string {
	return slices.Clone(metricNames)
}

// clusterMetrics derives the cluster's series from c's status (and the database quota from its spec). It is
// pure: no API calls, no clock.
func clusterMetrics(c *etcdv1beta1.EtcdCluster) []prometheus.Metric {
	ns, name := c.Namespace, c.Name
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{ns, name}, labels...)...))
	}
	st := &c.Status

	counts := map[string]int{}
	leader := false
	for _, m := range st.Members {
		switch {
		case m.Unknown:
			counts[memberStateUnknown]++
		case !m.Healthy:
			counts[memberStateUnhealthy]++
		case m.Learner:
			counts[memberStateLearner]++
		default:
			counts[memberStateVoter]++
		}
		leader = leader || m.Leader
	}
	for _, s := range []string{memberStateVoter, memberStateLearner, memberStateUnhealthy, memberStateUnknown} {
		gauge(descClusterMembers, float64(counts[s]), s)
	}
	gauge(descClusterHasLeader, boolValue(leader))
	gauge(descClusterQuorum, boolValue(meta.IsStatusConditionTrue(st.Conditions, etcdv1beta1.ConditionAvailable)))
	for _, t := range metricConditions {
		if cond := meta.FindStatusCondition(st.Conditions, t); cond != nil {
			gauge(descClusterCondition, boolValue(cond.Status == metav1.ConditionTrue), t)
			if !cond.LastTransitionTime.IsZero() {
				gauge(descClusterConditionSince, unixSeconds(cond.LastTransitionTime), t)
			}
		}
	}

	alarms := map[string]int{}
	for _, a := range st.Alarms {
		typ, _, _ := strings.Cut(a, " on ")
		alarms[typ]++
	}
	for _, t := range metricAlarms {
		gauge(descClusterAlarms, float64(alarms[string(t)]), string(t))
	}
	gauge(descClusterDBQuota, float64(resources.QuotaBackendBytes(c)))
	gauge(descClusterInfo, 1, c.Spec.Version, st.CurrentVersion)

	for _, m := range st.Members {
		// A member that did not answer this reconcile's status request (or every member, while etcd
		// cannot be reached) has no size: zero is not a size a database file has.
		if m.DBSizeBytes > 0 {
			gauge(descMemberDBSize, float64(m.DBSizeBytes), m.Name)
			gauge(descMemberDBSizeInUse, float64(m.DBSizeInUseBytes), m.Name)
		}
	}
	if st.LastBackupTime != nil {
		gauge(descBackupLastSuccess, unixSeconds(*st.LastBackupTime))
	}
	if st.TLS != nil {
		for _, cert := range st.TLS.Certificates {
			gauge(descCertificateExpiry, unixSeconds(cert.NotAfter), cert.Name)
		}
	}
	if ft := st.FailureTolerance; ft != nil {
		gauge(descClusterFailuresTolerated, float64(ft.Nodes), topologyNode)
		gauge(descClusterFailuresTolerated, float64(ft.Zones), topologyZone)
	}
	return out
}

// Values of etcd_operator_cluster_failures_tolerated's topology label.
const (
	topologyNode = "node"
	topologyZone = "zone"
)

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t metav1.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// Results of the step counters.
const (
	stepTaken    = "taken"
	stepDeferred = "deferred"
	stepFailed   = "failed"
)

// clusterCollector is a prometheus.Collector of the series of every cluster the reconciler last reported:
// each report replaces the cluster's series (so those of a member that left disappear), and a deleted
// cluster's are forgotten, its step counters with them. A nil collector does nothing. It keeps of each
// cluster only what its series are derived from (metricsView) and builds them at each scrape: built series
// took ten times the memory (about 9 MiB at 1,000 clusters).
type clusterCollector struct {
	mu       sync.Mutex
	clusters map[types.NamespacedName]*etcdv1beta1.EtcdCluster
	// steps counts membership and maintenance steps per cluster: counters, so they live here rather than
	// in the status the gauges are derived from.
	steps map[stepKey]float64
}

// stepKey is one series of the step counters.
type stepKey struct {
	cluster      types.NamespacedName
	desc         *prometheus.Desc
	kind, result string
}

func newClusterCollector() *clusterCollector {
	return &clusterCollector{clusters: map[types.NamespacedName]*etcdv1beta1.EtcdCluster{}, steps: map[stepKey]float64{}}
}

// countMembershipStep counts a membership step of action on c with its result.
func (cc *clusterCollector) countMembershipStep(c *etcdv1beta1.EtcdCluster, action, result string) {
	cc.count(stepKey{types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, descMembershipSteps, action, result})
}

// countMaintenanceStep counts a maintenance step of kind on c with its result.
func (cc *clusterCollector) countMaintenanceStep(c *etcdv1beta1.EtcdCluster, kind, result string) {
	cc.count(stepKey{types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, descMaintenanceSteps, kind, result})
}

func (cc *clusterCollector) count(k stepKey) {
	if cc == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.steps[k]++
}

// observe replaces c's series with those of its current status.
func (cc *clusterCollector) observe(c *etcdv1beta1.EtcdCluster) {
	if cc == nil {
		return
	}
	view := metricsView(c)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.clusters[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = view
}

// metricsView is the part of c that clusterMetrics reads (condition messages, member URLs and the rest of
// the spec and status left out), copied so that nothing of the reconciler's object stays referenced.
func metricsView(c *etcdv1beta1.EtcdCluster) *etcdv1beta1.EtcdCluster {
	v := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	v.Spec.Version, v.Spec.StorageSize = c.Spec.Version, c.Spec.StorageSize.DeepCopy()
	if q := c.Spec.Etcd.QuotaBackendSize; q != nil {
		v.Spec.Etcd.QuotaBackendSize = ptr.To(q.DeepCopy())
	}
	st, vs := &c.Status, &v.Status
	vs.CurrentVersion, vs.Alarms = st.CurrentVersion, slices.Clone(st.Alarms)
	if st.LastBackupTime != nil {
		vs.LastBackupTime = st.LastBackupTime.DeepCopy()
	}
	for _, m := range st.Members {
		vs.Members = append(vs.Members, etcdv1beta1.MemberStatus{Name: m.Name, Unknown: m.Unknown, Healthy: m.Healthy, Learner: m.Learner,
			Leader: m.Leader, DBSizeBytes: m.DBSizeBytes, DBSizeInUseBytes: m.DBSizeInUseBytes})
	}
	for _, cond := range st.Conditions {
		vs.Conditions = append(vs.Conditions, metav1.Condition{Type: cond.Type, Status: cond.Status, LastTransitionTime: cond.LastTransitionTime})
	}
	if st.FailureTolerance != nil {
		vs.FailureTolerance = st.FailureTolerance.DeepCopy()
	}
	if st.TLS != nil {
		vs.TLS = &etcdv1beta1.TLSStatus{}
		for _, cert := range st.TLS.Certificates {
			vs.TLS.Certificates = append(vs.TLS.Certificates, etcdv1beta1.CertificateStatus{Name: cert.Name, NotAfter: cert.NotAfter})
		}
	}
	return v
}

// forget drops the series of a cluster that is gone or being deleted.
func (cc *clusterCollector) forget(key types.NamespacedName) {
	if cc == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	delete(cc.clusters, key)
	for k := range cc.steps {
		if k.cluster == key {
			delete(cc.steps, k)
		}
	}
}

// Describe implements prometheus.Collector.
func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allClusterDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	cc.mu.Lock()
	// A stored view is never changed (observe replaces it), so the series are built outside the lock.
	views := make([]*etcdv1beta1.EtcdCluster, 0, len(cc.clusters))
	for _, view := range cc.clusters {
		views = append(views, view)
	}
	counters := make([]prometheus.Metric, 0, len(cc.steps))
	for k, v := range cc.steps {
		counters = append(counters, prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, v,
			k.cluster.Namespace, k.cluster.Name, k.kind, k.result))
	}
	cc.mu.Unlock()
	for _, view := range views {
		for _, m := range clusterMetrics(view) {
			ch <- m
		}
	}
	for _, m := range counters {
		ch <- m
	}
}

// registerClusterCollector registers cc with reg and returns the collector the reconciler reports to: cc,
// or the one an earlier Setup in the same process registered (managers of other namespaces in tests, or a
// restarted manager), which then holds the clusters of every reconciler.
func registerClusterCollector(reg prometheus.Registerer, cc *clusterCollector) (*clusterCollector, error) {
	err := reg.Register(cc)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(*clusterCollector); ok {
			return existing, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return cc, nil
}
