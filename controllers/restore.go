package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// restoreSource resolves spec.bootstrap.fromBackup. A non-empty wait says why the cluster cannot start yet
// (the EtcdBackup is missing or has not succeeded); nothing is created until it resolves.
func (r *EtcdClusterReconciler) restoreSource(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*resources.RestoreSource, string, error) {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		return nil, "", nil
	}
	from := c.Spec.Bootstrap.FromBackup
	switch {
	case from.PVC != nil:
		return &resources.RestoreSource{Destination: etcdv1beta1.BackupDestination{PVC: from.PVC}, Key: from.Key}, "", nil
	case from.S3 != nil:
		return &resources.RestoreSource{Destination: etcdv1beta1.BackupDestination{S3: from.S3}, Key: from.Key}, "", nil
	}
	b := &etcdv1beta1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: from.BackupName}, b)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("EtcdBackup %s not found in namespace %s", from.BackupName, c.Namespace), nil
	case err != nil:
		return nil, "", err
	case b.Status.Phase == etcdv1beta1.BackupFailed:
		return nil, fmt.Sprintf("EtcdBackup %s failed (%s): it will never hold a snapshot; bootstrap is immutable, so delete this cluster and create it from another backup",
			from.BackupName, b.Status.Error), nil
	case b.Status.Phase != etcdv1beta1.BackupSucceeded || b.Status.Destination == nil:
		phase := string(b.Status.Phase)
		if phase == "" {
			phase = string(etcdv1beta1.BackupPending)
		}
		return nil, fmt.Sprintf("EtcdBackup %s is %s; the cluster starts once it has succeeded", from.BackupName, phase), nil
	}
	return &resources.RestoreSource{Destination: *b.Status.Destination, Key: b.Status.Key}, "", nil
}

// restoreInTemplate is the restore source the member pod template carries: the snapshot until the status
// records that every member restored it, then none. Members that join later (a scale-up, a replaced
// member) start empty and catch up from the others, so they must not depend on the backup claim or the
// S3 credentials still being there. Dropping it changes the template once, and the members are then
// rolled one at a time like any other template change.
func restoreInTemplate(c *etcdv1beta1.EtcdCluster, src *resources.RestoreSource) *resources.RestoreSource {
	if c.Status.RestoredFrom != "" {
		return nil
	}
	return src
}

// restoreLocation is the user-facing address of a restore source.
func restoreLocation(src *resources.RestoreSource) string {
	if src.Destination.S3 != nil {
		return "s3://" + src.Destination.S3.Bucket + "/" + src.Key
	}
	return "pvc://" + src.Destination.PVC.ClaimName + "/" + src.Key
}

// restoreCompleted reports evidence that the members hold the restored snapshot: every member pod's
// restore init container finished well, and at least one restored the snapshot. The others either found
// the data a restore for this cluster wrote (the restore step checks the member's ID against the cluster's
// token, and fails on any other data) or started after the cluster formed, and joined it instead of
// restoring: on a loaded node a pod can start after the restored members have formed the cluster, and its
// data then comes from them. Without this evidence, status never claims a restore happened.
func restoreCompleted(pods []corev1.Pod) bool {
	restored := false
	for i := range pods {
		finished := false
		for _, cs := range pods[i].Status.InitContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != resources.RestoreContainerName || t == nil || t.ExitCode != 0 {
				continue
			}
			var res struct {
				Restored bool `json:"restored"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &res) != nil {
				continue
			}
			finished = true
			restored = restored || res.Restored
		}
		if !finished {
			return false
		}
	}
	return restored
}
