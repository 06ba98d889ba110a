package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
// Version rules guard etcd's upgrade contract: members of adjacent minor versions can run together, so a
// cluster moves one minor version at a time, and etcd cannot roll back a minor version once the cluster
// version has moved.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="storageClassName is immutable: existing volumes cannot move to another storage class"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap)",message="bootstrap is immutable: it can only be set when the cluster is created"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.enabled) || !self.auth.enabled || !has(self.tls) || !has(self.tls.enabled) || self.tls.enabled",message="auth.enabled needs TLS (tls.enabled): the operator and backups authenticate as root with the cluster's client certificate, and passwords must not cross the network in plaintext"
// +kubebuilder:validation:XValidation:rule="!has(self.etcd) || !has(self.etcd.quotaBackendSize) || !has(self.storageSize) || string(self.etcd.quotaBackendSize).matches('[eE][+-]?[0-9]{3,}') || string(self.storageSize).matches('[eE][+-]?[0-9]{3,}') || size(string(self.etcd.quotaBackendSize)) > 32 || size(string(self.storageSize)) > 32 || !isQuantity(string(self.etcd.quotaBackendSize)) || !isQuantity(string(self.storageSize)) || quantity(string(self.etcd.quotaBackendSize)).add(quantity(string(self.etcd.quotaBackendSize))).compareTo(quantity(string(self.storageSize))) <= 0",message="etcd.quotaBackendSize must be at most half of storageSize: a defragmentation writes a second copy of the database beside the first, and the volume also holds the write-ahead log and snapshots"
type EtcdClusterSpec struct {
	// The version rules below, in order: the format; the oldest supported etcd; no major change; no minor
	// downgrade; no skipped minor; no move to 3.6 from 3.5 before 3.5.26. (Kept out of the field's doc
	// comment, which becomes the CRD's user-facing description.)
	//
	// Oldest supported etcd: 3.5.3. The member probes ask for /health?serializable=true (startup and
	// liveness probes, internal/resources/statefulset.go), which etcd 3.5 serves only from 3.5.3 on
	// (etcd-io/etcd#13706, CHANGELOG-3.5 v3.5.3): 3.5.0-3.5.2 ignore the parameter and answer with the
	// cluster's health, so a minute without quorum would make the kubelet restart every healthy member.
	// /health?exclude=NOSPACE (etcd-io/etcd#12880) and the AuthStatus RPC the operator reads (spec.auth)
	// exist from 3.5.0 only, so no 3.4 release qualifies. The other settings the operator passes are older:
	// ETCD_LISTEN_METRICS_URLS (3.3), ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION (3.4.0), periodic
	// auto compaction (3.3). The rule's guard is the format rule's own pattern, so a malformed version gets
	// only the format message (and int() never sees more than 4 digits).
	//
	// No 3.6 before 3.5.26: etcd's maintainers require every member to run 3.5.26 or later before a cluster
	// moves to 3.6 (etcd blog, 2025-12-21, "Avoiding Zombie Cluster Members When Upgrading to etcd v3.6";
	// etcd-io/etcd#20995): 3.6 reads membership from the v3 store, which releases before 3.5.26 can leave
	// holding members removed long ago; 3.5.26 repairs that store from the v2 store when it starts.

	// Version of etcd to run, as X.Y.Z, 3.5.3 or later. The image tag is v<version>.
	// Patch versions may go up or down; minor versions only up, one at a time, and to 3.6 only from 3.5.26 or later.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})$')",message="version must be a semantic version X.Y.Z such as 3.5.17 (no 'v' prefix, no suffix)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})$') || int(self.split('.')[0]) > 3 || (int(self.split('.')[0]) == 3 && (int(self.split('.')[1]) > 5 || (int(self.split('.')[1]) == 5 && int(self.split('.')[2]) >= 3)))",messageExpression="'etcd ' + self + ' is older than 3.5.3, the oldest version the operator supports: its member probes need /health?serializable=true (etcd 3.5.3), which older releases ignore'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || int(self.split('.')[0]) == int(oldSelf.split('.')[0])",message="changing etcd's major version is not supported"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || int(self.split('.')[0]) != int(oldSelf.split('.')[0]) || int(self.split('.')[1]) >= int(oldSelf.split('.')[1])",messageExpression="'downgrading etcd from ' + oldSelf + ' to ' + self + ' is not supported: etcd cannot roll back a minor version (patch versions of the same minor may go down)'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || !oldSelf.matches('^[0-9]+[.][0-9]+[.][0-9]+$') || int(self.split('.')[0]) != int(oldSelf.split('.')[0]) || int(self.split('.')[1]) <= int(oldSelf.split('.')[1]) + 1",messageExpression="'upgrading etcd from ' + oldSelf + ' to ' + self + ' skips a minor version: upgrade one minor version at a time (e.g. 3.5 -> 3.6 -> 3.7)'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})$') || !oldSelf.matches('^(0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})[.](0|[1-9][0-9]{0,3})$') || !(int(oldSelf.split('.')[0]) == 3 && int(oldSelf.split('.')[1]) == 5 && int(oldSelf.split('.')[2]) < 26 && int(self.split('.')[0]) == 3 && int(self.split('.')[1]) == 6)",messageExpression="'upgrading etcd from ' + oldSelf + ' to ' + self + ' is not safe: etcd before 3.5.26 may keep long-removed members in the store 3.6 reads membership from, and they come back as zombie members that make the cluster inoperable; upgrade to 3.5.26 or later first, wait until every member runs it, then move to 3.6'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="etcd version",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Version string `json:"version"`

	// Replicas is the number of etcd members: 1, 3, 5 or 7.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:XValidation:rule="self in [1, 3, 5, 7]",message="replicas must be 1, 3, 5 or 7: etcd needs a majority of members to agree, so an even size tolerates no more failures than the odd size below it while needing more members to agree"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Members",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas,omitempty"`

	// StorageSize is the size of each member's data volume. It can grow (when the storage class allows
	// volume expansion) but never shrink.
	// +optional
	// +kubebuilder:default="8Gi"
	// +kubebuilder:validation:XValidation:rule="size(string(self)) <= 32 && !string(self).matches('[eE][+-]?[0-9]{3,}') && isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('1Pi')) <= 0",message="storageSize must be a positive quantity of at most 1Pi, such as 10Gi (a decimal exponent has at most 2 digits)"
	// +kubebuilder:validation:XValidation:rule="string(self).matches('[eE][+-]?[0-9]{3,}') || string(oldSelf).matches('[eE][+-]?[0-9]{3,}') || !isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="storageSize can only grow: a persistent volume cannot be shrunk"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage size per member",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	StorageSize resource.Quantity `json:"storageSize,omitempty"`

	// StorageClassName of the members' data volumes; empty uses the cluster's default class. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage class",xDescriptors={"urn:alm:descriptor:io.kubernetes:StorageClass"}
	StorageClassName *string `json:"storageClassName,omitempty"`

	// BackupSchedule is a cron schedule (5 fields, or a macro such as @daily) for periodic backups.
	// Empty disables scheduled backups.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	BackupSchedule CronSchedule `json:"backupSchedule,omitempty"`

	// Backup configures where backups go and how many are kept.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Backup destination and retention"
	Backup BackupSpec `json:"backup,omitempty"`

	// Repository of the etcd image; the tag is v<version>.
	// +optional
	// +kubebuilder:default="gcr.io/etcd-development/etcd"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="repository must not carry a tag or digest: the tag comes from version"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image repository",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Repository string `json:"repository,omitempty"`

	// Pod customises the member pods: resources, scheduling, extra labels and annotations.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod settings",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Pod PodSpec `json:"pod,omitempty"`

	// PVCRetentionPolicy says what happens to member volumes when the cluster is deleted or scaled down.
	// The default keeps them: data is never lost by accident.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volume retention",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	PVCRetentionPolicy PVCRetentionPolicy `json:"pvcRetentionPolicy,omitempty"`

	// Paused stops the operator from changing anything it manages; status is still reported.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Paused bool `json:"paused,omitempty"`

	// TLS secures client and peer traffic with certificates the operator issues and renews.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS"
	TLS TLSSpec `json:"tls,omitempty"`

	// Defragmentation returns the free pages of the members' database files to the file system (etcd reuses
	// free pages but never shrinks the file on its own: a database that once held much more data keeps its
	// size, counted against the space quota's disk).
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragmentation",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Defragmentation DefragmentationSpec `json:"defragmentation,omitempty"`

	// Etcd tunes the members' etcd server. Every setting left out keeps the operator's default; a change
	// restarts the members one at a time, leader last, each only once the others are healthy.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="etcd settings",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Etcd EtcdSettingsSpec `json:"etcd,omitempty"`

	// NetworkPolicy, when enabled, creates a NetworkPolicy that admits to the members only their peers, the
	// operator, the cluster's backup pods and pods labelled etcd.seedops.io/client=<cluster name> in the
	// namespace (the metrics port stays open for probes and monitoring). It needs a network plugin that
	// enforces NetworkPolicy.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Network policy"
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Auth turns on etcd's authentication on a running cluster: clients must then be a user etcd knows.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Authentication"
	Auth AuthSpec `json:"auth,omitempty"`

	// Recovery says what the operator does when the cluster has lost its majority: by default it reports
	// what survives and changes nothing.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Quorum-loss recovery",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Recovery RecoverySpec `json:"recovery,omitempty"`

	// Bootstrap says where a new cluster's data comes from: empty starts an empty cluster. Set it when
	// creating the cluster; it cannot be added, changed or removed afterwards.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bootstrap is immutable: it only describes how the cluster was created"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Bootstrap from a backup"
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
}

