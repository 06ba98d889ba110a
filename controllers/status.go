package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Condition reasons.
const (
	ReasonQuorumHealthy    = "QuorumHealthy"
	ReasonQuorumLost       = "QuorumLost"
	ReasonBootstrapping    = "Bootstrapping"
	ReasonCreating         = "Creating"
	ReasonScaling          = "Scaling"
	ReasonUpgrading        = "Upgrading"
	ReasonReconciled       = "Reconciled"
	ReasonPaused           = "Paused"
	ReasonMembersUnhealthy = "MembersUnhealthy"
	ReasonEtcdUnreachable  = "EtcdUnreachable"
	ReasonAsExpected       = "AsExpected"
)

// observation is what the controller saw of a cluster's pods and etcd members.
type observation struct {
	statefulSetExists bool
	pods              []corev1.Pod
	readyReplicas     int32
	outdatedPods      []string
	members           []etcdv1alpha1.MemberStatus
	// etcdObserved is true when etcd itself answered; members then come from its member list.
	etcdObserved   bool
	etcdErr        error
	currentVersion string
	clientEndpoint string
}

// observe reads the member pods and, when some are ready and a Dialer is set, etcd itself.
func (r *EtcdClusterReconciler) observe(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (observation, error) {
	obs := observation{clientEndpoint: resources.ClientEndpoint(c, r.Options)}
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}, sts)
	if err != nil && !apierrors.IsNotFound(err) {
		return obs, err
	}
	obs.statefulSetExists = err == nil

	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return obs, err
	}
	obs.pods = pods.Items
	slices.SortFunc(obs.pods, func(a, b corev1.Pod) int { return ordinal(a.Name) - ordinal(b.Name) })
	image := resources.Image(c)
	var readyURLs []string
	for i := range obs.pods {
		p := &obs.pods[i]
		ready := podReady(p)
		url := resources.MemberClientURL(c, ordinal(p.Name), r.Options)
		if ready {
			obs.readyReplicas++
			readyURLs = append(readyURLs, url)
		}
		if podImage(p) != image {
			obs.outdatedPods = append(obs.outdatedPods, p.Name)
		}
		obs.members = append(obs.members, etcdv1alpha1.MemberStatus{Name: p.Name, ClientURL: url, Healthy: ready})
	}
	if r.Dialer != nil && len(readyURLs) > 0 {
		members, version, err := r.observeEtcd(ctx, readyURLs, obs.pods)
		if err != nil {
			obs.etcdErr = err
		} else {
			obs.etcdObserved, obs.members, obs.currentVersion = true, members, version
		}
	}
	return obs, nil
}

// observeEtcd reads the member list and every member's own status. A member is healthy when it answers
// and its pod is ready.
func (r *EtcdClusterReconciler) observeEtcd(ctx context.Context, endpoints []string, pods []corev1.Pod) ([]etcdv1alpha1.MemberStatus, string, error) {
	cli, err := r.Dialer.Dial(ctx, endpoints)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = cli.Close() }()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, "", err
	}
	readyPods := map[string]bool{}
	for i := range pods {
		readyPods[pods[i].Name] = podReady(&pods[i])
	}
	var out []etcdv1alpha1.MemberStatus
	lowest := ""
	for _, m := range list {
		ms := etcdv1alpha1.MemberStatus{Name: m.Name, ID: strconv.FormatUint(m.ID, 16), Learner: m.IsLearner}
		if ms.Name == "" {
			ms.Name = "unstarted-" + ms.ID // added to etcd, not started yet
		}
		if len(m.ClientURLs) > 0 {
			ms.ClientURL = m.ClientURLs[0]
			st, err := cli.Status(ctx, m.ClientURLs[0])
			if err == nil {
				ms.Healthy = len(st.Errors) == 0 && readyPods[m.Name]
				ms.Leader = st.Leader == m.ID
				ms.Version = st.Version
				ms.DBSizeBytes = st.DBSize
				if lowest == "" || versionLess(st.Version, lowest) {
					lowest = st.Version
				}
			}
		}
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b etcdv1alpha1.MemberStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, lowest, nil
}

