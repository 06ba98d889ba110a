package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// DiagnosticsPrefix starts every line DumpNamespace writes, so that a CI log's reader (and .ci/run's failure
// summary) finds what the cluster looked like when a spec failed.
const DiagnosticsPrefix = "[diagnostics] "

// DumpNamespace writes what a failed spec's namespace holds: each EtcdCluster's phase, conditions and
// members, each pod's state, and the latest warning events.
func (f *Framework) DumpNamespace(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := ginkgo.GinkgoWriter
	line := func(format string, args ...any) {
		_, _ = fmt.Fprintf(w, DiagnosticsPrefix+"%s: "+format+"\n", append([]any{ns}, args...)...)
	}
	clusters := &etcdv1beta1.EtcdClusterList{}
	if err := f.Client.List(ctx, clusters, client.InNamespace(ns)); err != nil {
		line("listing EtcdClusters: %v", err)
	}
	for _, c := range clusters.Items {
		line("EtcdCluster %s: generation %d (observed %d), phase %s, ready %d/%d", c.Name, c.Generation,
			c.Status.ObservedGeneration, c.Status.Phase, c.Status.ReadyReplicas, c.Spec.Replicas)
		for _, cond := range c.Status.Conditions {
			line("  %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
		for _, m := range c.Status.Members {
			line("  member %s id %s learner=%v healthy=%v version %s", m.Name, m.ID, m.Learner, m.Healthy, m.Version)
		}
	}
	pods := &corev1.PodList{}
	if err := f.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		line("listing pods: %v", err)
	}
	for _, p := range pods.Items {
		var states []string
		for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			states = append(states, fmt.Sprintf("%s=%s(restarts %d)", s.Name, containerState(s), s.RestartCount))
		}
		line("pod %s: %s ready=%v %s", p.Name, p.Status.Phase, PodReady(&p), strings.Join(states, " "))
	}
	events := &eventsv1.EventList{}
	if err := f.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		line("listing events: %v", err)
	}
	slices.SortFunc(events.Items, func(a, b eventsv1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	var warnings []eventsv1.Event
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			warnings = append(warnings, e)
		}
	}
	for _, e := range warnings[max(0, len(warnings)-15):] {
		line("warning %s %s/%s: %s", eventTime(e).Format(time.TimeOnly), e.Regarding.Kind, e.Regarding.Name, e.Reason+": "+oneLine(e.Note))
	}
}

func containerState(s corev1.ContainerStatus) string {
	switch {
	case s.State.Running != nil:
		return "running"
	case s.State.Waiting != nil:
		return "waiting:" + s.State.Waiting.Reason
	case s.State.Terminated != nil:
		return fmt.Sprintf("terminated:%s(%d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
	}
	return "unknown"
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	if e.DeprecatedLastTimestamp.After(e.DeprecatedFirstTimestamp.Time) {
		return e.DeprecatedLastTimestamp.Time
	}
	return e.DeprecatedFirstTimestamp.Time
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
