package controllers

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup/continuous"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Annotations on member volume claims: the only intent the operator persists outside etcd.
const (
	// AnnotationMemberID records which etcd member's data a claim holds (hex ID).
	AnnotationMemberID = "etcd.seedops.io/member-id"
	// AnnotationReplace marks a claim whose data is being replaced (a heal in progress).
	AnnotationReplace = "etcd.seedops.io/replace"
)

// annotationSelectedNode is where the scheduler records the node it chose for a claim bound on first use
// (node-local storage): the only node a pod of that claim can run on.
const annotationSelectedNode = "volume.kubernetes.io/selected-node"

// observation is what the controller saw of a cluster's pods, volumes and etcd members.
type observation struct {
	// options are the operator's, with the cluster's own DNS domain (clusterOptions).
	options resources.Options
	// urls resolve the cluster's members under that domain.
	urls           MemberURLs
	statefulSet    *appsv1.StatefulSet // nil when absent
	pods           []corev1.Pod        // sorted by ordinal
	podByOrdinal   map[int]*corev1.Pod
	clientURLs     map[int]string // of the member pods
	pvcByOrdinal   map[int]*corev1.PersistentVolumeClaim
	readyReplicas  int32
	outdatedPods   []string
	clientEndpoint string
	// nodes is the readiness of the nodes the member pods are bound to, by name.
	nodes map[string]nodeReadiness

	// etcd, when it answered.
	reachable bool
	etcdErr   error
	members   []etcd.Member
	statuses  map[uint64]etcd.EndpointStatus
	ordinals  map[uint64]int
	healthy   map[uint64]bool
	// electing: voters that answered, ready, saying only that they know no leader (memberHealth). Status
	// counts them healthy; the operator acts only on healthy members.
	electing map[uint64]bool
	// initialClusterIntact: etcd's members are exactly those it bootstrapped with, and one of them never
	// started (only then is it looked at: it takes one more call).
	initialClusterIntact bool
	// previous is the last reported status of each member, by name.
	previous map[string]etcdv1beta1.MemberStatus

	// restore is the resolved spec.bootstrap.fromBackup; restoreWait says why it cannot start yet, and
	// restoreFailed why a member's restore failed.
	restore       *resources.RestoreSource
	restoreWait   string
	restoreFailed string
	// restoreReportDue: the point-in-time Job failed, and its pods' reports of why are awaited until then.
	restoreReportDue time.Time
	// snapshotServerWait says why members restoring from a claim wait for its snapshot server ("" when
	// it serves or there is none).
	snapshotServerWait string
	// continuous is the continuous backup agent's report, or continuousProblem why there is none;
	// continuousAt is when the agent said so (zero when it was not asked).
	continuous        *continuous.Report
	continuousProblem string
	continuousAt      time.Time
	// backups are the cluster's finished backup Jobs whose results status has not reported yet.
	backups []backupRun
	// authEnabled is whether etcd authentication is on (nil: not known).
	authEnabled *bool
	// survivors are the member pods' own answers when the member list could not be read (no majority).
	survivors []survivor
	// forcing is a quorum-loss recovery's instruction in the members' configuration (nil when none).
	forcing *membership.ForceNewCluster
	// restoring is the configuration's record of a recovery from a backup (nil when none), and
	// recoveryBackups the snapshots such a recovery can restore (recovery.go).
	restoring       *membership.RestoreRecovery
	recoveryBackups []recoveryBackup
	// continuousPoint is the newest point of the cluster's continuous backup such a recovery can replay
	// (nil with continuousPointProblem saying why, while the spec recovers from a backup and continuous
	// backup is on), and replay what became of the recorded recovery's replay Job.
	continuousPoint        *membership.Backup
	continuousPointProblem string
	replay                 replayState
	// alarms are etcd's active alarms (nil when etcd could not list them).
	alarms []etcd.Alarm
	// tls is the cluster's CA and certificates; tlsStatus what status reports of them.
	tls       tlsObservation
	tlsStatus *etcdv1beta1.TLSStatus
	// revisions are the digests of the StatefulSet's revisions that pods not on its update revision run,
	// and of the update revision, by name (revisionDigests); placement what the member pods' nodes are
	// (memberNodes), by name.
	revisions map[string]string
	placement map[string]memberNode
}