// QuorumLossRecovery is what the operator does about a majority of members that is lost for good.
// +kubebuilder:validation:Enum=Report;FromSurvivor;FromBackup
type QuorumLossRecovery string

// Quorum-loss recovery strategies.
const (
	// QuorumLossReport reports the lost majority and what survives (each answering member's raft index and
	// revision) and changes nothing: a human decides.
	QuorumLossReport QuorumLossRecovery = "Report"
	// QuorumLossFromSurvivor rebuilds the cluster from the surviving voter with the highest raft index: it
	// restarts alone with etcd's --force-new-cluster (one start, never left in the template), and the other
	// members rejoin empty as learners, as in a heal. Writes the survivor had not received are lost.
	QuorumLossFromSurvivor QuorumLossRecovery = "FromSurvivor"
	// QuorumLossFromBackup rebuilds the cluster from its newest successful backup (an EtcdBackup of the
	// cluster, or the last scheduled backup): every member moves the data on its volume aside (kept there,
	// never deleted) and restores the snapshot, as a new cluster with new member IDs. Writes after the
	// backup's revision are lost, even those a surviving member held.
	QuorumLossFromBackup QuorumLossRecovery = "FromBackup"
)

// RecoverySpec says when the operator may rebuild a cluster that lost its majority. It never does while a
// majority may still come back: only once fewer voters than a quorum still hold their data (the others'
// volumes are deleted or replaced by empty ones; a member that is merely down, slow or cut off keeps its
// data and blocks recovery), and only after the majority has been lost for After.
type RecoverySpec struct {
	// QuorumLoss: Report (default), FromSurvivor or FromBackup.
	// +optional
	// +kubebuilder:default=Report
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="On quorum loss",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Report","urn:alm:descriptor:com.tectonic.ui:select:FromSurvivor","urn:alm:descriptor:com.tectonic.ui:select:FromBackup"}
	QuorumLoss QuorumLossRecovery `json:"quorumLoss,omitempty"`
	// After is how long the majority must have been lost before the operator recovers it.
	// +optional
	// +kubebuilder:default="5m0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('168h')",message="recovery.after must be between 30s and 168h"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Recover after",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	After *metav1.Duration `json:"after,omitempty"`
}

