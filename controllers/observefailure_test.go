package controllers

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// clientRefusingPodLists is a fake API server holding cluster c that answers every pod list with err, so
// the reconcile cannot observe the cluster.
func clientRefusingPodLists(scheme *runtime.Scheme, c *etcdv1beta1.EtcdCluster, err error) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(c).WithStatusSubresource(c).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				return err
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
}

// TestStatusSaysWhyWhenObservationFails: a reconcile that cannot even observe its cluster still reports,
// for the current generation, that it is not converging and why.
func TestStatusSaysWhyWhenObservationFails(t *testing.T) {
	scheme := testScheme(t)
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 4},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 3, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(false)}}}
	c.Status.ObservedGeneration = 3
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonQuorumHealthy, LastTransitionTime: metav1.Now()},
		{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonReconciled, LastTransitionTime: metav1.Now()}}
	boom := errors.New("the API server refused to list pods")
	cl := clientRefusingPodLists(scheme, c, boom)
	r := &EtcdClusterReconciler{Client: cl, Recorder: &events.FakeRecorder{}, Options: resources.DefaultOptions()}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); !errors.Is(err, boom) {
		t.Fatalf("reconcile error %v, want the observation's", err)
	}
	got := &etcdv1beta1.EtcdCluster{}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 4 {
		t.Errorf("observedGeneration %d, want 4", got.Status.ObservedGeneration)
	}
	p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing)
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != ReasonReconcileFailed || p.Message != boom.Error() {
		t.Errorf("Progressing %+v: it must say the reconcile failed and why", p)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue {
		t.Errorf("Degraded %+v", d)
	}
}

// TestPodCannotStart: the kubelet's reasons a member's etcd cannot run, including the moment between a
// crash and the back-off, and none for a container that is starting, running or exited once.
func TestPodCannotStart(t *testing.T) {
	pod := func(st corev1.ContainerState, restarts int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "member-gate", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
			{Name: "etcd", State: st, RestartCount: restarts},
		}}}
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	exited := func(code int32) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: code}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"image missing", pod(waiting("ImagePullBackOff", "Back-off pulling image"), 0), "ImagePullBackOff: Back-off pulling image"},
		{"crash loop", pod(waiting("CrashLoopBackOff", ""), 3), "CrashLoopBackOff"},
		{"exited again, before the back-off", pod(exited(1), 3), "Error: exit code 1, restarted 3 times"},
		{"exited once", pod(exited(1), 0), ""},
		{"stopped cleanly", pod(exited(0), 2), ""},
		{"creating", pod(waiting("ContainerCreating", ""), 0), ""},
		{"running", pod(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, 1), ""},
	} {
		if got := podCannotStart(tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPodUnschedulable: the scheduler's reason a member pod is not placed, which a learner that never starts
// is reported with; none once it is scheduled or before the scheduler has said.
func TestPodUnschedulable(t *testing.T) {
	pod := func(conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"anti-affinity on too few nodes", pod(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."}),
			"Unschedulable: 0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."},
		{"scheduled", pod(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}), ""},
		{"not yet looked at", pod(), ""},
	} {
		if got := podUnschedulable(tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
