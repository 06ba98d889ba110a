package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
)

// TestAgentAnswerFresh: an answer of the agent stands for the health interval, for the pod it came from as
// that pod was then.
func TestAgentAnswerFresh(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	a := agentAnswer{pod: "uid-1/41", at: at}
	for _, tc := range []struct {
		name string
		pod  string
		now  time.Time
		want bool
	}{
		{"just asked", "uid-1/41", at, true},
		{"within the interval", "uid-1/41", at.Add(29 * time.Second), true},
		{"the interval passed", "uid-1/41", at.Add(30 * time.Second), false},
		{"the pod changed (ready again, touched)", "uid-1/42", at.Add(time.Second), false},
		{"another pod", "uid-2/41", at.Add(time.Second), false},
		{"a clock that went back", "uid-1/41", at.Add(-time.Second), false},
	} {
		if got := a.fresh(tc.pod, tc.now, 30*time.Second); got != tc.want {
			t.Errorf("%s: fresh = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRequeueAfterRenewsAgentAnswer: a cluster whose agent answered is looked at again when that answer is
// due for renewal, also without member pods (which alone are no reason to look).
func TestRequeueAfterRenewsAgentAnswer(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	r := &EtcdClusterReconciler{Clock: clocktesting.NewFakePassiveClock(now)}
	c := &etcdv1beta1.EtcdCluster{}
	for _, tc := range []struct {
		name string
		obs  observation
		want time.Duration
	}{
		{"no pods, agent not asked", observation{}, 0},
		{"no pods, asked 10s ago", observation{continuousAt: now.Add(-10 * time.Second)}, 21 * time.Second},
		{"at rest, asked 10s ago", observation{pods: []corev1.Pod{{}}, continuousAt: now.Add(-10 * time.Second)}, 21 * time.Second},
		{"at rest, asked now", observation{pods: []corev1.Pod{{}}, continuousAt: now}, r.healthInterval()},
	} {
		if got := r.requeueAfter(c, tc.obs, membership.Decision{Phase: membership.PhaseStable}, false, false); got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", tc.name, got, tc.want)
		}
	}
}
