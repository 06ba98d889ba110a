package kubectlplugin

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// now is the fixed "now" of the golden files.
var now = time.Date(2026, 11, 24, 14, 30, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func cond(typ string, status metav1.ConditionStatus, reason, msg string, since time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: ago(since)}
}

const mib = 1 << 20

// healthyCluster is a 3-member TLS cluster with scheduled backups, everything in order.
func healthyCluster() *etcdv1beta1.EtcdCluster {
	created := ago(72 * time.Hour)
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: "etcd-prod", Generation: 4, CreationTimestamp: created},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Version: "3.5.17", Replicas: 3, StorageSize: resource.MustParse("8Gi"), BackupSchedule: "0 2 * * *",
			TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)},
		},
		Status: etcdv1beta1.EtcdClusterStatus{
			ObservedGeneration: 4, Phase: etcdv1beta1.PhaseRunning,
			Replicas: 3, ReadyReplicas: 3, CurrentVersion: "3.5.17",
			ClientEndpoint: "https://prod-etcd-client.etcd-prod.svc.cluster.local:2379",
			AuthEnabled:    ptr.To(false),
			Conditions: []metav1.Condition{
				cond("Progressing", "False", "Reconciled", "members and managed objects match the spec", 70*time.Hour),
				cond("Available", "True", "QuorumHealthy", "3 of 3 voting members healthy (quorum 2)", 71*time.Hour),
				cond("Degraded", "False", "AsExpected", "no problems observed", 71*time.Hour),
				cond("BackupSucceeded", "True", "BackupSucceeded", "scheduled backup prod-etcd-backup-29402520 stored pvc://prod-etcd-backups/etcd-prod/prod-etcd/scheduled/prod-etcd-20261124T020000Z-r48211.db (revision 48211, 25362464 bytes)", 12*time.Hour+29*time.Minute),
				cond("Spread", "True", "VotersSpread", "3 voting members on 3 nodes in 3 zones: no node or zone holds enough of them for its loss alone to cost quorum", 71*time.Hour),
			},
			FailureTolerance: &etcdv1beta1.FailureTolerance{Nodes: 1, Zones: 1},
			Members: []etcdv1beta1.MemberStatus{
				{Name: "prod-etcd-0", ID: "8e9e05c52164694d", Leader: true, Healthy: true, Version: "3.5.17", DBSizeBytes: 41 * mib, DBSizeInUseBytes: 24 * mib},
				{Name: "prod-etcd-1", ID: "91bc3c398fb3c146", Healthy: true, Version: "3.5.17", DBSizeBytes: 40 * mib, DBSizeInUseBytes: 24 * mib},
				{Name: "prod-etcd-2", ID: "fd422379fda50e48", Healthy: true, Version: "3.5.17", DBSizeBytes: 26 * mib, DBSizeInUseBytes: 24 * mib},
			},
			LastBackupTime:         ptr.To(ago(12*time.Hour + 29*time.Minute)),
			LastBackupLocation:     "pvc://prod-etcd-backups/etcd-prod/prod-etcd/scheduled/prod-etcd-20261124T020000Z-r48211.db",
			LastScheduledBackupJob: "prod-etcd-backup-29402520",
			TLS: &etcdv1beta1.TLSStatus{
				Enabled: true, ClientSecretName: "prod-etcd-client-tls",
				Certificates: []etcdv1beta1.CertificateStatus{
					{Name: "ca", SecretName: "prod-etcd-ca", NotAfter: metav1.NewTime(created.Add(10 * 365 * 24 * time.Hour))},
					{Name: "server", SecretName: "prod-etcd-server-tls", NotAfter: metav1.NewTime(created.Add(90 * 24 * time.Hour)), RenewalTime: ptr.To(metav1.NewTime(created.Add(60 * 24 * time.Hour)))},
					{Name: "peer", SecretName: "prod-etcd-peer-tls", NotAfter: metav1.NewTime(created.Add(90 * 24 * time.Hour)), RenewalTime: ptr.To(metav1.NewTime(created.Add(60 * 24 * time.Hour)))},
					{Name: "client", SecretName: "prod-etcd-client-tls", NotAfter: metav1.NewTime(created.Add(90 * 24 * time.Hour)), RenewalTime: ptr.To(metav1.NewTime(created.Add(60 * 24 * time.Hour)))},
				},
			},
			Selector: "app.kubernetes.io/component=member,app.kubernetes.io/instance=prod-etcd,app.kubernetes.io/name=etcd",
		},
	}
}