// TLSSpec configures client and peer TLS. With TLS on, members serve clients and each other only over TLS and
// require a client certificate signed by the cluster's CA (client-cert-auth); the operator issues a server,
// a peer and a client certificate and re-issues each before it expires, which members pick up without a
// restart (etcd reads its certificate files on every new connection).
// +kubebuilder:validation:XValidation:rule="has(self.caSecretName) == has(oldSelf.caSecretName) && (!has(self.caSecretName) || self.caSecretName == oldSelf.caSecretName)",message="tls.caSecretName is immutable: members trust one CA for their lifetime"
// +kubebuilder:validation:XValidation:rule="!has(self.certificateDuration) || !has(self.renewBefore) || duration(self.renewBefore) < duration(self.certificateDuration)",message="tls.renewBefore must be shorter than tls.certificateDuration"
type TLSSpec struct {
	// Enabled turns client and peer TLS on. Left unset, a new cluster gets TLS and the operator records
	// true here; a cluster that already runs without TLS (created by an operator before 0.2.0) keeps
	// running without it and gets false. It cannot change once set: members of one cluster must agree
	// on the scheme, so moving a cluster to TLS means restoring a backup into a new cluster.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.enabled cannot change on an existing cluster: members would stop understanding each other. Create a new cluster from a backup (spec.bootstrap.fromBackup) with the TLS setting you want"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled *bool `json:"enabled,omitempty"`
	// CASecretName names a Secret (keys tls.crt and tls.key) holding a CA the operator signs the
	// cluster's certificates with. Empty: the operator creates a CA in <cluster>-ca. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="CA Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret","urn:alm:descriptor:com.tectonic.ui:advanced"}
	CASecretName string `json:"caSecretName,omitempty"`
	// IssuerRef names a cert-manager Issuer or ClusterIssuer that issues the server, peer and client
	// certificates instead of the operator's CA: the operator creates cert-manager Certificates for them
	// and uses the Secrets cert-manager writes. The issuer must put its CA in ca.crt (a CA issuer does).
	// Exclusive with caSecretName, needs TLS (enabled), and cannot be added, removed or changed on an
	// existing cluster: the API server refuses a change of issuer; the operator refuses the rest (condition
	// Degraded, reason IssuerRefRefused) and changes nothing until the spec is set back.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.issuerRef cannot be changed on an existing cluster: members trust one CA for their lifetime, and a switch of issuer needs members to trust both CAs during the change, which the operator does not do. Set it back, or create a new cluster from a backup (spec.bootstrap.fromBackup) with the issuer you want"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="cert-manager issuer",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
	// CertificateDuration is the lifetime of the server, peer and client certificates.
	// +optional
	// +kubebuilder:default="2160h0m0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10m')",message="tls.certificateDuration must be at least 10m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Certificate duration",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	CertificateDuration *metav1.Duration `json:"certificateDuration,omitempty"`
	// RenewBefore is how long before expiry a certificate is re-issued (never in the first tenth of its
	// lifetime, so a certificate is not renewed on every reconcile).
	// +optional
	// +kubebuilder:default="720h0m0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="tls.renewBefore must be at least 1m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Renew before",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// CronSchedule is a cron schedule in the 5-field form Kubernetes CronJobs use (minute hour day-of-month month
// day-of-week, e.g. "0 2 * * *"), or a macro such as @daily. The rules refuse what the cron parser would.
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:XValidation:rule="self.matches('^([@](yearly|annually|monthly|weekly|daily|midnight|hourly)|([*?]|[0-5]?[0-9](-[0-5]?[0-9])?)([/][1-9][0-9]*)?(,([*?]|[0-5]?[0-9](-[0-5]?[0-9])?)([/][1-9][0-9]*)?)*[ ]+([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)([/][1-9][0-9]*)?(,([*?]|([01]?[0-9]|2[0-3])(-([01]?[0-9]|2[0-3]))?)([/][1-9][0-9]*)?)*[ ]+([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)([/][1-9][0-9]*)?(,([*?]|(0?[1-9]|[12][0-9]|3[01])(-(0?[1-9]|[12][0-9]|3[01]))?)([/][1-9][0-9]*)?)*[ ]+([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)([/][1-9][0-9]*)?(,([*?]|(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-(0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)([/][1-9][0-9]*)?)*[ ]+([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)([/][1-9][0-9]*)?(,([*?]|([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)([/][1-9][0-9]*)?)*)$')",message="must be a 5-field cron expression (minute hour day-of-month month day-of-week, e.g. '0 2 * * *') or one of @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually"
// +kubebuilder:validation:XValidation:rule="self.lowerAscii().replace('jan','1').replace('feb','2').replace('mar','3').replace('apr','4').replace('may','5').replace('jun','6').replace('jul','7').replace('aug','8').replace('sep','9').replace('oct','10').replace('nov','11').replace('dec','12').replace('sun','0').replace('mon','1').replace('tue','2').replace('wed','3').replace('thu','4').replace('fri','5').replace('sat','6').findAll('[0-9]+-[0-9]+').all(r, int(r.split('-')[0]) <= int(r.split('-')[1])) && !self.matches('[/][0-9]{19,}')",message="cron ranges must go from low to high (e.g. 22-23 or mon-fri, not 23-22) and steps must have at most 18 digits"
type CronSchedule string

// DefragmentationSpec says when a member's database is defragmented. A member serves nothing while it
// defragments (long on a big database), so the operator does one member at a time, followers before the
// leader, and only while every member is healthy and no membership change is under way.
type DefragmentationSpec struct {
	// FreePercent: a member whose database file is at least this share free pages is defragmented. 0 turns
	// automatic defragmentation off (recovery from the NOSPACE alarm still defragments).
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=95
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragment above free share (%)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number"}
	FreePercent *int32 `json:"freePercent,omitempty"`
	// MinFreeSize: and at least this much is free (smaller files are not worth a member's pause).
	// +optional
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="size(string(self)) <= 32 && !string(self).matches('[eE][+-]?[0-9]{3,}') && isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="defragmentation.minFreeSize must be a positive quantity such as 64Mi"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragment above free size",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	MinFreeSize *resource.Quantity `json:"minFreeSize,omitempty"`
	// Schedule defragments every member in turn at these times (UTC), whatever its free pages: followers first,
	// the leader last, one at a time, each only while every member is healthy (a sweep waits for that). The
	// annotation etcd.seedops.io/defragment (any new value, e.g. the time) asks for one sweep now.
	// Empty: no scheduled sweep.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Defragment every member on a schedule",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Schedule CronSchedule `json:"schedule,omitempty"`
}

// EtcdSettingsSpec holds the etcd server settings a user may tune. Settings the operator owns (member
// names and URLs, the initial cluster, TLS files, the data directory) have no field and are refused in
// extraFlags.
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeout) ? duration(self.electionTimeout).getMilliseconds() : 1000) >= 5 * (has(self.heartbeatInterval) ? duration(self.heartbeatInterval).getMilliseconds() : 100)",message="etcd.electionTimeout must be at least 5 times etcd.heartbeatInterval (defaults 1s and 100ms): a shorter timeout makes followers call elections while the leader is healthy"
type EtcdSettingsSpec struct {
	// HeartbeatInterval is how often the leader tells followers it is alive (etcd's default: 100ms). Set it
	// near the round-trip time between members.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('5s')",message="etcd.heartbeatInterval must be between 10ms and 5s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Heartbeat interval",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
	// ElectionTimeout is how long a follower waits without a heartbeat before it calls an election
	// (etcd's default: 1s). At least 5 heartbeat intervals.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('50s')",message="etcd.electionTimeout must be between 50ms and 50s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Election timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	ElectionTimeout *metav1.Duration `json:"electionTimeout,omitempty"`
	// SnapshotCount is the number of applied entries after which a member snapshots its state and trims its
	// log (etcd's default: 100000 in 3.5, 10000 from 3.6).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Snapshot count",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number","urn:alm:descriptor:com.tectonic.ui:advanced"}
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
	// MaxRequestSize is the largest request a member accepts (etcd's default: 1.5Mi). Larger requests
	// slow every member down while they are replicated.
	// +optional
	// +kubebuilder:validation:XValidation:rule="size(string(self)) <= 32 && !string(self).matches('[eE][+-]?[0-9]{3,}') && isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('1Ki')) >= 0 && quantity(string(self)).compareTo(quantity('64Mi')) <= 0",message="etcd.maxRequestSize must be a quantity between 1Ki and 64Mi, such as 4Mi"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Largest request",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	MaxRequestSize *resource.Quantity `json:"maxRequestSize,omitempty"`
	// QuotaBackendSize is the database size at which etcd raises the NOSPACE alarm and refuses writes.
	// Unset: 40% of storageSize, at most 8Gi, which leaves room on the volume for a defragmentation's
	// second copy of the database, the write-ahead log and snapshots. It must stay below half of storageSize.
	// +optional
	// +kubebuilder:validation:XValidation:rule="size(string(self)) <= 32 && !string(self).matches('[eE][+-]?[0-9]{3,}') && isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="etcd.quotaBackendSize must be a quantity between 16Mi and 100Gi, such as 4Gi"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Space quota",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	QuotaBackendSize *resource.Quantity `json:"quotaBackendSize,omitempty"`
	// AutoCompaction says how much history etcd keeps before it compacts. Unset: periodic, 1h.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Automatic compaction",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	AutoCompaction *AutoCompactionSpec `json:"autoCompaction,omitempty"`
	// ExtraFlags passes further etcd flags, by name without the leading dashes (e.g.
	// "experimental-compaction-batch-limit": "1000"). etcd refuses a flag it does not know and the member
	// then does not start: the rolling restart stops at that member, the others keep serving, and status
	// says so. Flags the operator sets itself are refused here.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9]+(-[a-z0-9]+)*$'))",message="etcd.extraFlags keys are flag names without leading dashes, such as experimental-compaction-batch-limit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['name', 'data-dir', 'wal-dir', 'listen-peer-urls', 'listen-client-urls', 'listen-client-http-urls', 'listen-metrics-urls', 'initial-advertise-peer-urls', 'advertise-client-urls', 'initial-cluster', 'initial-cluster-state', 'initial-cluster-token', 'discovery', 'discovery-srv', 'discovery-srv-name', 'discovery-proxy', 'discovery-fallback', 'force-new-cluster', 'config-file', 'cert-file', 'key-file', 'trusted-ca-file', 'client-cert-auth', 'auto-tls', 'peer-cert-file', 'peer-key-file', 'peer-trusted-ca-file', 'peer-client-cert-auth', 'peer-auto-tls', 'peer-cert-allowed-cn', 'peer-cert-allowed-hostname', 'peer-skip-client-san-verification', 'experimental-peer-skip-client-san-verification', 'heartbeat-interval', 'election-timeout', 'snapshot-count', 'max-request-bytes', 'quota-backend-bytes', 'auto-compaction-mode', 'auto-compaction-retention', 'max-learners']))",message="etcd.extraFlags must not set a flag the operator owns (names, URLs, the initial cluster, TLS files, the data directory, max-learners) or one with its own field (heartbeatInterval, electionTimeout, snapshotCount, maxRequestSize, quotaBackendSize, autoCompaction)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="etcd.extraFlags values are at most 1024 characters"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Extra flags",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	ExtraFlags map[string]string `json:"extraFlags,omitempty"`
}

