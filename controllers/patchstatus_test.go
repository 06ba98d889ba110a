package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// TestPatchStatusOfADeletedObject: a cluster or backup deleted during its reconcile has no status to write,
// which is no error (the reconcile would otherwise fail and be retried for an object that is gone).
func TestPatchStatusOfADeletedObject(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := etcdv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&etcdv1beta1.EtcdCluster{}, &etcdv1beta1.EtcdBackup{}).Build()
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "gone", ResourceVersion: "1"}

	before := &etcdv1beta1.EtcdCluster{ObjectMeta: meta}
	after := before.DeepCopy()
	after.Status.Phase = etcdv1beta1.PhaseRunning
	if err := (&EtcdClusterReconciler{Client: cl}).patchStatus(context.Background(), before, after); err != nil {
		t.Errorf("cluster: %v", err)
	}

	b := &etcdv1beta1.EtcdBackup{ObjectMeta: meta}
	bAfter := b.DeepCopy()
	bAfter.Status.Phase = etcdv1beta1.BackupRunning
	if err := (&EtcdBackupReconciler{Client: cl}).patchStatus(context.Background(), b, bAfter); err != nil {
		t.Errorf("backup: %v", err)
	}
}