// scalingCluster is growing from 3 to 5: a learner catches up while another member is down, and the
// newest backup is an on-demand one.
func scalingCluster() (*etcdv1beta1.EtcdCluster, []etcdv1beta1.EtcdBackup) {
	c := healthyCluster()
	c.Spec.Replicas, c.Generation = 5, 5
	s := &c.Status
	s.Phase, s.Replicas, s.ReadyReplicas = etcdv1beta1.PhaseDegraded, 4, 2
	s.Conditions = []metav1.Condition{
		cond("Available", "True", "QuorumHealthy", "2 of 3 voting members healthy (quorum 2)", 71*time.Hour),
		cond("Progressing", "True", "Scaling", "adding member prod-etcd-3 as a learner; promoting it once it has caught up", 4*time.Minute),
		cond("Degraded", "True", "MembersUnhealthy", "2 of 3 voting members healthy; unhealthy: prod-etcd-2", 3*time.Minute),
		cond("BackupSucceeded", "True", "BackupSucceeded", "scheduled backup prod-etcd-backup-29402520 stored pvc://prod-etcd-backups/etcd-prod/prod-etcd/scheduled/prod-etcd-20261124T020000Z-r48211.db (revision 48211, 25362464 bytes)", 12*time.Hour+29*time.Minute),
		cond("Spread", "True", "VotersSpread", "3 voting members on 3 nodes in 3 zones: no node or zone holds enough of them for its loss alone to cost quorum", 71*time.Hour),
	}
	// A voter down: one more node failure would cost quorum.
	s.FailureTolerance = &etcdv1beta1.FailureTolerance{}
	s.Members[2].Healthy, s.Members[2].Version, s.Members[2].DBSizeBytes, s.Members[2].DBSizeInUseBytes = false, "", 0, 0
	s.Members[2].UnhealthySince = ptr.To(ago(3*time.Minute + 12*time.Second))
	s.Members = append(s.Members, etcdv1beta1.MemberStatus{Name: "prod-etcd-3", ID: "2f1a5c3b9e4d6071", Learner: true,
		Healthy: true, Version: "3.5.17", DBSizeBytes: 12 * mib, DBSizeInUseBytes: 11 * mib})
	s.LastBackupTime = ptr.To(ago(25 * time.Minute))
	s.LastBackupLocation = "pvc://prod-etcd-backups/etcd-prod/prod-etcd/ondemand/before-scale-20261124T140500Z-r50877.db"
	backups := []etcdv1beta1.EtcdBackup{
		{ObjectMeta: metav1.ObjectMeta{Name: "before-scale", Namespace: "etcd-prod", CreationTimestamp: ago(26 * time.Minute)},
			Spec:   etcdv1beta1.EtcdBackupSpec{ClusterName: "prod-etcd"},
			Status: etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Location: s.LastBackupLocation, Revision: 50877, SizeBytes: 25 * mib}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-cluster-backup", Namespace: "etcd-prod", CreationTimestamp: ago(time.Minute)},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: "staging-etcd"}, Status: etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupRunning}},
	}
	return c, backups
}

// noSpaceCluster hit its space quota: NOSPACE is raised and the operator is recovering.
func noSpaceCluster() *etcdv1beta1.EtcdCluster {
	c := healthyCluster()
	s := &c.Status
	s.Phase = etcdv1beta1.PhaseDegraded
	s.Conditions[2] = cond("Degraded", "True", "NoSpace", "NOSPACE: compacting at revision 912044, defragmenting every member, then disarming", 2*time.Minute)
	for i := range s.Members {
		s.Members[i].DBSizeBytes, s.Members[i].DBSizeInUseBytes = 3277*mib, 3190*mib
	}
	s.Alarms = []string{"NOSPACE on prod-etcd-0", "NOSPACE on prod-etcd-1", "NOSPACE on prod-etcd-2"}
	return c
}

// defragmentingCluster is in the middle of a scheduled sweep, waiting for a member to be healthy again.
func defragmentingCluster() *etcdv1beta1.EtcdCluster {
	c := healthyCluster()
	c.Spec.Defragmentation.Schedule = "30 3 * * sun"
	c.Status.Defragmentation = &etcdv1beta1.DefragmentationStatus{
		Schedule: "30 3 * * sun", LastScheduleTime: ptr.To(ago(5 * time.Minute)), LastCompletionTime: ptr.To(ago(7 * 24 * time.Hour)),
		Current: &etcdv1beta1.DefragmentationSweep{Trigger: "schedule", StartTime: ago(5 * time.Minute), Defragmented: []string{"prod-etcd-1"},
			Waiting: "waiting for every member to be healthy (not: prod-etcd-2)"},
	}
	return c
}

// unscheduledCluster has never been backed up and has no schedule; TLS and auth are off.
func unscheduledCluster() *etcdv1beta1.EtcdCluster {
	c := healthyCluster()
	c.Name, c.Spec.BackupSchedule, c.Spec.TLS.Enabled = "dev-etcd", "", ptr.To(false)
	s := &c.Status
	s.ClientEndpoint = "http://dev-etcd-client.etcd-prod.svc.cluster.local:2379"
	s.Conditions = s.Conditions[:3]
	s.LastBackupTime, s.LastBackupLocation, s.LastScheduledBackupJob = nil, "", ""
	s.TLS = &etcdv1beta1.TLSStatus{Enabled: false}
	for i := range s.Members {
		s.Members[i].Name = "dev-etcd-" + s.Members[i].Name[len("prod-etcd-"):]
	}
	return c
}

// newCluster was just created: the operator has not written any status.
func newCluster() *etcdv1beta1.EtcdCluster {
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "default", Generation: 1, CreationTimestamp: ago(5 * time.Second)},
		Spec:       etcdv1beta1.EtcdClusterSpec{Version: "3.5.17", Replicas: 3},
	}
}