// AutoCompactionSpec configures etcd's automatic compaction of old revisions.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Periodic' || self.retention.matches('^([0-9]+(ms|s|m|h))+$')",message="etcd.autoCompaction.retention for mode Periodic is a duration such as 1h or 30m"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Revision' || self.retention.matches('^[1-9][0-9]{0,17}$')",message="etcd.autoCompaction.retention for mode Revision is a number of revisions to keep, such as 10000"
type AutoCompactionSpec struct {
	// Mode: Periodic keeps the history of the last retention period; Revision keeps the last retention
	// revisions.
	// +kubebuilder:validation:Enum=Periodic;Revision
	Mode AutoCompactionMode `json:"mode"`
	// Retention is a duration for Periodic (e.g. 1h), a number of revisions for Revision (e.g. 10000).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Retention string `json:"retention"`
}

// AutoCompactionMode is how etcd decides what history to compact.
type AutoCompactionMode string

// Automatic compaction modes.
const (
	AutoCompactionPeriodic AutoCompactionMode = "Periodic"
	AutoCompactionRevision AutoCompactionMode = "Revision"
)

// NetworkPolicySpec configures the cluster's NetworkPolicy.
type NetworkPolicySpec struct {
	// Enabled creates the NetworkPolicy; false deletes it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Network policy enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
}