// MemberURLs resolves a member to the URLs the operator registers in etcd and dials.
type MemberURLs interface {
	PeerURL(c *etcdv1beta1.EtcdCluster, ordinal int) string
	ClientURL(c *etcdv1beta1.EtcdCluster, ordinal int) string
}

// dnsURLs are the members' stable DNS names through the headless Service.
type dnsURLs struct{ o resources.Options }

func (u dnsURLs) PeerURL(c *etcdv1beta1.EtcdCluster, i int) string {
	return resources.MemberPeerURL(c, i, u.o)
}

func (u dnsURLs) ClientURL(c *etcdv1beta1.EtcdCluster, i int) string {
	return resources.MemberClientURL(c, i, u.o)
}

func (r *EtcdClusterReconciler) urlsFor(o resources.Options) MemberURLs {
	if r.URLs != nil {
		return r.URLs
	}
	return dnsURLs{o}
}

// clusterOptions are the operator's options with the DNS domain the cluster's members were created under,
// read from the StatefulSet's template (or, while it is being replaced, from a member pod). A formed
// cluster's names are part of its identity (the peer URLs etcd has registered, the names its certificates
// carry), so a changed --cluster-domain applies to new clusters only. The template's probe settings are
// kept too while its etcd image is the desired one: they change with the next roll, never cause one.
func clusterOptions(base resources.Options, c *etcdv1beta1.EtcdCluster, sts *appsv1.StatefulSet, pods []corev1.Pod) resources.Options {
	if spec := memberPodSpec(sts, pods); spec != nil {
		if domain := advertisedDomain(spec); domain != "" {
			base.ClusterDomain = domain
		}
		if t, ok := templateProbes(spec, resources.Image(c, base)); ok {
			base.Probes = t
		}
	}
	return base
}

// templateProbes are the probe settings of the spec's etcd container when it runs image and has the
// startup, liveness and readiness probes the operator sets.
func templateProbes(spec *corev1.PodSpec, image string) (resources.ProbeSettings, bool) {
	for _, ctr := range spec.Containers {
		if ctr.Name != "etcd" || ctr.Image != image || ctr.StartupProbe == nil || ctr.ReadinessProbe == nil ||
			ctr.LivenessProbe == nil || ctr.StartupProbe.HTTPGet == nil || ctr.LivenessProbe.HTTPGet == nil {
			continue
		}
		return resources.ProbeSettings{
			StartupPeriod: ctr.StartupProbe.PeriodSeconds, StartupTimeout: ctr.StartupProbe.TimeoutSeconds,
			StartupFailures: ctr.StartupProbe.FailureThreshold, ReadinessPeriod: ctr.ReadinessProbe.PeriodSeconds,
			ReadinessTimeout: ctr.ReadinessProbe.TimeoutSeconds, ReadinessFailures: ctr.ReadinessProbe.FailureThreshold,
			StartupPath: ctr.StartupProbe.HTTPGet.Path, LivenessPath: ctr.LivenessProbe.HTTPGet.Path,
		}, true
	}
	return resources.ProbeSettings{}, false
}

// memberPodSpec is the pod spec the cluster's members run: the StatefulSet's template, or, while the
// StatefulSet is being replaced with its pods kept, a member pod's; nil for a cluster with neither.
func memberPodSpec(sts *appsv1.StatefulSet, pods []corev1.Pod) *corev1.PodSpec {
	switch {
	case sts != nil:
		return &sts.Spec.Template.Spec
	case len(pods) > 0:
		return &pods[0].Spec
	}
	return nil
}

// advertisedDomain is the cluster domain in the etcd container's advertised peer URL
// ("<scheme>://$(POD_NAME).<service>.$(POD_NAMESPACE).svc.<domain>:<port>"), "" if there is none.
func advertisedDomain(spec *corev1.PodSpec) string {
	for _, ctr := range spec.Containers {
		if ctr.Name != "etcd" {
			continue
		}
		for _, env := range ctr.Env {
			if env.Name != "ETCD_INITIAL_ADVERTISE_PEER_URLS" {
				continue
			}
			_, rest, ok := strings.Cut(env.Value, ".svc.")
			if !ok {
				return ""
			}
			if i := strings.LastIndex(rest, ":"); i >= 0 {
				rest = rest[:i]
			}
			return rest
		}
	}
	return ""
}

