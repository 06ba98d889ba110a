package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EtcdBackupSpec asks for one backup of an EtcdCluster, now.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EtcdBackup's spec cannot change: create another EtcdBackup"
type EtcdBackupSpec struct {
	// ClusterName is the EtcdCluster in this namespace to back up.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster",xDescriptors={"urn:alm:descriptor:io.kubernetes:etcd.seedops.io:v1beta1:EtcdCluster"}
	ClusterName string `json:"clusterName"`
	// Destination of this backup; empty uses the cluster's spec.backup destination.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!(has(self.pvc) && has(self.s3))",message="choose one backup destination: pvc or s3"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Destination"
	Destination *BackupDestination `json:"destination,omitempty"`
}

// BackupPhase is where an on-demand backup is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BackupPhase string

const (
	BackupPending   BackupPhase = "Pending"
	BackupRunning   BackupPhase = "Running"
	BackupSucceeded BackupPhase = "Succeeded"
	BackupFailed    BackupPhase = "Failed"
)

// EtcdBackupStatus reports the backup's run and, once it succeeded, the snapshot.
type EtcdBackupStatus struct {
	// Phase: Pending, Running, Succeeded or Failed. Succeeded and Failed are final.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase BackupPhase `json:"phase,omitempty"`
	// JobName is the Job that takes the backup.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// ClusterUID is the UID of the EtcdCluster the backup was taken of, recorded when its Job is created: a
	// later cluster of the same name counts only its own backups, never a deleted predecessor's.
	// +optional
	ClusterUID types.UID `json:"clusterUID,omitempty"`
	// Location of the snapshot: pvc://<claim>/<key> or s3://<bucket>/<key>.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Location",xDescriptors={"urn:alm:descriptor:text"}
	Location string `json:"location,omitempty"`
	// Destination the snapshot was stored in, resolved from the spec or the cluster's spec.backup when the
	// backup started (a cluster restoring from this backup reads it from here).
	// +optional
	Destination *BackupDestination `json:"destination,omitempty"`
	// Key of the snapshot on its claim or in its bucket.
	// +optional
	Key string `json:"key,omitempty"`
	// SizeBytes of the snapshot file.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Size (bytes)",xDescriptors={"urn:alm:descriptor:text"}
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Revision is the etcd revision the snapshot holds.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Revision",xDescriptors={"urn:alm:descriptor:text"}
	Revision int64 `json:"revision,omitempty"`
	// EtcdVersion of the member the snapshot came from.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// SHA256 of the snapshot's database, as etcd appended it.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// StartTime and CompletionTime bound the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Error says why the backup failed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Error",xDescriptors={"urn:alm:descriptor:text"}
	Error string `json:"error,omitempty"`
}

// EtcdBackup is one on-demand backup of an EtcdCluster. It runs the same code as scheduled backups, in a
// Job, and records where the snapshot went; a new EtcdCluster can bootstrap from it.
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="an EtcdBackup's name must have at most 63 characters: it labels the backup's Job and pod"
// +kubebuilder:resource:categories=etcd
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=".status.revision"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=".status.sizeBytes"
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=".status.location",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +operator-sdk:csv:customresourcedefinitions:displayName="etcd Backup",resources={{Event,v1,""},{Job,v1,""},{Pod,v1,""}}
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdBackupSpec `json:"spec"`
	// +optional
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackup.
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackup{}, &EtcdBackupList{})
}