// AuthSpec configures etcd authentication (users, roles and permissions are etcd's own: manage them with
// etcdctl as root).
type AuthSpec struct {
	// Enabled turns authentication on: the operator creates the root user (root role) with the password
	// from rootPasswordSecretName and enables authentication; false turns it off again (users are kept).
	// With TLS, a client certificate authenticates as the user named by its common name; the cluster's
	// client certificate (status.tls.clientSecretName) is root's.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Authentication enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
	// RootPasswordSecretName names a Secret whose key "password" holds the root user's password, used
	// when the operator creates the root user. Empty: the operator generates one in <cluster>-root-password.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Root password Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	RootPasswordSecretName string `json:"rootPasswordSecretName,omitempty"`
}

// CertificateStatus is one certificate the operator manages.
type CertificateStatus struct {
	// Name says what the certificate is for: ca, server, peer or client.
	Name string `json:"name"`
	// SecretName holds the certificate (tls.crt, tls.key and ca.crt).
	SecretName string `json:"secretName"`
	// NotAfter is when the certificate expires.
	NotAfter metav1.Time `json:"notAfter"`
	// RenewalTime is when the operator re-issues it (absent for a CA: CAs are not rotated).
	// +optional
	RenewalTime *metav1.Time `json:"renewalTime,omitempty"`
}

// IssuerReference names a cert-manager issuer, with the field names of cert-manager's issuerRef.
type IssuerReference struct {
	// Name of the Issuer (in the cluster's namespace) or ClusterIssuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Kind is Issuer or ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`
	// Group is the issuer's API group: cert-manager.io, or an external issuer's.
	// +optional
	// +kubebuilder:default="cert-manager.io"
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
}

// TLSStatus is the cluster's TLS as observed.
type TLSStatus struct {
	// Enabled is whether the members serve TLS.
	Enabled bool `json:"enabled"`
	// ClientSecretName holds a client certificate for users (kubernetes.io/tls: tls.crt, tls.key, ca.crt).
	// +optional
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// Certificates the operator manages, with their expiry.
	// +optional
	// +listType=map
	// +listMapKey=name
	Certificates []CertificateStatus `json:"certificates,omitempty"`
}

// BootstrapSpec is where a new cluster's data comes from.
type BootstrapSpec struct {
	// FromBackup restores every member from one snapshot before it first starts.
	// +required
	FromBackup *BackupSource `json:"fromBackup"`
}

// BackupSource names one snapshot: a Succeeded EtcdBackup in the namespace, or a key on a claim or in a
// bucket (what an EtcdBackup's status.location and the scheduled backups' keys show).
// +kubebuilder:validation:XValidation:rule="[has(self.backupName), has(self.pvc), has(self.s3)].filter(x, x).size() == 1",message="fromBackup needs exactly one of backupName, pvc or s3"
// +kubebuilder:validation:XValidation:rule="has(self.backupName) || (has(self.key) && size(self.key) > 0)",message="fromBackup.key is required with pvc or s3: the snapshot's key, e.g. <namespace>/<cluster>/scheduled/<cluster>-20261122T020000Z-r1234.db"
// +kubebuilder:validation:XValidation:rule="!has(self.pvc) || (has(self.pvc.claimName) && size(self.pvc.claimName) > 0)",message="fromBackup.pvc.claimName is required"
type BackupSource struct {
	// BackupName is a Succeeded EtcdBackup in this namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	BackupName string `json:"backupName,omitempty"`
	// Key of the snapshot on the claim or in the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="key must not contain '..'"
	Key string `json:"key,omitempty"`
	// PVC holding the snapshot.
	// +optional
	PVC *PVCBackupDestination `json:"pvc,omitempty"`
	// S3 bucket holding the snapshot.
	// +optional
	S3 *S3BackupDestination `json:"s3,omitempty"`
	// PointInTime restores a continuous backup instead of a snapshot: key is then the continuous backup's
	// location on the claim or in the bucket (the key part of the source cluster's
	// status.continuousBackup.location, e.g. <namespace>/<cluster>/continuous/), and the cluster starts with
	// exactly the data of the chosen revision. Empty ({}): the newest revision covered.
	// +optional
	PointInTime *PointInTime `json:"pointInTime,omitempty"`
}

// PointInTime chooses the revision a continuous backup is restored to.
// +kubebuilder:validation:XValidation:rule="!(has(self.revision) && has(self.time))",message="pointInTime takes a revision or a time, not both"
type PointInTime struct {
	// Revision to restore: the cluster holds exactly the data of this revision, with every key's create
	// and mod revision and version.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision,omitempty"`
	// Time to restore to: the newest revision captured at or before it.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// ClusterUID of the source cluster, needed only when clusters of the same name (one deleted, one
	// created later) left continuous backups at the same location.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ClusterUID string `json:"clusterUID,omitempty"`
}