// observe reads the StatefulSet, member pods and claims, and, when member pods exist, etcd itself.
func (r *EtcdClusterReconciler) observe(ctx context.Context, c *etcdv1beta1.EtcdCluster) (observation, error) {
	obs := observation{
		podByOrdinal: map[int]*corev1.Pod{},
		clientURLs:   map[int]string{},
		pvcByOrdinal: map[int]*corev1.PersistentVolumeClaim{},
		previous:     map[string]etcdv1beta1.MemberStatus{},
	}
	for _, m := range c.Status.Members {
		obs.previous[m.Name] = m
	}
	var err error
	if obs.statefulSet, err = r.statefulSet(ctx, c); err != nil {
		return obs, err
	}

	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return obs, err
	}
	obs.pods = pods.Items
	if obs.nodes, err = r.observeNodes(ctx, obs.pods); err != nil {
		return obs, err
	}
	obs.options = clusterOptions(r.Options, c, obs.statefulSet, obs.pods)
	obs.urls = r.urlsFor(obs.options)
	obs.clientEndpoint = resources.ClientEndpoint(c, obs.options)

	if obs.tls, err = r.observeTLS(ctx, c, obs.statefulSet, obs.options); err != nil {
		return obs, err
	}
	obs.tlsStatus = tlsStatus(c, obs.tls, obs.options)

	obs.restoreFailed = resources.RestoreFailure(obs.pods)
	if b := c.Spec.Bootstrap; b != nil && b.FromBackup != nil && b.FromBackup.PointInTime != nil {
		var failed string
		if obs.restore, obs.restoreWait, failed, obs.restoreReportDue, err = r.pointInTimeSource(ctx, c); err != nil {
			return obs, err
		}
		if failed != "" {
			// Refused: no member may start (an empty cluster is not what was asked for).
			obs.restoreWait = failed
			if obs.restoreFailed == "" {
				obs.restoreFailed = failed
			}
		}
	} else if obs.restore, obs.restoreWait, err = r.restoreSource(ctx, c); err != nil {
		return obs, err
	}
	if obs.snapshotServerWait, err = r.observeSnapshotServer(ctx, c); err != nil {
		return obs, err
	}
	obs.continuous, obs.continuousProblem, obs.continuousAt = r.observeContinuousBackup(ctx, c)
	if obs.backups, err = r.observeBackups(ctx, c); err != nil {
		return obs, err
	}
	slices.SortFunc(obs.pods, func(a, b corev1.Pod) int {
		return resources.MemberOrdinal(c, a.Name) - resources.MemberOrdinal(c, b.Name)
	})
	if obs.revisions, err = r.revisionDigests(ctx, c, obs.statefulSet, obs.pods); err != nil {
		return obs, err
	}
	if obs.placement, err = r.memberNodes(ctx, obs.pods); err != nil {
		return obs, err
	}
	for i := range obs.pods {
		p := &obs.pods[i]
		obs.podByOrdinal[resources.MemberOrdinal(c, p.Name)] = p
		obs.clientURLs[resources.MemberOrdinal(c, p.Name)] = obs.urls.ClientURL(c, resources.MemberOrdinal(c, p.Name))
		if podReady(p) {
			obs.readyReplicas++
		}
		if !podUpToDate(p, c, obs.statefulSet, obs.options, obs.revisions) {
			obs.outdatedPods = append(obs.outdatedPods, p.Name)
		}
	}
	cm := &corev1.ConfigMap{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.ConfigMapName(c)}, cm); {
	case err == nil:
		obs.forcing = resources.ForceNewClusterOf(cm.Data)
		obs.restoring = resources.RestoreRecoveryOf(cm.Data)
	case !apierrors.IsNotFound(err):
		return obs, err
	}
	if obs.recoveryBackups, err = r.recoveryBackups(ctx, c, obs.restoring); err != nil {
		return obs, err
	}
	if c.Spec.Recovery.QuorumLoss == etcdv1beta1.QuorumLossFromBackup {
		obs.continuousPoint, obs.continuousPointProblem = continuousRecoveryPoint(c, obs.continuous, obs.continuousProblem)
	}
	if obs.replay, err = r.observeRecoveryReplay(ctx, c, obs.restoring); err != nil {
		return obs, err
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return obs, err
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if ord := resources.MemberOrdinal(c, strings.TrimPrefix(pvc.Name, resources.DataVolumeName+"-")); ord >= 0 {
			obs.pvcByOrdinal[ord] = pvc
		}
	}
	if err := r.confirmMissingClaims(ctx, c, &obs); err != nil {
		return obs, err
	}

	if r.Dialer != nil && len(obs.pods) > 0 {
		obs.etcdErr = r.observeEtcd(ctx, c, &obs)
		obs.reachable = obs.etcdErr == nil
	}
	return obs, nil
}

