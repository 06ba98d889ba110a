package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/maintenance"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// TestSnapshotServerWait: what status says of a snapshot server's pod that does not serve yet.
func TestSnapshotServerWait(t *testing.T) {
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-snap-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: resources.SnapshotServerContainerName, Args: []string{"serve-snapshot", "--key=k", "--pvc-claim=old-backups"}}}}}
		edit(p)
		return p
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	stopped := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
		Message: `{"error":"no snapshot at pvc://old-backups/k"}`}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string // substrings; none for ""
	}{
		{"ready", pod(func(p *corev1.Pod) { p.Status.Conditions = []corev1.PodCondition{ready} }), nil},
		{"ready after a failed start", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{ready}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.SnapshotServerContainerName, LastTerminationState: stopped}}
		}), nil},
		{"unschedulable", pod(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 node(s) had volume node affinity conflict."}}
		}), []string{"c-snap-0", "node of the backup claim old-backups", "volume node affinity conflict"}},
		{"stopped: snapshot missing", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.SnapshotServerContainerName,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: stopped}}
		}), []string{"it stopped: no snapshot at pvc://old-backups/k"}},
		{"image not pulled", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.SnapshotServerContainerName,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}), []string{"ImagePullBackOff: Back-off pulling image"}},
		{"starting", pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.SnapshotServerContainerName,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}), []string{"not ready yet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := snapshotServerWait(tc.pod)
			if (got == "") != (len(tc.want) == 0) {
				t.Fatalf("got %q, want one with %q", got, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}

// TestProgressingNamesTheSnapshotServer: while members wait for the snapshot server, Progressing says so,
// even once a member gave up waiting: the server is what to fix. The member's failure stays in Degraded.
func TestProgressingNamesTheSnapshotServer(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1}}
	c.Spec.Replicas = 3
	obs := statusObservation([]bool{false, false, false}, nil)
	obs.reachable = false
	obs.snapshotServerWait = "members restoring from a backup claim wait for the snapshot server (pod c-snap-0): it is not ready yet"
	obs.restoreFailed = "member c-0 could not restore: the snapshot server did not serve it within 2m0s"
	s := computeStatus(c, obs, membership.Decision{Phase: membership.PhaseBootstrapping}, maintenance.SpaceStep{}, nil, nil, time.Now())
	if p := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionProgressing); p.Reason != ReasonWaitingForSnapshotServer || p.Message != obs.snapshotServerWait {
		t.Fatalf("Progressing %s: %s", p.Reason, p.Message)
	}
	if d := meta.FindStatusCondition(s.Conditions, etcdv1beta1.ConditionDegraded); d.Reason != ReasonRestoreFailed {
		t.Fatalf("Degraded %s: %s", d.Reason, d.Message)
	}
}