// PodSpec holds the member pod settings users commonly need.
type PodSpec struct {
	// Labels added to every member pod. Keys under app.kubernetes.io/ are reserved for the operator.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('app.kubernetes.io/') && !k.startsWith('etcd.seedops.io/'))",message="labels under app.kubernetes.io/ and etcd.seedops.io/ are reserved for the operator"
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to every member pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Resources of the etcd container. Default: requests of 100m CPU and 256Mi memory, no limits
	// (a CPU limit throttles etcd and causes leader elections).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector constrains members to matching nodes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the member pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the member pods. Set, it replaces the operator's default placement (see spread).
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints of the member pods. Set, they replace the operator's default placement (see
	// spread).
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// Spread says how strictly the default placement spreads members over zones (topology.kubernetes.io/zone)
	// and nodes (kubernetes.io/hostname): topology spread constraints with maxSkew 1 over the cluster's
	// members, and a preference for nodes without a member. Preferred (empty) lets the scheduler place a
	// member anyway when an even spread is not possible; Required makes it wait instead (whenUnsatisfiable
	// DoNotSchedule), and then only nodes labelled with a zone can take members. The default placement
	// applies only while affinity and topologySpreadConstraints are both unset: either one set, the pods get
	// exactly the placement given there and spread has no effect. A placement change never restarts a
	// member: it applies to each member when its pod is next created (a heal, a rolling restart, a node
	// drain). status.failureTolerance and the Spread condition report how the members are spread.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Spread over zones and nodes",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Preferred","urn:alm:descriptor:com.tectonic.ui:select:Required","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Spread SpreadPolicy `json:"spread,omitempty"`
	// PriorityClassName of the member pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// SpreadPolicy is how strictly the default placement spreads members over zones and nodes.
// +kubebuilder:validation:Enum=Preferred;Required
type SpreadPolicy string

// Spread policies.
const (
	// SpreadPreferred: the scheduler spreads members as evenly as it can and places them anyway when it
	// cannot (whenUnsatisfiable ScheduleAnyway).
	SpreadPreferred SpreadPolicy = "Preferred"
	// SpreadRequired: a member waits, Pending, rather than be placed where zones or nodes would differ by
	// more than one member (whenUnsatisfiable DoNotSchedule).
	SpreadRequired SpreadPolicy = "Required"
)

// RetentionPolicyType says whether a member volume is kept or deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type RetentionPolicyType string

const (
	// RetainVolume keeps the volume.
	RetainVolume RetentionPolicyType = "Retain"
	// DeleteVolume deletes the volume.
	DeleteVolume RetentionPolicyType = "Delete"
)

// PVCRetentionPolicy mirrors the StatefulSet volume retention policy.
type PVCRetentionPolicy struct {
	// WhenDeleted applies when the EtcdCluster is deleted.
	// +optional
	// +kubebuilder:default=Retain
	WhenDeleted RetentionPolicyType `json:"whenDeleted,omitempty"`
	// WhenScaled applies to the volumes of members removed by a scale-down.
	// +optional
	// +kubebuilder:default=Retain
	WhenScaled RetentionPolicyType `json:"whenScaled,omitempty"`
}

// BackupSpec configures backup destination and retention (scheduled and on-demand backups).
// +kubebuilder:validation:XValidation:rule="!(has(self.pvc) && has(self.s3))",message="choose one backup destination: pvc or s3"
type BackupSpec struct {
	// Retention is how many successful scheduled backups to keep, newest first. On-demand backups
	// (EtcdBackup) are kept until deleted from the destination.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Retention int32 `json:"retention,omitempty"`

	BackupDestination `json:",inline"`

	// Continuous captures every change after a full snapshot into the same destination, so that a new
	// cluster can be restored to any revision or time in the covered range (bootstrap.fromBackup.pointInTime):
	// the recovery point is seconds, not the time since the last scheduled backup.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Continuous backup"
	Continuous *ContinuousBackupSpec `json:"continuous,omitempty"`
}

// ContinuousBackupSpec configures the continuous backup agent, a StatefulSet <cluster>-pitr that
// watches every key from a full snapshot's revision and stores the changes in segments.
type ContinuousBackupSpec struct {
	// Enabled runs the agent. Turning it off stops the capture and keeps what was stored.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Continuous backup enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`
	// SegmentInterval is how often captured changes are stored (sooner when a segment is large): writes
	// newer than this may be lost with the cluster.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="segmentInterval must be between 1s and 5m"
	SegmentInterval *metav1.Duration `json:"segmentInterval,omitempty"`
	// FullSnapshotInterval is how often a new chain starts from a full snapshot: a restore replays at most
	// this much history.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10m')",message="fullSnapshotInterval must be at least 10m"
	FullSnapshotInterval *metav1.Duration `json:"fullSnapshotInterval,omitempty"`
	// RetainFor is how far back a restore can go: older chains are deleted, the newest is always kept.
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="retainFor must be at least 1h"
	RetainFor *metav1.Duration `json:"retainFor,omitempty"`
	// MaxSize bounds the bytes kept (oldest chains deleted first, the newest always kept). Empty: no bound.
	// +optional
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
}

// BackupDestination is where snapshots are stored: a PersistentVolumeClaim (the default) or an
// S3-compatible bucket.
type BackupDestination struct {
	// PVC stores backups on a PersistentVolumeClaim. This is the default destination.
	// +optional
	PVC *PVCBackupDestination `json:"pvc,omitempty"`
	// S3 stores backups in an S3-compatible object store.
	// +optional
	S3 *S3BackupDestination `json:"s3,omitempty"`
}

// PVCBackupDestination is a PersistentVolumeClaim holding backups.
type PVCBackupDestination struct {
	// ClaimName of an existing claim. Empty: the operator creates <cluster>-backups, sized from storageSize.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`
	// StorageClassName of the claim the operator creates.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// S3BackupDestination is a bucket in an S3-compatible object store.
type S3BackupDestination struct {
	// Endpoint URL, e.g. https://s3.eu-west-1.amazonaws.com or http://minio.backup.svc:9000.
	// +required
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'https' || url(self).getScheme() == 'http')",message="endpoint must be an http or https URL"
	Endpoint string `json:"endpoint"`
	// Bucket name.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	Bucket string `json:"bucket"`
	// Prefix of the object keys.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region of the bucket.
	// +optional
	Region string `json:"region,omitempty"`
	// CredentialsSecretName names a Secret with keys accessKeyID and secretAccessKey.
	// +required
	// +kubebuilder:validation:MinLength=1
	CredentialsSecretName string `json:"credentialsSecretName"`
	// CASecretName names a Secret whose ca.crt key verifies the endpoint's TLS certificate.
	// +optional
	CASecretName string `json:"caSecretName,omitempty"`
}

// ClusterPhase is a one-word summary of the cluster; conditions carry the detail.
// +kubebuilder:validation:Enum=Pending;Running;Progressing;Degraded;Unavailable;Paused
type ClusterPhase string

// Phases of an EtcdCluster.
const (
	PhasePending     ClusterPhase = "Pending"
	PhaseRunning     ClusterPhase = "Running"
	PhaseProgressing ClusterPhase = "Progressing"
	PhaseDegraded    ClusterPhase = "Degraded"
	PhaseUnavailable ClusterPhase = "Unavailable"
	PhasePaused      ClusterPhase = "Paused"
)

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable: a quorum of members is healthy and serves clients.
	ConditionAvailable = "Available"
	// ConditionProgressing: the cluster is moving towards its spec (creating, scaling, upgrading).
	ConditionProgressing = "Progressing"
	// ConditionDegraded: a member is unhealthy, or the operator cannot converge.
	ConditionDegraded = "Degraded"
	// ConditionBackupSucceeded: whether the last scheduled backup succeeded (absent before the first run).
	ConditionBackupSucceeded = "BackupSucceeded"
	// ConditionContinuousBackup: whether the continuous backup agent captures (absent while it is off).
	ConditionContinuousBackup = "ContinuousBackup"
	// ConditionSpread: False when voting members share a node or a zone whose loss alone would cost quorum
	// (absent until every member's pod has been scheduled once).
	ConditionSpread = "Spread"
)