// statefulSet returns the cluster's StatefulSet, nil when there is none. A miss in the cache is confirmed
// with the API server: the cache may not have caught up with a StatefulSet created moments ago, and every
// decision that follows (bootstrap or not, TLS or not, which member template) differs for a cluster that
// has one. The live read happens only while the cache has none, so a cluster at rest costs nothing.
func (r *EtcdClusterReconciler) statefulSet(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*appsv1.StatefulSet, error) {
	key := client.ObjectKey{Namespace: c.Namespace, Name: resources.StatefulSetName(c)}
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, key, sts)
	if apierrors.IsNotFound(err) {
		err = r.liveReader().Get(ctx, key, sts)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return sts, nil
}

// observeEtcd reads the member list and asks each member about itself.
func (r *EtcdClusterReconciler) observeEtcd(ctx context.Context, c *etcdv1beta1.EtcdCluster, obs *observation) error {
	cli, err := r.dial(ctx, c, obs, sortedClientURLs(*obs))
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	obs.members, err = cli.MemberList(ctx)
	if err != nil {
		if obs.formed(c) {
			// The member list needs a majority; each member still answers for itself, which tells a
			// human what survives a lost quorum.
			obs.survivors = surveyMembers(ctx, cli, *obs)
		}
		return err
	}
	if on, err := cli.AuthEnabled(ctx); err == nil {
		obs.authEnabled = &on
	}
	if alarms, err := cli.Alarms(ctx); err == nil {
		obs.alarms = alarms
	}
	obs.statuses, obs.ordinals, obs.healthy, obs.electing = map[uint64]etcd.EndpointStatus{}, map[uint64]int{}, map[uint64]bool{}, map[uint64]bool{}
	// Members are asked at once, not one after the other: members that do not answer each cost the call's
	// timeout, and in turn they would delay the report of an outage by that much per member.
	endpoints := make([]string, len(obs.members))
	for i, m := range obs.members {
		if len(m.ClientURLs) > 0 { // else not started yet
			endpoints[i] = m.ClientURLs[0]
		}
	}
	answers := askEach(ctx, cli, endpoints)
	for i, m := range obs.members {
		obs.ordinals[m.ID] = memberOrdinal(c, m, obs.urls)
		if !answers[i].asked {
			continue
		}
		pod := obs.podByOrdinal[obs.ordinals[m.ID]]
		if answers[i].err != nil {
			// The operator's own call failed (a network fault on its side, a member busy defragmenting):
			// that is no evidence against the member. The kubelet's readiness check of the member's own
			// /health, which needs quorum, decides.
			obs.healthy[m.ID] = !m.IsLearner && pod != nil && podReady(pod)
			continue
		}
		obs.statuses[m.ID] = answers[i].status
		obs.healthy[m.ID], obs.electing[m.ID] = memberHealth(m, answers[i].status, pod != nil && podReady(pod))
	}
	obs.initialClusterIntact = initialClusterIntact(ctx, cli, c, obs.members)
	return nil
}

