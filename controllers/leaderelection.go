package controllers

import (
	"fmt"
	"time"

	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElectionID names the Lease the operator's replicas elect their leader with.
const LeaderElectionID = "etcd-operator.etcd.seedops.io"

// leaderRenewDeadline is controller-runtime's default RenewDeadline, which the manager keeps using.
const leaderRenewDeadline = 10 * time.Second

// LeaderLock is the leader-election Lease of namespace held under the pod's own name. A container that
// crashed and that the kubelet restarts in the same pod then takes its lease back at once (client-go lets
// a holder renew its own lease), instead of waiting out the lease of the process it replaces: a crashed
// operator is back at work after its restart, not a lease duration later. Pod names are unique in a
// namespace and a pod runs one instance of its container at a time, so no two live processes share the
// name. Outside a pod (podName empty) it returns nil: controller-runtime's lock, named after the host and
// a random suffix, is used.
func LeaderLock(cfg *rest.Config, namespace, podName string) (resourcelock.Interface, error) {
	if podName == "" {
		return nil, nil
	}
	if namespace == "" {
		return nil, fmt.Errorf("leader election under the pod's name needs the pod's namespace")
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// As controller-runtime does: one hung request must not cost the lease.
	cfg.Timeout = leaderRenewDeadline / 2
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, LeaderElectionID, core, coordination,
		resourcelock.ResourceLockConfig{Identity: podName})
}