// MemberStatus is one etcd member as observed.
type MemberStatus struct {
	// Name of the member (its pod name).
	Name string `json:"name"`
	// ID is the member ID in hex, as etcdctl prints it.
	// +optional
	ID string `json:"id,omitempty"`
	// ClientURL the member advertises.
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// Leader is true for the current raft leader.
	// +optional
	Leader bool `json:"leader,omitempty"`
	// Learner is true for a non-voting member catching up.
	// +optional
	Learner bool `json:"learner,omitempty"`
	// Healthy is true when the member answers and its pod is ready.
	Healthy bool `json:"healthy"`
	// Version etcd reports for this member.
	// +optional
	Version string `json:"version,omitempty"`
	// DBSizeBytes is the size of the member's backend database file.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// DBSizeInUseBytes is the part of the database file that holds data; the rest is free pages that only
	// a defragmentation returns to the file system.
	// +optional
	DBSizeInUseBytes int64 `json:"dbSizeInUseBytes,omitempty"`
	// UnhealthySince is when the member was first seen unhealthy; a member unhealthy for too long is
	// replaced.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	// Unknown is true for a member in etcd that the operator did not add; it is reported, never removed.
	// +optional
	Unknown bool `json:"unknown,omitempty"`
	// VolumeClaimUID is the volume claim found holding this member's data once it was healthy. A member
	// whose ordinal now has another claim lost its data, even if etcd let it rejoin empty under its old
	// ID, and is replaced.
	// +optional
	VolumeClaimUID string `json:"volumeClaimUID,omitempty"`
}

// RecoveryStatus is a finished quorum-loss recovery.
type RecoveryStatus struct {
	// Strategy is how the cluster was rebuilt: FromSurvivor or FromBackup.
	Strategy QuorumLossRecovery `json:"strategy"`
	// Time is when the cluster answered again with the recovery done.
	Time metav1.Time `json:"time"`
	// Source is the member the cluster was rebuilt from (FromSurvivor), or the snapshot's location
	// (FromBackup): a full backup's, or the cluster's continuous backup's, replayed to Revision.
	Source string `json:"source"`
	// Revision is the etcd revision the restored snapshot holds (FromBackup): every write after it is lost.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Fallback says why a cluster with continuous backup was restored from its newest full backup instead
	// of its continuous backup's newest revision (FromBackup): the agent reported no usable coverage, or
	// the replay failed. Empty when the newest point available was restored.
	// +optional
	Fallback string `json:"fallback,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
// ContinuousBackupStatus is what the continuous backup agent last reported.
type ContinuousBackupStatus struct {
	// Location of the captured chains (claim or bucket and key): the key part is what
	// bootstrap.fromBackup.key takes with pointInTime.
	// +optional
	Location string `json:"location,omitempty"`
	// OldestRevision and OldestTime: the oldest point a restore can reach.
	// +optional
	OldestRevision int64 `json:"oldestRevision,omitempty"`
	// +optional
	OldestTime *metav1.Time `json:"oldestTime,omitempty"`
	// NewestRevision and NewestTime: the newest point stored; the recovery point is the time since.
	// +optional
	NewestRevision int64 `json:"newestRevision,omitempty"`
	// +optional
	NewestTime *metav1.Time `json:"newestTime,omitempty"`
	// Gaps inside the range, where history was lost (e.g. compacted before it was captured): a restore
	// into one is refused.
	// +optional
	// +listType=atomic
	Gaps []ContinuousBackupGap `json:"gaps,omitempty"`
}

// ContinuousBackupGap is a range of revisions no chain covers.
type ContinuousBackupGap struct {
	FromRevision int64 `json:"fromRevision"`
	ToRevision   int64 `json:"toRevision"`
	// +optional
	Reason string `json:"reason,omitempty"`
}

type EtcdClusterStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the conditions.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase ClusterPhase `json:"phase,omitempty"`
	// Conditions: Available, Progressing, Degraded, BackupSucceeded, ContinuousBackup, Spread.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas is the number of member pods that exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of member pods that are ready.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready members",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// CurrentVersion is the etcd version the members report (the lowest, while an upgrade runs).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Current version",xDescriptors={"urn:alm:descriptor:text"}
	CurrentVersion string `json:"currentVersion,omitempty"`
	// ClientEndpoint is the URL clients connect to.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Client endpoint",xDescriptors={"urn:alm:descriptor:text"}
	ClientEndpoint string `json:"clientEndpoint,omitempty"`
	// Members as observed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Members"
	Members []MemberStatus `json:"members,omitempty"`
	// LastBackupTime is when the last successful backup finished.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last backup",xDescriptors={"urn:alm:descriptor:text"}
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`
	// LastBackupLocation is where the last successful backup is (pvc://<claim>/<key> or s3://<bucket>/<key>).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last backup location",xDescriptors={"urn:alm:descriptor:text"}
	LastBackupLocation string `json:"lastBackupLocation,omitempty"`
	// LastScheduledBackupJob is the newest finished scheduled backup Job the operator has reported.
	// +optional
	LastScheduledBackupJob string `json:"lastScheduledBackupJob,omitempty"`
	// ContinuousBackup reports the continuous backup: the range a restore can reach and the gaps in it.
	// +optional
	ContinuousBackup *ContinuousBackupStatus `json:"continuousBackup,omitempty"`

	// RestoredFrom is the snapshot the cluster was bootstrapped from, once every member restored it.
	// +optional
	RestoredFrom string `json:"restoredFrom,omitempty"`
	// LastRecovery is the last quorum-loss recovery the operator finished.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last quorum-loss recovery"
	LastRecovery *RecoveryStatus `json:"lastRecovery,omitempty"`
	// AuthEnabled is whether etcd authentication is on, as etcd reports it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Authentication enabled",xDescriptors={"urn:alm:descriptor:text"}
	AuthEnabled *bool `json:"authEnabled,omitempty"`
	// TLS reports whether TLS is on, where the client certificate is, and when certificates expire.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="TLS"
	TLS *TLSStatus `json:"tls,omitempty"`
	// Alarms are etcd's active alarms, as "<type> on <member>": NOSPACE (the database reached its space
	// quota, etcd refuses writes; the operator compacts, defragments and disarms it) or CORRUPT (a member's
	// data differs from the others'; reported only, for a human to decide).
	// +optional
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Alarms",xDescriptors={"urn:alm:descriptor:text"}
	Alarms []string `json:"alarms,omitempty"`
	// CompactedRevision is the revision at which the operator last compacted the key-value history and then
	// defragmented every member, recovering from NOSPACE (etcd's periodic auto-compaction is not recorded).
	// +optional
	CompactedRevision int64 `json:"compactedRevision,omitempty"`
	// Defragmentation reports the sweeps that defragment every member in turn (spec.defragmentation.schedule
	// or the etcd.seedops.io/defragment annotation).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Defragmentation sweeps"
	Defragmentation *DefragmentationStatus `json:"defragmentation,omitempty"`
	// FailureTolerance is how many node and zone failures the cluster survives now without losing quorum,
	// judged from the nodes and zones its healthy voting members run in.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Failures tolerated"
	FailureTolerance *FailureTolerance `json:"failureTolerance,omitempty"`
	// Selector of the member pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
}