// memberHealth judges a member that answered its status call. It is healthy when it answers without errors
// (but NOSPACE, the cluster's, and another member's CORRUPT) and its pod passes readiness (which needs
// quorum; another member's CORRUPT fails every member's, and then the answer alone judges); a learner cannot pass
// readiness, so answering is enough. A ready voter that says only that it knows no leader is electing:
// the cluster is choosing a leader (one stalled by its own defragmentation was voted out, one restarted),
// which takes a second or two and is no member's fault. Its readiness, which fails only after a leader
// has been missing for its whole failure budget, tells an election from a member cut off for good, so
// status reports it by that; the operator changes nothing while a member is not healthy.
func memberHealth(m etcd.Member, st etcd.EndpointStatus, ready bool) (healthy, electing bool) {
	errs := healthErrors(m.ID, st.Errors)
	ready = ready || corruptElsewhere(m.ID, st.Errors) && len(errs) == 0
	return len(errs) == 0 && (m.IsLearner || ready), !m.IsLearner && ready && etcd.AwaitsLeader(errs)
}

// initialClusterIntact reports whether members, of which one never started and none is a learner, are
// exactly the cluster etcd bootstrapped under c's initial cluster token (membergate.IsInitialCluster).
func initialClusterIntact(ctx context.Context, cli etcd.Client, c *etcdv1beta1.EtcdCluster, members []etcd.Member) bool {
	peers, unstarted := map[uint64][]string{}, false
	for _, m := range members {
		if m.IsLearner {
			return false
		}
		unstarted = unstarted || len(m.ClientURLs) == 0
		peers[m.ID] = m.PeerURLs
	}
	if !unstarted {
		return false
	}
	id, err := cli.ClusterID(ctx)
	return err == nil && membergate.IsInitialCluster(id, peers, resources.InitialClusterToken(c))
}

// memberAnswer is one member's answer to the status call.
type memberAnswer struct {
	asked  bool
	status etcd.EndpointStatus
	err    error
}

// askEach asks every endpoint ("" is skipped) for its status, all at once: members that do not answer each
// cost the call's timeout, and one after the other they would delay the report of an outage by that much
// per member.
func askEach(ctx context.Context, cli etcd.Client, endpoints []string) []memberAnswer {
	answers := make([]memberAnswer, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		if ep == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].status, answers[i].err = cli.Status(ctx, ep)
			answers[i].asked = true
		}()
	}
	wg.Wait()
	return answers
}

// survivor is one member pod's own answer while the member list cannot be read.
type survivor struct {
	name     string
	answered bool
	status   etcd.EndpointStatus
}

// surveyMembers asks each member pod, by ordinal, about itself.
func surveyMembers(ctx context.Context, cli etcd.Client, obs observation) []survivor {
	ordinals := slices.Sorted(maps.Keys(obs.clientURLs))
	endpoints := make([]string, len(ordinals))
	for i, ord := range ordinals {
		endpoints[i] = obs.clientURLs[ord]
	}
	answers := askEach(ctx, cli, endpoints)
	out := make([]survivor, len(ordinals))
	for i, ord := range ordinals {
		out[i] = survivor{name: obs.podByOrdinal[ord].Name, answered: answers[i].err == nil, status: answers[i].status}
	}
	return out
}

// dial connects to the members, over TLS with the operator's client certificate when the cluster serves TLS.
func (r *EtcdClusterReconciler) dial(ctx context.Context, c *etcdv1beta1.EtcdCluster, obs *observation, endpoints []string) (etcd.Client, error) {
	if err := obs.tls.refused(); err != nil {
		return nil, err
	}
	if resources.TLSEnabled(c) && obs.tls.clientConfig == nil {
		if obs.tls.clientErr != nil {
			return nil, obs.tls.clientErr
		}
		return nil, fmt.Errorf("the client certificate (Secret %s) is not issued yet", resources.ClientSecretName(c))
	}
	return r.Dialer.Dial(ctx, endpoints, obs.tls.clientConfig)
}

// memberOrdinal maps an etcd member to its StatefulSet ordinal: by the name it started with (the pod's
// name, whatever URL it registered: a changed cluster domain must not make the operator's own members
// strangers), or by peer URL for a member that has not started yet; -1 for a member the operator does
// not know.
func memberOrdinal(c *etcdv1beta1.EtcdCluster, m etcd.Member, urls MemberURLs) int {
	if m.Name != "" {
		return resources.MemberOrdinal(c, m.Name)
	}
	if len(m.PeerURLs) == 0 {
		return -1
	}
	for ord := range maxMembers {
		if m.PeerURLs[0] == urls.PeerURL(c, ord) {
			return ord
		}
	}
	return peerURLOrdinal(c, m.PeerURLs[0])
}

