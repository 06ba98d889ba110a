package controllers

import "github.com/seedops/etcd-operator/internal/maintenance"

// Reasons of conditions and events, in one place. Each constant's name is its value with a Reason prefix,
// so a reason read in `kubectl describe` is found here by name.
const (
	// Available.
	ReasonQuorumHealthy = "QuorumHealthy"
	ReasonQuorumLost    = "QuorumLost"
	ReasonBootstrapping = "Bootstrapping"

	// Progressing: what the cluster is doing.
	ReasonCreating  = "Creating"
	ReasonScaling   = "Scaling"
	ReasonUpgrading = "Upgrading"
	ReasonHealing   = "Healing"
	ReasonBlocked   = "Blocked"
	ReasonWaiting   = "Waiting"
	// ReasonRecovering: a cluster that lost its majority for good is rebuilt from a survivor.
	ReasonRecovering = "Recovering"
	// ReasonApplying: this reconcile changed managed objects; their effect is not observed yet.
	ReasonApplying   = "Applying"
	ReasonReconciled = "Reconciled"
	ReasonPaused     = "Paused"
	// ReasonUpgradeStalled: a member restarted onto a new version cannot run it; nothing more is changed.
	ReasonUpgradeStalled = "UpgradeStalled"

	// Degraded.
	ReasonAsExpected       = "AsExpected"
	ReasonMembersUnhealthy = "MembersUnhealthy"
	ReasonEtcdUnreachable  = "EtcdUnreachable"
	ReasonUnknownMembers   = "UnknownMembers"
	// ReasonMemberDataDeleting: the claim holding a running member's data is being deleted; the data goes at
	// the pod's next restart, and the member is replaced.
	ReasonMemberDataDeleting = "MemberDataDeleting"
	// ReasonMemberCannotStart: a member pod cannot run etcd (its image, a crash loop).
	ReasonMemberCannotStart = "MemberCannotStart"
	ReasonReconcileFailed   = "ReconcileFailed"
	// ReasonNoSpace: the database reached its space quota and etcd refuses writes; the operator recovers.
	ReasonNoSpace = "NoSpace"
	// ReasonDataCorrupt: etcd's CORRUPT alarm; reported only.
	ReasonDataCorrupt = "DataCorrupt"

	// Managed objects and membership steps (events).
	ReasonApplied              = "Applied"
	ReasonDeleted              = "Deleted"
	ReasonStorageResized       = "StorageResized"
	ReasonStatefulSetRecreated = "StatefulSetRecreated"
	ReasonMemberChange         = "MemberChange"
	// ReasonNodeLost: a removed member's pod, on a node gone or not Ready for the heal delay, was deleted
	// without waiting for its kubelet (grace period 0), with its data claim.
	ReasonNodeLost = "NodeLost"
	// ReasonQuorumRecovery: a step of quorum-loss recovery; ReasonQuorumRecovered: the survivor runs alone.
	ReasonQuorumRecovery  = "QuorumRecovery"
	ReasonQuorumRecovered = "QuorumRecovered"
	// ReasonRecoveryFallback: a recovery from a backup restores the newest full backup, not the newer
	// continuous backup (the agent reports no usable coverage, or the replay failed).
	ReasonRecoveryFallback = "RecoveryFallback"

	// Maintenance steps (events; internal/maintenance names them).
	ReasonCompacted     = maintenance.Compacted
	ReasonDefragmented  = maintenance.Defragmented
	ReasonAlarmDisarmed = maintenance.AlarmDisarmed
	// A sweep defragments every member in turn (sweep.go).
	ReasonDefragmentationStarted   = "DefragmentationStarted"
	ReasonDefragmentationCompleted = "DefragmentationCompleted"

	// TLS and authentication.
	ReasonTLSDefaulted       = "TLSDefaulted"
	ReasonCertificateIssued  = "CertificateIssued"
	ReasonCertificateRenewed = "CertificateRenewed"
	ReasonTLSRefused         = "TLSRefused"
	// ReasonCertManagerMissing, ReasonIssuerNotReady and ReasonCertificatesPending: a cluster with
	// spec.tls.issuerRef waits for cert-manager's kinds, for its issuer, or for its certificates.
	ReasonCertManagerMissing  = "CertManagerMissing"
	ReasonIssuerNotReady      = "IssuerNotReady"
	ReasonCertificatesPending = "CertificatesPending"
	// ReasonIssuerRefRefused: spec.tls.issuerRef asks for what the operator cannot do without breaking the
	// running cluster (issuerRef added to or removed from an existing cluster, with caSecretName, or with TLS
	// off); nothing is applied until the spec is set back.
	ReasonIssuerRefRefused = "IssuerRefRefused"
	// ReasonCARotating: the issuer's CA changed, and the members are carried over to it (trustbundle.go): the
	// condition's message says which step waits for what; an event marks each step.
	ReasonCARotating = "CARotating"
	// ReasonSecretNotManaged: a Secret the operator would create (the CA, the root password) already
	// exists without the operator's managed-by label; it is left untouched and the phase stops.
	ReasonSecretNotManaged = "SecretNotManaged"
	ReasonAuthEnabled      = "AuthEnabled"
	ReasonAuthDisabled     = "AuthDisabled"

	// Backups and restore.
	ReasonBackupSucceeded  = "BackupSucceeded"
	ReasonBackupFailed     = "BackupFailed"
	ReasonBackupStarted    = "BackupStarted"
	ReasonClusterNotFound  = "ClusterNotFound"
	ReasonWaitingForBackup = "WaitingForBackup"
	ReasonRestoreFailed    = "RestoreFailed"
	// ReasonWaitingForSnapshotServer: members restoring from a backup claim wait for the pod that serves
	// them the snapshot (it runs on the claim's node).
	ReasonWaitingForSnapshotServer = "WaitingForSnapshotServer"
	// ReasonJobNotOwned: a Job of the backup's name exists that the EtcdBackup does not control (left from
	// a deleted EtcdBackup of the same name, or someone else's); it is neither adopted nor reported.
	ReasonJobNotOwned = "JobNotOwned"
)