// FailureTolerance counts the failures the cluster survives now: k nodes (zones) are tolerated when losing
// the k nodes (zones) that hold the most healthy voting members still leaves a quorum of voters. A voter
// counts only while it is healthy, its pod is scheduled and its node is not NotReady; a voter on a node
// without the topology.kubernetes.io/zone label counts as lost in every zone failure (its zone is unknown),
// so a cluster whose nodes carry no zone label tolerates no zone failure.
type FailureTolerance struct {
	// Nodes is how many nodes may fail at once without costing quorum.
	Nodes int32 `json:"nodes"`
	// Zones is how many zones may fail at once without costing quorum.
	Zones int32 `json:"zones"`
}

// DefragmentAnnotation on an EtcdCluster asks for one sweep that defragments every member in turn: set it
// to a value it has not had (e.g. the current time); status.defragmentation.lastRequest says once it is done.
const DefragmentAnnotation = "etcd.seedops.io/defragment"

// DefragmentationStatus reports the sweeps that defragment every member in turn.
type DefragmentationStatus struct {
	// Schedule is the spec.defragmentation.schedule that LastScheduleTime counts for.
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// LastScheduleTime is the latest time of Schedule a sweep was started for, or when Schedule was set: the
	// schedule's next time after it starts the next sweep.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastRequest is the value of the etcd.seedops.io/defragment annotation the last requested sweep was
	// started for.
	// +optional
	LastRequest string `json:"lastRequest,omitempty"`
	// LastCompletionTime is when a sweep last defragmented its last member.
	// +optional
	LastCompletionTime *metav1.Time `json:"lastCompletionTime,omitempty"`
	// Current is the sweep under way, if any.
	// +optional
	Current *DefragmentationSweep `json:"current,omitempty"`
}

// DefragmentationSweep is a sweep under way.
type DefragmentationSweep struct {
	// Trigger says what started it: "schedule" or "request".
	Trigger string `json:"trigger"`
	// StartTime is when it started.
	StartTime metav1.Time `json:"startTime"`
	// Defragmented lists the members done so far, in order.
	// +optional
	// +listType=atomic
	Defragmented []string `json:"defragmented,omitempty"`
	// Waiting says what the next defragmentation waits for, if anything (every member healthy, a membership
	// change, NOSPACE recovery).
	// +optional
	Waiting string `json:"waiting,omitempty"`
}

// EtcdCluster is an etcd cluster managed by the operator.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 45",message="an EtcdCluster's name must be a DNS label of at most 45 characters starting with a letter: it names the cluster's Services (DNS labels), StatefulSet and backup CronJob (at most 52 characters with its '-backup' suffix)"
// +kubebuilder:resource:shortName=etcd,categories=etcd
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".spec.version"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Node-Failures-Tolerated",type=integer,JSONPath=".status.failureTolerance.nodes",priority=1
// +kubebuilder:printcolumn:name="Zone-Failures-Tolerated",type=integer,JSONPath=".status.failureTolerance.zones",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Cluster",resources={{Event,v1,""},{StatefulSet,v1,""},{Service,v1,""},{ConfigMap,v1,""},{PodDisruptionBudget,v1,""},{CronJob,v1,""},{Job,v1,""},{Pod,v1,""},{PersistentVolumeClaim,v1,""}}
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdClusterSpec `json:"spec"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdCluster.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}