// peerURLOrdinal reads the ordinal from a stable peer URL "<scheme>://<cluster>-<n>.<peer service>.<ns>.svc..."
// whatever its cluster domain; -1 when the URL is not one of this cluster's.
func peerURLOrdinal(c *etcdv1beta1.EtcdCluster, peerURL string) int {
	u, err := url.Parse(peerURL)
	if err != nil {
		return -1
	}
	pod, rest, ok := strings.Cut(u.Hostname(), ".")
	if !ok || !strings.HasPrefix(rest, resources.PeerServiceName(c)+"."+c.Namespace+".svc") {
		return -1
	}
	return resources.MemberOrdinal(c, pod)
}

// maxMembers bounds the ordinals considered (replicas are at most 7; one more for a learner in flight).
const maxMembers = 16

// unanswered reports whether a started member did not answer its status call.
func (obs observation) unanswered() bool {
	for _, m := range obs.members {
		if _, ok := obs.statuses[m.ID]; len(m.ClientURLs) > 0 && !ok {
			return true
		}
	}
	return false
}

// formed reports whether the cluster has ever reached quorum: an etcd member serves clients (the member
// list included) only once it has joined one.
func (obs observation) formed(c *etcdv1beta1.EtcdCluster) bool {
	return obs.reachable || reportedQuorum(c)
}

// unhealthySince is when member name was first seen unhealthy: kept from the last status, else now.
func (obs observation) unhealthySince(name string, now time.Time) time.Time {
	if prev, ok := obs.previous[name]; ok && prev.UnhealthySince != nil {
		return prev.UnhealthySince.Time
	}
	return now
}

// recordedClaim is the claim UID the last status recorded for member id (empty if none).
func (obs observation) recordedClaim(name string, id uint64) string {
	if prev, ok := obs.previous[name]; ok && prev.ID == strconv.FormatUint(id, 16) {
		return prev.VolumeClaimUID
	}
	return ""
}

// claimReplaced reports whether member id's ordinal now has another claim than the one recorded as
// holding its data: the data is gone, whatever etcd says about the member.
func (obs observation) claimReplaced(name string, id uint64, ord int) bool {
	pvc := obs.pvcByOrdinal[ord]
	recorded := obs.recordedClaim(name, id)
	return pvc != nil && recorded != "" && string(pvc.UID) != recorded
}

// voters is the number of voting members (the spec's size when etcd cannot be asked).
func (obs observation) voters(c *etcdv1beta1.EtcdCluster) int32 {
	if !obs.reachable {
		return c.Spec.Replicas
	}
	var n int32
	for _, m := range obs.members {
		if !m.IsLearner {
			n++
		}
	}
	return n
}

