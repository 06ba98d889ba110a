package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/maintenance"
)

// TestNoSpaceBoundFollowsTheQuota: the NOSPACE alarm is disarmed below 80% of the quota the members run
// with, whatever its size, and a Blocked message names the setting that raises it.
func TestNoSpaceBoundFollowsTheQuota(t *testing.T) {
	const gi = int64(1) << 30
	quotaEnv := func(bytes string) corev1.Pod {
		return corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd",
			Env: []corev1.EnvVar{{Name: "ETCD_QUOTA_BACKEND_BYTES", Value: bytes}}}}}}
	}
	for _, tc := range []struct {
		name      string
		storage   string
		explicit  string       // spec.etcd.quotaBackendSize
		pods      []corev1.Pod // by ordinal; none: pods without the variable
		fileBytes int64        // every member's file after compaction and defragmentation
		want      maintenance.SpaceStepKind
		advice    string // a part of the Blocked reason
	}{
		{name: "explicit 8Gi quota, 3Gi files", storage: "20Gi", explicit: "8Gi",
			pods:      []corev1.Pod{quotaEnv("8589934592"), quotaEnv("8589934592"), quotaEnv("8589934592")},
			fileBytes: 3 * gi, want: maintenance.SpaceDisarm},
		{name: "derived 8Gi quota, 3Gi files", storage: "20Gi", fileBytes: 3 * gi, want: maintenance.SpaceDisarm},
		{name: "derived 4Gi quota, 3Gi files", storage: "10Gi", fileBytes: 3 * gi, want: maintenance.SpaceDisarm},
		{name: "derived 4Gi quota, 3.5Gi files", storage: "10Gi", fileBytes: 7 * gi / 2, want: maintenance.SpaceBlocked,
			advice: "grow spec.storageSize"},
		{name: "derived quota at its 8Gi bound", storage: "40Gi", fileBytes: 7 * gi, want: maintenance.SpaceBlocked,
			advice: "spec.etcd.quotaBackendSize"},
		{name: "explicit quota, full", storage: "20Gi", explicit: "8Gi", fileBytes: 7 * gi, want: maintenance.SpaceBlocked,
			advice: "grow spec.etcd.quotaBackendSize"},
		{name: "a member still running with its pod's smaller quota", storage: "20Gi", explicit: "8Gi",
			pods:      []corev1.Pod{quotaEnv("8589934592"), quotaEnv("4294967296"), quotaEnv("8589934592")},
			fileBytes: 7 * gi / 2, want: maintenance.SpaceBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1beta1.EtcdCluster{}
			c.Spec.Replicas = 3
			c.Spec.StorageSize = resource.MustParse(tc.storage)
			if tc.explicit != "" {
				q := resource.MustParse(tc.explicit)
				c.Spec.Etcd.QuotaBackendSize = &q
			}
			obs := statusObservation([]bool{true, true, true}, nil)
			obs.alarms = []etcd.Alarm{{MemberID: 100, Type: etcd.AlarmNoSpace}}
			for i, m := range obs.members {
				obs.statuses[m.ID] = etcd.EndpointStatus{MemberID: m.ID, Revision: 9, DBSize: tc.fileBytes, DBSizeInUse: tc.fileBytes}
				pod := corev1.Pod{}
				if tc.pods != nil {
					pod = tc.pods[i]
				}
				obs.podByOrdinal[i] = &pod
			}
			c.Status.CompactedRevision = 9 // recovered at the current revision: the plan disarms or blocks
			got := maintenance.PlanSpace(obs.spaceInput(c))
			if got.Kind != tc.want {
				t.Fatalf("step %q (%s), want %q", got.Kind, got.Reason, tc.want)
			}
			if !strings.Contains(got.Reason, tc.advice) {
				t.Fatalf("reason %q does not say %q", got.Reason, tc.advice)
			}
		})
	}
}