// computeStatus derives the whole status from the observation. It is pure, so every condition and phase
// rule is covered by table tests.
func computeStatus(c *etcdv1alpha1.EtcdCluster, obs observation, reconcileErr error, now time.Time) etcdv1alpha1.EtcdClusterStatus {
	s := *c.Status.DeepCopy()
	s.ObservedGeneration = c.Generation
	s.Replicas = int32(len(obs.pods))
	s.ReadyReplicas = obs.readyReplicas
	s.Members = obs.members
	s.ClientEndpoint = obs.clientEndpoint
	s.Selector = labels.SelectorFromSet(resources.SelectorLabels(c)).String()
	if obs.etcdObserved {
		s.CurrentVersion = obs.currentVersion
	}

	quorum := resources.Quorum(c.Spec.Replicas)
	healthy := obs.readyReplicas
	if obs.etcdObserved {
		healthy = 0
		for _, m := range obs.members {
			if m.Healthy && !m.Learner {
				healthy++
			}
		}
	}
	prevAvail := meta.FindStatusCondition(s.Conditions, etcdv1alpha1.ConditionAvailable)
	formed := healthy >= quorum || (prevAvail != nil && (prevAvail.Reason == ReasonQuorumHealthy || prevAvail.Reason == ReasonQuorumLost))
	set := func(t string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg,
			ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(now)})
	}

	// Available: a quorum of voting members is healthy.
	switch {
	case healthy >= quorum:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d members healthy (quorum %d)", healthy, c.Spec.Replicas, quorum))
	case formed:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonQuorumLost,
			fmt.Sprintf("only %d of %d members healthy; quorum needs %d", healthy, c.Spec.Replicas, quorum))
	default:
		set(etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonBootstrapping,
			fmt.Sprintf("waiting for members to start: %d of %d ready, quorum needs %d", healthy, c.Spec.Replicas, quorum))
	}

	// Progressing: the cluster is still moving towards its spec.
	switch {
	case c.Spec.Paused:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonPaused, "reconciliation is paused (spec.paused)")
	case !obs.statefulSetExists || !formed:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonCreating,
			fmt.Sprintf("creating %d members", c.Spec.Replicas))
	case int32(len(obs.pods)) != c.Spec.Replicas:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonScaling,
			fmt.Sprintf("scaling from %d to %d members", len(obs.pods), c.Spec.Replicas))
	case len(obs.outdatedPods) > 0:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonUpgrading,
			fmt.Sprintf("%d of %d members not yet on %s: %s", len(obs.outdatedPods), len(obs.pods), c.Spec.Version, strings.Join(obs.outdatedPods, ", ")))
	default:
		set(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonReconciled, "all managed objects match the spec")
	}

	// Degraded: the operator cannot converge, or a formed cluster has an unhealthy member.
	var unhealthy []string
	for _, m := range obs.members {
		if !m.Healthy {
			unhealthy = append(unhealthy, m.Name)
		}
	}
	switch {
	case reconcileErr != nil:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonReconcileFailed, reconcileErr.Error())
	case obs.etcdErr != nil:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonEtcdUnreachable, obs.etcdErr.Error())
	case formed && (len(unhealthy) > 0 || healthy < c.Spec.Replicas):
		msg := fmt.Sprintf("%d of %d members healthy", healthy, c.Spec.Replicas)
		if len(unhealthy) > 0 {
			msg += "; unhealthy: " + strings.Join(unhealthy, ", ")
		}
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonMembersUnhealthy, msg)
	default:
		set(etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "no problems observed")
	}

	s.Phase = phaseOf(c, s.Conditions)
	return s
}

// phaseOf summarises the conditions in one word.
func phaseOf(c *etcdv1alpha1.EtcdCluster, conds []metav1.Condition) etcdv1alpha1.ClusterPhase {
	avail := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionAvailable)
	switch {
	case c.Spec.Paused:
		return etcdv1alpha1.PhasePaused
	case avail.Reason == ReasonBootstrapping:
		return etcdv1alpha1.PhasePending
	case avail.Status != metav1.ConditionTrue:
		return etcdv1alpha1.PhaseUnavailable
	case meta.IsStatusConditionTrue(conds, etcdv1alpha1.ConditionDegraded):
		return etcdv1alpha1.PhaseDegraded
	case meta.IsStatusConditionTrue(conds, etcdv1alpha1.ConditionProgressing):
		return etcdv1alpha1.PhaseProgressing
	default:
		return etcdv1alpha1.PhaseRunning
	}
}

func podReady(p *corev1.Pod) bool {
	if !p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podImage(p *corev1.Pod) string {
	for _, ctr := range p.Spec.Containers {
		if ctr.Name == "etcd" {
			return ctr.Image
		}
	}
	return ""
}

// ordinal is the StatefulSet ordinal at the end of a member name, or -1.
func ordinal(name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}

// versionLess compares dotted numeric versions.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}