// planInput turns the observation into the planner's input.
func (obs observation) planInput(c *etcdv1beta1.EtcdCluster, now time.Time, healAfter time.Duration) membership.Observed {
	in := membership.Observed{
		Desired:              int(c.Spec.Replicas),
		StatefulSetReplicas:  -1,
		Formed:               obs.formed(c),
		Reachable:            obs.reachable,
		InitialClusterIntact: obs.initialClusterIntact,
		Pods:                 map[int]membership.Pod{},
		Volumes:              map[int]membership.Volume{},
		Now:                  now,
		HealAfter:            healAfter,
		TargetVersion:        c.Spec.Version,
	}
	if avail := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable); avail != nil && avail.Status == metav1.ConditionTrue {
		in.QuorumSince = avail.LastTransitionTime.Time
	} else {
		in.QuorumSince = now // quorum is being regained now (or was never seen): no heal clock ran before
	}
	for _, m := range c.Status.Members {
		if ord := resources.MemberOrdinal(c, m.Name); ord >= 0 && !m.Unknown {
			in.KnownOrdinals = append(in.KnownOrdinals, ord)
		}
	}
	if obs.statefulSet != nil && obs.statefulSet.Spec.Replicas != nil {
		in.StatefulSetReplicas = int(*obs.statefulSet.Spec.Replicas)
	}
	if obs.statefulSet != nil {
		// New pods get the StatefulSet's template, and a gate once there stays (memberGate).
		in.JoinGated = hasMemberGate(&obs.statefulSet.Spec.Template.Spec)
	}
	in.StrictSpread = resources.StrictSpread(c)
	in.MaxLearners = obs.learnersEveryMemberAccepts()
	if in.StatefulSetReplicas > 0 && len(obs.pods) == 0 && !in.Formed {
		in.StatefulSetReplicas = 0 // no pod ever started: the bootstrap size may still follow the spec
	}
	outdated := map[string]bool{}
	for _, n := range obs.outdatedPods {
		outdated[n] = true
	}
	for ord, p := range obs.podByOrdinal {
		node := obs.nodes[p.Spec.NodeName]
		in.Pods[ord] = membership.Pod{Ready: podReady(p), UpToDate: !outdated[p.Name], Terminating: !p.DeletionTimestamp.IsZero(),
			CannotStart: podCannotStart(p), NeverRan: resources.EtcdNeverRan(p), Pending: podUnschedulable(p), StaleData: gateRefusal(p), Created: p.CreationTimestamp.Time, UID: string(p.UID),
			GateHoldsForRecovery: gateHoldsForRecovery(&p.Spec), RestoreRecovery: restoreRecoveryOf(&p.Spec),
			Node: p.Spec.NodeName, NodeDown: node.down, NodeDownSince: node.since}
	}
	in.Recovery = obs.recoveryInput(c)
	for ord, pvc := range obs.pvcByOrdinal {
		id, _ := strconv.ParseUint(pvc.Annotations[AnnotationMemberID], 16, 64)
		in.Volumes[ord] = membership.Volume{MemberID: id, Replace: pvc.Annotations[AnnotationReplace] == "true",
			Deleting: !pvc.DeletionTimestamp.IsZero(), Created: pvc.CreationTimestamp.Time, Node: pvc.Annotations[annotationSelectedNode]}
	}
	var leader uint64
	for _, st := range obs.statuses {
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	for _, m := range obs.members {
		st, answered := obs.statuses[m.ID]
		pm := membership.Member{
			ID: m.ID, Ordinal: obs.ordinals[m.ID], Name: m.Name, Learner: m.IsLearner,
			Started: len(m.ClientURLs) > 0, Healthy: obs.healthy[m.ID], Leader: m.ID == leader,
			Answered: answered, RaftIndex: st.RaftIndex, Version: st.Version,
		}
		if len(m.PeerURLs) > 0 {
			pm.PeerURL = m.PeerURLs[0]
		}
		if pm.Ordinal >= 0 && obs.claimReplaced(m.Name, m.ID, pm.Ordinal) {
			pm.ClaimReplaced = true
		}
		if !pm.Healthy {
			pm.UnhealthySince = obs.unhealthySince(m.Name, now)
		}
		in.Members = append(in.Members, pm)
	}
	return in
}

// recoveryInput is what quorum-loss recovery needs: the spec's choice, since when the majority is lost, the
// voters last known (status keeps them while etcd cannot be asked) and whether each still has its data, and
// what the members that still answer say of themselves.
func (obs observation) recoveryInput(c *etcdv1beta1.EtcdCluster) membership.Recovery {
	rc := membership.Recovery{
		FromSurvivor:      c.Spec.Recovery.QuorumLoss == etcdv1beta1.QuorumLossFromSurvivor,
		FromBackup:        c.Spec.Recovery.QuorumLoss == etcdv1beta1.QuorumLossFromBackup,
		Backup:            newestBackup(obs.recoveryBackups),
		Continuous:        obs.continuousPoint,
		ContinuousProblem: obs.continuousPointProblem,
		After:             defaultRecoveryAfter,
		Survivors:         map[int]membership.Survivor{},
		Forcing:           obs.forcing,
		Restoring:         obs.restoring,
	}
	if a := c.Spec.Recovery.After; a != nil {
		rc.After = a.Duration
	}
	if obs.restoring != nil && obs.replay.id == obs.restoring.ID {
		rc.ReplayFailed = obs.replay.failed
	}
	if obs.statefulSet != nil {
		rc.TemplateGateHolds = gateHoldsForRecovery(&obs.statefulSet.Spec.Template.Spec)
	}
	rc.TemplateRestores = obs.templateRestores()
	if avail := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable); avail != nil &&
		avail.Status == metav1.ConditionFalse && avail.Reason == ReasonQuorumLost {
		rc.LostSince = avail.LastTransitionTime.Time
	}
	for _, m := range c.Status.Members {
		ord := resources.MemberOrdinal(c, m.Name)
		id, err := strconv.ParseUint(m.ID, 16, 64)
		if ord < 0 || err != nil || m.Learner || m.Unknown {
			continue
		}
		pvc := obs.pvcByOrdinal[ord]
		// A claim other than the one recorded as holding the member's data is a new, empty one.
		hasData := pvc != nil && pvc.DeletionTimestamp.IsZero() && (m.VolumeClaimUID == "" || m.VolumeClaimUID == string(pvc.UID))
		rc.Voters = append(rc.Voters, membership.Voter{Ordinal: ord, ID: id, Name: m.Name, HasData: hasData})
	}
	for _, s := range obs.survivors {
		if ord := resources.MemberOrdinal(c, s.name); s.answered && ord >= 0 {
			rc.Survivors[ord] = membership.Survivor{ID: s.status.MemberID, RaftIndex: s.status.RaftIndex, Learner: s.status.IsLearner}
		}
	}
	return rc
}

// templateRestores is the recovery the members' template restores for ("" for none).
func (obs observation) templateRestores() string {
	if obs.statefulSet == nil {
		return ""
	}
	return restoreRecoveryOf(&obs.statefulSet.Spec.Template.Spec)
}

// defaultRecoveryAfter is spec.recovery.after's default (the CRD sets it; this covers objects stored before).
const defaultRecoveryAfter = 5 * time.Minute

// podUpToDate: the pod runs the StatefulSet's update revision, or a revision whose template differs from it
// only in placement (revisions holds their digests: revisionDigests); before the StatefulSet controller
// reported a revision, the pod runs the desired image. Placement (affinity, topology spread constraints) is
// read only when a pod is scheduled: restarting a member for it would move nothing already placed, and an
// operator upgrade that changes the default placement would restart every member of every cluster. A new
// placement applies when a member's pod is next created.
func podUpToDate(p *corev1.Pod, c *etcdv1beta1.EtcdCluster, sts *appsv1.StatefulSet, o resources.Options, revisions map[string]string) bool {
	if revisionKnown(sts) {
		rev := p.Labels[appsv1.ControllerRevisionHashLabelKey]
		if rev == sts.Status.UpdateRevision {
			return true
		}
		digest, update := revisions[rev], revisions[sts.Status.UpdateRevision]
		return digest != "" && digest == update
	}
	return podImage(p) == resources.Image(c, o)
}

// podCannotStart is the kubelet's reason why the pod's etcd container cannot run: a failure, not one of the
// passing states of a starting container (ContainerCreating, PodInitializing); "" otherwise.
func podCannotStart(p *corev1.Pod) string {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name != "etcd" {
			continue
		}
		// Between a crash and the kubelet's back-off the container shows as exited: a crash loop (an etcd
		// flag it refuses, say) must not look like a member that merely stopped for that moment.
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 && st.RestartCount > 0 {
			return fmt.Sprintf("%s: exit code %d, restarted %d times", t.Reason, t.ExitCode, st.RestartCount)
		}
		if st.State.Waiting == nil {
			continue
		}
		switch reason := st.State.Waiting.Reason; reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
			"CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			if msg := st.State.Waiting.Message; msg != "" {
				return reason + ": " + msg
			}
			return reason
		}
	}
	return ""
}

// podUnschedulable is the scheduler's reason why the pod is not placed on a node (anti-affinity on too few
// nodes, a claim that cannot be provisioned), "" once it is scheduled or while the scheduler has not said.
func podUnschedulable(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason != "" {
			if cond.Message != "" {
				return cond.Reason + ": " + cond.Message
			}
			return cond.Reason
		}
	}
	return ""
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
