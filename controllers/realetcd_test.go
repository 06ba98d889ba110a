package controllers

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
)

// realNS is served by a second manager whose controller talks to real etcd processes; the processes
// stand in for the member pods, started and stopped by fakeKubelet as the StatefulSet says.
const realNS = "etcd-real"

// processURLs resolves members to the local etcd processes.
type processURLs struct{ c *etcdtest.Cluster }

func (u processURLs) PeerURL(_ *etcdv1beta1.EtcdCluster, i int) string   { return u.c.PeerURL(i) }
func (u processURLs) ClientURL(_ *etcdv1beta1.EtcdCluster, i int) string { return u.c.ClientURL(i) }

// fakeKubelet plays the StatefulSet controller and the kubelet for one cluster: a pod per ordinal below
// the StatefulSet's size, each an etcd process configured from the operator's ConfigMap, ready when
// etcd says it is healthy; a deleted pod's process stops.
type fakeKubelet struct {
	c       *etcdtest.Cluster
	cluster *etcdv1beta1.EtcdCluster
	dialer  etcd.Dialer

	mu         sync.Mutex
	violations []string
	// checks counts the comparisons checkAgreement made: a check that never ran proves nothing.
	checks    int
	clientTLS *tls.Config
	// down are the ordinals whose node is gone: their process stays stopped and their pod unready.
	down map[int]bool
	// nodeOf binds each ordinal's new pods to a node ("" leaves them unbound, as most specs do). A bound
	// pod's deletion waits for its kubelet, played here, unless its node is lost.
	nodeOf map[int]string
	// lost are nodes without a kubelet (powered off): the processes of pods bound there stay stopped,
	// nothing confirms the deletion of such a pod or reports on it, and a claim it uses stays while it
	// exists (pvc-protection), unless it was deleted with grace period 0.
	lost map[string]bool
	// gateless plays member pods from before the member gate: etcd starts at once on an empty claim.
	gateless bool
	// idleReason is why the last sync stopped early ("" when it ran).
	idleReason string
	// tickets plays each member pod's own volume, where its gate leaves a forced start's ticket (by
	// ordinal: the pod UID it names); ticketed are the pods whose gate ran the forced start (a gate runs
	// once per pod, etcd at every start of its container); forcedStarts counts the tickets etcd took.
	tickets      map[int]types.UID
	ticketed     map[types.UID]bool
	forcedStarts int
}

// forcedStartsTaken is how many times etcd started with --force-new-cluster.
func (k *fakeKubelet) forcedStartsTaken() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.forcedStarts
}

// playGateless makes the kubelet start member pods as if their template had no member gate.
func (k *fakeKubelet) playGateless(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gateless = on
}

// gated reports whether a pod of template spec runs the member gate before etcd.
func (k *fakeKubelet) gated(spec *corev1.PodSpec) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.gateless && hasMemberGate(spec)
}

// setDown takes the given members' nodes away (none: brings every node back).
func (k *fakeKubelet) setDown(ordinals ...int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.down = map[int]bool{}
	for _, i := range ordinals {
		k.down[i] = true
	}
}

func (k *fakeKubelet) isDown(i int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.down[i]
}

// placeOn binds ordinal i's new pods to node ("" unbinds them).
func (k *fakeKubelet) placeOn(i int, node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nodeOf == nil {
		k.nodeOf = map[int]string{}
	}
	k.nodeOf[i] = node
}

func (k *fakeKubelet) nodeFor(i int) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nodeOf[i]
}

// loseNode takes node's kubelet away (powered off), or brings it back.
func (k *fakeKubelet) loseNode(node string, lost bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost == nil {
		k.lost = map[string]bool{}
	}
	k.lost[node] = lost
}

func (k *fakeKubelet) nodeLost(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return node != "" && k.lost[node]
}

// tlsConfig authenticates as the cluster's client certificate (nil before it is issued).
func (k *fakeKubelet) tlsConfig() *tls.Config {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.clientTLS
}

// materializeTLS writes the cluster's certificates where the processes read them, as the kubelet keeps a
// Secret volume up to date: the server certificate and CA as the operator issued them. The peer
// certificate is issued here from the cluster's CA for 127.0.0.1, because the operator's names the
// members' DNS names, which local processes do not have. It says why the files are not ready yet.
func (k *fakeKubelet) materializeTLS(ctx context.Context) error {
	server, client, caSecret := &corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}
	for name, s := range map[string]*corev1.Secret{resources.ServerSecretName(k.cluster): server,
		resources.ClientSecretName(k.cluster): client, resources.CASecretName(k.cluster): caSecret} {
		if err := k8sClient.Get(ctx, key(realNS, name), s); err != nil {
			return err
		}
	}
	t := k.c.TLS
	Expect(os.MkdirAll(filepath.Dir(t.CA), 0o700)).To(Succeed())
	for path, data := range map[string][]byte{t.CA: server.Data["ca.crt"], t.ServerCert: server.Data["tls.crt"], t.ServerKey: server.Data["tls.key"]} {
		if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, data) {
			Expect(os.WriteFile(path+".tmp", data, 0o600)).To(Succeed())
			Expect(os.Rename(path+".tmp", path)).To(Succeed())
		}
	}
	if _, err := os.Stat(t.PeerKey); err != nil {
		ca, err := pki.ParseCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
		Expect(err).NotTo(HaveOccurred())
		cert, key, err := ca.Issue(pki.Request{CommonName: "peer", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			Usage: pki.ServerAndClient, Validity: time.Hour}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(t.PeerCert, cert, 0o600)).To(Succeed())
		Expect(os.WriteFile(t.PeerKey, key, 0o600)).To(Succeed())
	}
	cfg, err := etcd.ClientTLSConfig(client.Data["ca.crt"], client.Data["tls.crt"], client.Data["tls.key"])
	Expect(err).NotTo(HaveOccurred())
	k.mu.Lock()
	k.clientTLS = cfg
	k.mu.Unlock()
	return nil
}

func (k *fakeKubelet) run(ctx context.Context) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		k.sync(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stop stops member i's process, saying why when it was running (a restart a spec did not expect is then
// explained in its output).
func (k *fakeKubelet) stop(i int, why string) {
	if k.c.Running(i) {
		GinkgoWriter.Printf("fake kubelet: stopping member %d: %s\n", i, why)
	}
	k.c.Stop(i)
}

// idle says, once per change, why the kubelet does nothing: a spec that waits on it then says what for.
func (k *fakeKubelet) idle(why string) {
	if why != k.idleReason && why != "" {
		GinkgoWriter.Printf("fake kubelet: idle: %s\n", why)
	}
	k.idleReason = why
}

func (k *fakeKubelet) sync(ctx context.Context) {
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, key(realNS, resources.StatefulSetName(k.cluster)), sts); err != nil {
		k.idle("StatefulSet: " + err.Error())
		return
	}
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(k.cluster)), cm); err != nil {
		k.idle("ConfigMap: " + err.Error())
		return
	}
	if k.c.TLS != nil {
		if err := k.materializeTLS(ctx); err != nil {
			k.idle("certificates: " + err.Error())
			return
		}
	}
	k.idle("")
	k.releaseDeletedClaims(ctx)
	replicas := int(*sts.Spec.Replicas)
	for i := range maxMembers {
		name := resources.MemberName(k.cluster, i)
		pod := &corev1.Pod{}
		err := k8sClient.Get(ctx, key(realNS, name), pod)
		switch {
		case i >= replicas:
			if err == nil {
				_ = k8sClient.Delete(ctx, pod)
			}
			k.stop(i, "beyond the StatefulSet's replicas")
			continue
		case apierrors.IsNotFound(err):
			// Its container stops, and a new pod starts; the audit log says who deleted it.
			why := "its pod was deleted"
			if k.c.Running(i) {
				why += ": " + strings.Join(awaitPodDeletions(realNS, name), "; ")
			}
			k.stop(i, why)
			pod = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: realNS, Labels: resources.Labels(k.cluster, resources.ComponentEtcd)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: sts.Spec.Template.Spec.Containers[0].Image}},
					NodeName: k.nodeFor(i)},
			}
			// The pod runs the template's member gate (which the operator reads back from pods).
			if gate := memberGateContainer(&sts.Spec.Template.Spec); gate != nil {
				pod.Spec.InitContainers = []corev1.Container{{Name: gate.Name, Image: gate.Image, Env: gate.DeepCopy().Env, Args: gate.DeepCopy().Args}}
			}
			if err := k8sClient.Create(ctx, pod); err != nil {
				continue
			}
		case err != nil:
			continue
		}
		if k.nodeLost(pod.Spec.NodeName) {
			k.stop(i, "its node "+pod.Spec.NodeName+" is lost")
			continue
		}
		if !pod.DeletionTimestamp.IsZero() {
			// A bound pod's deletion waits for its kubelet: the container stops, then the kubelet confirms.
			k.stop(i, "its pod is being deleted")
			_ = k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
			continue
		}
		if k.isDown(i) {
			k.stop(i, "set down by the test")
			k.setReady(ctx, pod, i)
			continue
		}
		if !k.c.Running(i) {
			if pid := k.c.PID(i); pid == 0 && k.c.HasData(i) {
				GinkgoWriter.Printf("fake kubelet: member %d is not running; starting it\n", i)
			}
			// A kubelet resolves a container's environment when it starts it: the configuration read at the
			// start of this pass may predate a change the operator made before restarting the pod (a
			// forced start's instruction), and the pass may have waited seconds for the audit log since.
			if fresh := (&corev1.ConfigMap{}); k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(k.cluster)), fresh) == nil {
				cm = fresh
			}
			if !k.ensureClaim(ctx, i) || (k.gated(&sts.Spec.Template.Spec) && !k.gateAllows(ctx, i, pod, cm.Data)) {
				continue
			}
			_, hasWAL, _ := membergate.ReadWALMetadata(membergate.WALDir(k.c.DataDir(i)))
			GinkgoWriter.Printf("fake kubelet: starting member %d (WAL %v, state %s)\n", i, hasWAL, cm.Data["ETCD_INITIAL_CLUSTER_STATE"])
			// etcd forces a new cluster only on its own pod's ticket, which it takes (membergate.EtcdStart);
			// the configuration never carries --force-new-cluster.
			var env map[string]string
			if k.takeTicket(i, pod.UID) {
				env = map[string]string{membergate.EnvForceNewCluster: "true"}
				GinkgoWriter.Printf("fake kubelet: starting member %d with %s=true (pod %s's ticket)\n", i, membergate.EnvForceNewCluster, pod.UID)
			}
			if err := k.c.StartWithEnv(i, cm.Data["ETCD_INITIAL_CLUSTER"], cm.Data["ETCD_INITIAL_CLUSTER_STATE"], env); err != nil {
				GinkgoWriter.Printf("fake kubelet: starting member %d: %v\n", i, err)
			}
		}
		k.setReady(ctx, pod, i)
	}
	k.checkAgreement(ctx)
}

// gateAllows plays the member gate (internal/membergate) of a template that has it: it holds an empty
// member that is to join an existing cluster until the gate's own rule (membergate.JoinReady) finds the
// join planned, a member for its peer URL that has never started (the operator's AddLearner), and a member
// with data while the configuration forces another member to start alone; the member it forces starts in
// a pod other than the one the instruction was written against, with a ticket for that pod alone. The
// operator starts new members' pods ahead of their joins only behind the gate; a template without it starts
// etcd at once, as the kubelet does.
func (k *fakeKubelet) gateAllows(ctx context.Context, i int, pod *corev1.Pod, config map[string]string) bool {
	_, hasWAL, _ := membergate.ReadWALMetadata(membergate.WALDir(k.c.DataDir(i)))
	if forced := config[membergate.EnvForceNewClusterMember]; hasWAL && forced != "" {
		if forced != k.c.MemberName(i) || pod.UID == "" || string(pod.UID) == config[membergate.EnvForceNewClusterOldPod] {
			return false
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if !k.ticketed[pod.UID] {
			k.ticketed[pod.UID], k.tickets[i] = true, pod.UID
		}
		return true
	}
	if config["ETCD_INITIAL_CLUSTER_STATE"] != "existing" || hasWAL {
		return true
	}
	var endpoints []string
	for j := range maxMembers {
		if k.c.Running(j) {
			endpoints = append(endpoints, k.c.ClientURL(j))
		}
	}
	members, err := listMembers(ctx, k.dialer, endpoints, k.tlsConfig())
	if err != nil {
		return false
	}
	list := membergate.MemberList{From: "fake kubelet"}
	for _, m := range members {
		list.Members = append(list.Members, membergate.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs,
			ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	ready, _ := membergate.JoinReady(list, []string{k.c.PeerURL(i)})
	return ready
}

// takeTicket takes the forced start's ticket of member i's pod uid, if its gate left one; a ticket of an
// earlier pod went with that pod's volume.
func (k *fakeKubelet) takeTicket(i int, uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.tickets[i]
	delete(k.tickets, i)
	if ok && t == uid {
		k.forcedStarts++
		return true
	}
	return false
}

// ensureClaim plays the member's volume claim: the data directory lives as long as the claim, so a claim the
// operator deleted (or one never created) comes back empty, and a retained claim keeps its data. It reports
// whether the claim is there to start the member on.
func (k *fakeKubelet) ensureClaim(ctx context.Context, i int) bool {
	name := resources.DataVolumeName + "-" + resources.MemberName(k.cluster, i)
	pvc := &corev1.PersistentVolumeClaim{}
	err := k8sClient.Get(ctx, key(realNS, name), pvc)
	switch {
	case err == nil:
		return pvc.DeletionTimestamp.IsZero()
	case !apierrors.IsNotFound(err):
		return false
	}
	if err := k.c.Wipe(i); err != nil {
		return false
	}
	pvc = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: realNS, Labels: resources.Labels(k.cluster, resources.ComponentEtcd)},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	return k8sClient.Create(ctx, pvc) == nil
}

// releaseDeletedClaims plays the pvc-protection controller: a deleted claim goes once no member process
// uses it, and its data with it.
func (k *fakeKubelet) releaseDeletedClaims(ctx context.Context) {
	claims := &corev1.PersistentVolumeClaimList{}
	if k8sClient.List(ctx, claims, client.InNamespace(realNS), client.MatchingLabels(resources.SelectorLabels(k.cluster))) != nil {
		return
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		ord := resources.MemberOrdinal(k.cluster, strings.TrimPrefix(pvc.Name, resources.DataVolumeName+"-"))
		if pvc.DeletionTimestamp.IsZero() || ord < 0 || k.c.Running(ord) || len(pvc.Finalizers) == 0 || k.podOnLostNode(ctx, ord) {
			continue
		}
		_ = k.c.Wipe(ord)
		pvc.Finalizers = nil
		_ = k8sClient.Update(ctx, pvc)
	}
}

// podOnLostNode: ordinal ord's pod exists, bound to a lost node. pvc-protection counts it as using its
// claim, Terminating or not, unless it was deleted with grace period 0.
func (k *fakeKubelet) podOnLostNode(ctx context.Context, ord int) bool {
	pod := &corev1.Pod{}
	if k8sClient.Get(ctx, key(realNS, resources.MemberName(k.cluster, ord)), pod) != nil || !k.nodeLost(pod.Spec.NodeName) {
		return false
	}
	return pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds != 0
}

func (k *fakeKubelet) replicas(ctx context.Context) int {
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, key(realNS, resources.StatefulSetName(k.cluster)), sts); err != nil {
		return -1
	}
	return int(*sts.Spec.Replicas)
}

// setReady mirrors etcd's /health: ready when the member serves a quorum read.
func (k *fakeKubelet) setReady(ctx context.Context, pod *corev1.Pod, i int) {
	ready := corev1.ConditionFalse
	if cli, err := k.dialer.Dial(ctx, []string{k.c.ClientURL(i)}, k.tlsConfig()); err == nil {
		if st, err := cli.Status(ctx, k.c.ClientURL(i)); err == nil && !st.IsLearner && len(st.Errors) == 0 && st.Leader != 0 {
			ready = corev1.ConditionTrue
		}
		_ = cli.Close()
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == ready {
			return
		}
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}
	if err := k8sClient.Status().Update(ctx, pod); err != nil {
		GinkgoWriter.Printf("fake kubelet: pod %s Ready=%s not recorded: %v\n", pod.Name, ready, err)
	}
}

// checkAgreement records any moment where etcd's member list and the StatefulSet disagree beyond the
// one step in flight: a learner just added may wait for its pod slot (add, then raise the StatefulSet),
// and a member just removed may leave its slot behind (remove, then lower the StatefulSet). Pods started
// ahead of their members' joins (behind the member gate) may add slots up to the spec's size, never
// beyond. The member list is read between two reads of the StatefulSet that agree, so the comparison is
// of one moment.
func (k *fakeKubelet) checkAgreement(ctx context.Context) {
	cli, err := k.dialer.Dial(ctx, []string{k.c.ClientURL(0)}, k.tlsConfig())
	if err != nil {
		return
	}
	defer func() { _ = cli.Close() }()
	replicas := k.replicas(ctx)
	members, err := cli.MemberList(ctx)
	spec := &etcdv1beta1.EtcdCluster{}
	if err != nil || replicas < 0 || k8sClient.Get(ctx, client.ObjectKeyFromObject(k.cluster), spec) != nil || k.replicas(ctx) != replicas {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.checks++
	withoutSlot := 0
	for _, m := range members {
		found := false
		for i := range replicas {
			if len(m.PeerURLs) > 0 && m.PeerURLs[0] == k.c.PeerURL(i) {
				found = true
			}
		}
		if !found {
			withoutSlot++
			if !m.IsLearner || len(m.ClientURLs) > 0 || withoutSlot > 1 {
				k.violations = append(k.violations, "member "+m.Name+" has no pod slot (replicas "+itoa(replicas)+")")
			}
		}
	}
	if replicas-len(members) > 1 && replicas > int(spec.Spec.Replicas) {
		k.violations = append(k.violations, "StatefulSet "+itoa(replicas)+" vs "+itoa(len(members))+" members and "+
			itoa(int(spec.Spec.Replicas))+" in the spec")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// startRealManager runs a manager for realNS whose controller dials the local etcd processes.
func startRealManager(procs *etcdtest.Cluster) context.CancelFunc {
	return startRealManagerWithClock(procs, nil)
}

// shiftedClock tells the time some way ahead: a manager on it sees a waiting period over without the test
// waiting it out.
type shiftedClock struct{ by time.Duration }

func (s shiftedClock) Now() time.Time                  { return time.Now().Add(s.by) }
func (s shiftedClock) Since(t time.Time) time.Duration { return s.Now().Sub(t) }

// startRealManagerWithClock is startRealManager whose controller tells the time by clk (nil: the real clock).
func startRealManagerWithClock(procs *etcdtest.Cluster, clk clock.PassiveClock) context.CancelFunc {
	return startRealManagerWith(procs, clk, 0)
}

// startRealManagerWith is startRealManagerWithClock whose controller replaces members unhealthy for
// healAfter (0: the default).
func startRealManagerWith(procs *etcdtest.Cluster, clk clock.PassiveClock, healAfter time.Duration) context.CancelFunc {
	mgr, err := ctrl.NewManager(rest.AddUserAgent(rest.CopyConfig(testEnv.Config), "operator "+realNS), ctrl.Options{
		Scheme:  k8sClient.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   CacheOptions(realNS),
		// A restarted manager registers the same controller name again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&EtcdClusterReconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("etcd-operator"),
		Options: resources.DefaultOptions(), Dialer: etcd.NewDialer(2 * time.Second), URLs: processURLs{procs},
		StepInterval: 300 * time.Millisecond, HealthInterval: 2 * time.Second, Clock: clk, HealAfter: healAfter,
	}).SetupWithManager(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return func() { cancel(); <-done }
}

// etcdMembers lists the ordinals in etcd's member list ("3L" for a learner).
func etcdMembers(ctx context.Context, procs *etcdtest.Cluster, tlsConfig *tls.Config) []string {
	list, err := listMembers(ctx, etcd.NewDialer(2*time.Second), []string{procs.ClientURL(0), procs.ClientURL(1), procs.ClientURL(2)}, tlsConfig)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range list {
		for i := range maxMembers {
			if len(m.PeerURLs) > 0 && m.PeerURLs[0] == procs.PeerURL(i) {
				s := itoa(i)
				if m.IsLearner {
					s += "L"
				}
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// membershipSteps reads etcd_operator_membership_steps_total of c's action and result from the registry the
// manager's metrics endpoint serves.
func membershipSteps(c *etcdv1beta1.EtcdCluster, action membership.ActionType, result string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	want := map[string]string{"namespace": c.Namespace, "cluster": c.Name, "action": string(action), "result": result}
	for _, f := range families {
		if f.GetName() != "etcd_operator_membership_steps_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// listMembers asks the members at endpoints for etcd's member list.
func listMembers(ctx context.Context, dialer etcd.Dialer, endpoints []string, tlsConfig *tls.Config) ([]etcd.Member, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no endpoint")
	}
	cli, err := dialer.Dial(ctx, endpoints, tlsConfig)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	return cli.MemberList(ctx)
}

// spaceQuota is the real-etcd members' space quota.
const spaceQuota = 16 << 20

var _ = Describe("EtcdCluster controller with real etcd", Ordered, func() {
	var (
		ctx         context.Context
		procs       *etcdtest.Cluster
		kubelet     *fakeKubelet
		c           *etcdv1beta1.EtcdCluster
		stopManager context.CancelFunc
	)
	BeforeAll(func() {
		ctx = context.Background()
		bin, err := etcdtest.Binary()
		Expect(err).NotTo(HaveOccurred())
		dir, err := os.MkdirTemp("", "etcd-controller-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realNS}})).To(Succeed())

		c = newCluster(realNS)
		c.Name = "real"
		c.Spec.BackupSchedule = ""
		procs = etcdtest.New(c.Name, dir, bin)
		// A small space quota, so that a spec can fill it (the configuration's quota follows storageSize).
		procs.Env = map[string]string{"ETCD_QUOTA_BACKEND_BYTES": strconv.Itoa(spaceQuota)}
		// TLS is on by default: the members serve the certificates the operator issues.
		tlsDir := filepath.Join(dir, "tls")
		procs.TLS = &etcdtest.TLSFiles{CA: tlsDir + "/ca.crt", ServerCert: tlsDir + "/server.crt",
			ServerKey: tlsDir + "/server.key", PeerCert: tlsDir + "/peer.crt", PeerKey: tlsDir + "/peer.key"}
		DeferCleanup(procs.Close)
		stopManager = startRealManager(procs)
		DeferCleanup(func() { stopManager() })

		kctx, stopKubelet := context.WithCancel(context.Background())
		// The kubelet's own copy of the cluster's name: specs decode into c while the kubelet runs, and a
		// name read mid-decode is empty (a pod "-1" not found reads as member 1's pod deleted).
		kubelet = &fakeKubelet{c: procs, dialer: etcd.NewDialer(2 * time.Second), tickets: map[int]types.UID{}, ticketed: map[types.UID]bool{},
			cluster: &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace}}}
		done := make(chan struct{})
		go func() { defer close(done); kubelet.run(kctx) }()
		DeferCleanup(func() { stopKubelet(); <-done })
	})

	// A member that does not become healthy says why in its own log, which a failed spec's report carries.
	AfterEach(func() {
		if !CurrentSpecReport().Failed() {
			return
		}
		for i := range maxMembers {
			if log := procs.Log(i); log != "" {
				AddReportEntry(fmt.Sprintf("etcd member %d, last lines of its log", i), log)
			}
		}
		AddReportEntry("pod deletions in "+realNS+" (API server audit log)", podDeletionsReport(realNS))
	})

	running := func(n int) func(g Gomega) {
		return func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
			g.Expect(c.Status.Phase).To(Equal(etcdv1beta1.PhaseRunning), "conditions: %v", c.Status.Conditions)
			g.Expect(c.Status.Members).To(HaveLen(n))
			for _, m := range c.Status.Members {
				g.Expect(m.Healthy).To(BeTrue(), m.Name)
				g.Expect(m.Learner).To(BeFalse(), m.Name)
				g.Expect(m.ID).NotTo(BeEmpty(), m.Name)
				g.Expect(m.Version).To(Equal("3.5.35"), m.Name)
			}
			g.Expect(c.Status.CurrentVersion).To(Equal("3.5.35"))
			want := []string{}
			for i := range n {
				want = append(want, itoa(i))
			}
			g.Expect(etcdMembers(ctx, procs, kubelet.tlsConfig())).To(Equal(want))
			sts := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key(realNS, c.Name), sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(Equal(int32(n)))
		}
	}

	It("bootstraps 3 members from a static list", func() {
		start := time.Now()
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		Eventually(running(3), 90*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("bootstrap 3 members: %s\n", time.Since(start))
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(c)), cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("ETCD_INITIAL_CLUSTER_STATE", "existing"), "a formed cluster never bootstraps again")
	})

	It("scales 3 to 5 through learners, surviving an operator restart mid-way", func() {
		start := time.Now()
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		// Kill the operator as soon as the first learner exists, then start a new one.
		Eventually(func() int { return len(etcdMembers(ctx, procs, kubelet.tlsConfig())) }, 60*time.Second, 50*time.Millisecond).Should(Equal(4))
		stopManager()
		stopManager = startRealManager(procs)
		Eventually(running(5), 120*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("scale 3->5 with an operator restart: %s\n", time.Since(start))
	})

	It("scales 5 back to 3, removing members before shrinking the StatefulSet", func() {
		start := time.Now()
		removed := membershipSteps(c, membership.ActionRemove, stepTaken)
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 3 })).To(Succeed())
		Eventually(running(3), 120*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("scale 5->3: %s\n", time.Since(start))
		Expect(membershipSteps(c, membership.ActionRemove, stepTaken)-removed).To(BeEquivalentTo(2),
			"the metrics endpoint counts each member removed")
	})

	It("replaces at once a member whose claim was replaced while the operator was down", func() {
		victim := resources.MemberName(c, 1)
		claimName := resources.DataVolumeName + "-" + victim
		var recorded etcdv1beta1.MemberStatus
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			for _, m := range c.Status.Members {
				if m.Name == victim {
					recorded = m
				}
			}
			g.Expect(recorded.VolumeClaimUID).NotTo(BeEmpty(), "status records the claim holding the member's data")
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		oldClaim := &corev1.PersistentVolumeClaim{}
		Expect(k8sClient.Get(ctx, key(realNS, claimName), oldClaim)).To(Succeed())
		Expect(string(oldClaim.UID)).To(Equal(recorded.VolumeClaimUID))

		By("losing the member's claim and pod while no operator runs")
		// A pod from before the member gate: the gate would hold it (the old member still holds its URL).
		kubelet.playGateless(true)
		DeferCleanup(kubelet.playGateless, false)
		stopManager()
		Expect(k8sClient.Delete(ctx, oldClaim)).To(Succeed())
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, key(realNS, victim), pod)).To(Succeed())
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())

		By("the member coming back on a new, empty claim under its old ID")
		// etcd finds the member by its peer URL and starts it with the old ID and an empty log; it then
		// panics on the leader's first heartbeat (commit index beyond its empty log) and the kubelet
		// restarts it, again and again. Had the member been healthy, the data would still be gone.
		idOf := func(g Gomega) string {
			cli, err := etcd.NewDialer(2*time.Second).Dial(ctx, []string{procs.ClientURL(0)}, kubelet.tlsConfig())
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = cli.Close() }()
			list, err := cli.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, m := range list {
				if len(m.PeerURLs) > 0 && m.PeerURLs[0] == procs.PeerURL(1) && !m.IsLearner {
					return strconv.FormatUint(m.ID, 16)
				}
			}
			return ""
		}
		Eventually(func(g Gomega) {
			newClaim := &corev1.PersistentVolumeClaim{}
			g.Expect(k8sClient.Get(ctx, key(realNS, claimName), newClaim)).To(Succeed())
			g.Expect(newClaim.UID).NotTo(Equal(oldClaim.UID))
			g.Expect(procs.HasData(1)).To(BeTrue(), "member 1 started on the new claim")
			g.Expect(idOf(g)).To(Equal(recorded.ID))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())

		By("the operator replacing it with a new member on the new claim, without waiting HealAfter (3m)")
		// The member's recorded claim (status) is not the one its ordinal has now: its data is gone. Before
		// that record, a member seen unhealthy only after its new claim was created waited HealAfter.
		stopManager = startRealManager(procs)
		Eventually(func(g Gomega) {
			running(3)(g)
			id := idOf(g)
			g.Expect(id).NotTo(BeEmpty())
			g.Expect(id).NotTo(Equal(recorded.ID), "the member that rejoined empty was replaced")
			newClaim := &corev1.PersistentVolumeClaim{}
			g.Expect(k8sClient.Get(ctx, key(realNS, claimName), newClaim)).To(Succeed())
			for _, m := range c.Status.Members {
				if m.Name == victim {
					g.Expect(m.ID).To(Equal(id))
					g.Expect(m.VolumeClaimUID).To(Equal(string(newClaim.UID)))
				}
			}
		}, 120*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("serves only TLS clients with a certificate from the cluster's CA", func() {
		Expect(get(ctx, c)).To(Succeed())
		Expect(c.Spec.TLS.Enabled).To(Equal(ptr.To(true)), "the operator records the default")
		Expect(c.Status.TLS).NotTo(BeNil())
		Expect(c.Status.TLS.ClientSecretName).To(Equal(resources.ClientSecretName(c)))
		Expect(c.Status.ClientEndpoint).To(HavePrefix("https://"))
		// Without a client certificate, etcd refuses the connection (client-cert-auth).
		noCert := kubelet.tlsConfig().Clone()
		noCert.Certificates = nil
		cli, err := etcd.NewDialer(2*time.Second).Dial(ctx, []string{procs.ClientURL(0)}, noCert)
		if err == nil {
			_, err = cli.MemberList(ctx)
			_ = cli.Close()
		}
		Expect(err).To(HaveOccurred())
	})

	It("renews a certificate that falls due; members serve it without a restart", func() {
		pids := []int{procs.PID(0), procs.PID(1), procs.PID(2)}
		// Replace the server certificate with one that expires in a minute: well inside the renewal window.
		caSecret, server := &corev1.Secret{}, &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(realNS, resources.CASecretName(c)), caSecret)).To(Succeed())
		Expect(k8sClient.Get(ctx, key(realNS, resources.ServerSecretName(c)), server)).To(Succeed())
		ca, err := pki.ParseCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
		Expect(err).NotTo(HaveOccurred())
		req := resources.LeafCertificates(c, resources.DefaultOptions())[0].Request
		req.Validity = time.Minute
		short, shortKey, err := ca.Issue(req, time.Now())
		Expect(err).NotTo(HaveOccurred())
		server.Data["tls.crt"], server.Data["tls.key"] = short, shortKey
		Expect(k8sClient.Update(ctx, server)).To(Succeed())
		shortCert, _ := pki.ParseCertificate(short)

		// The operator re-issues it for the full duration ...
		var renewed *x509.Certificate
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(realNS, resources.ServerSecretName(c)), server)).To(Succeed())
			cert, err := pki.ParseCertificate(server.Data["tls.crt"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cert.SerialNumber).NotTo(Equal(shortCert.SerialNumber))
			g.Expect(cert.NotAfter).To(BeTemporally(">", time.Now().Add(80*24*time.Hour)))
			renewed = cert
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		// ... status shows its expiry ...
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			var notAfter time.Time
			for _, cs := range c.Status.TLS.Certificates {
				if cs.Name == resources.CertServer {
					notAfter = cs.NotAfter.Time
				}
			}
			g.Expect(notAfter.Equal(renewed.NotAfter)).To(BeTrue(), "status server notAfter %s, want %s", notAfter, renewed.NotAfter)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		// ... and every member presents it on new connections, with the same process as before.
		for i := range 3 {
			Eventually(func(g Gomega) {
				cfg := kubelet.tlsConfig().Clone()
				cfg.ServerName = "127.0.0.1"
				conn, err := tls.Dial("tcp", strings.TrimPrefix(procs.ClientURL(i), "https://"), cfg)
				g.Expect(err).NotTo(HaveOccurred())
				defer func() { _ = conn.Close() }()
				g.Expect(conn.ConnectionState().PeerCertificates[0].SerialNumber).To(Equal(renewed.SerialNumber))
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "member %d", i)
		}
		Expect([]int{procs.PID(0), procs.PID(1), procs.PID(2)}).To(Equal(pids), "no member restarted")
		Eventually(running(3), 30*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("turns etcd authentication on and off on the running cluster", func() {
		caSecret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(realNS, resources.CASecretName(c)), caSecret)).To(Succeed())
		ca, err := pki.ParseCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
		Expect(err).NotTo(HaveOccurred())
		// A client whose certificate names a user etcd does not know.
		nobodyCert, nobodyKey, err := ca.Issue(pki.Request{CommonName: "nobody", Usage: pki.ClientOnly, Validity: time.Hour}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		nobody, err := etcd.ClientTLSConfig(ca.CertPEM, nobodyCert, nobodyKey)
		Expect(err).NotTo(HaveOccurred())
		put := func(cfg *tls.Config, user, password string) error {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{procs.ClientURL(0)}, TLS: cfg, Username: user, Password: password,
				DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err = cli.Put(pctx, "/auth/test", user)
			return err
		}
		Expect(put(nobody, "", "")).To(Succeed(), "without authentication any certificate from the CA may write")

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Auth.Enabled = true })).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.AuthEnabled).To(Equal(ptr.To(true)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(put(nobody, "", "")).To(MatchError(ContainSubstring("permission denied")), "an unknown user is refused")
		Expect(put(kubelet.tlsConfig(), "", "")).To(Succeed(), "the cluster's client certificate is root's")
		password := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(realNS, c.Name+"-root-password"), password)).To(Succeed())
		Expect(password.OwnerReferences).To(ContainElement(HaveField("UID", c.UID)))
		Expect(put(nobody, "root", string(password.Data["password"]))).To(Succeed(), "root's password from the Secret works")
		Expect(put(nobody, "root", "wrong")).To(HaveOccurred())
		// The operator still manages the cluster with authentication on.
		Eventually(running(3), 30*time.Second, 250*time.Millisecond).Should(Succeed())

		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Auth.Enabled = false })).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.AuthEnabled).To(Equal(ptr.To(false)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(put(nobody, "", "")).To(Succeed())
	})

	It("recreates a StatefulSet deleted in the middle of a scale-up at its membership, never bootstrapping again", func() {
		ids := func() map[string]string {
			out := map[string]string{}
			Expect(get(ctx, c)).To(Succeed())
			for _, m := range c.Status.Members {
				out[m.Name] = m.ID
			}
			return out
		}
		before := ids()
		Expect(before).To(HaveLen(3))
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		Eventually(func() int { return len(etcdMembers(ctx, procs, kubelet.tlsConfig())) }, 60*time.Second, 50*time.Millisecond).Should(Equal(4))

		By("deleting the StatefulSet, its pods left running (as kubectl delete --cascade=orphan does)")
		sts := &appsv1.StatefulSet{}
		Expect(k8sClient.Get(ctx, key(realNS, c.Name), sts)).To(Succeed())
		// envtest runs no garbage collector: a plain delete leaves the pods behind, as an orphaning delete
		// does in a cluster (whose "orphan" finalizer only a garbage collector would remove).
		Expect(k8sClient.Delete(ctx, sts)).To(Succeed())

		By("the operator recreating it at the current membership, with new members joining the existing cluster")
		var seen []string
		Eventually(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			if k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(c)), cm) == nil && cm.Data["ETCD_INITIAL_CLUSTER_STATE"] != "existing" {
				seen = append(seen, "ConfigMap state "+cm.Data["ETCD_INITIAL_CLUSTER_STATE"])
			}
			recreated := &appsv1.StatefulSet{}
			if k8sClient.Get(ctx, key(realNS, c.Name), recreated) == nil && recreated.UID != sts.UID &&
				int(*recreated.Spec.Replicas) > len(etcdMembers(ctx, procs, kubelet.tlsConfig()))+1 {
				seen = append(seen, "StatefulSet recreated at "+itoa(int(*recreated.Spec.Replicas)))
			}
			running(5)(g)
		}, 180*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(seen).To(BeEmpty(), "a formed cluster was bootstrapped again")
		after := ids()
		for name, id := range before {
			Expect(after).To(HaveKeyWithValue(name, id), "member %s kept its identity", name)
		}
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 3 })).To(Succeed())
		Eventually(running(3), 120*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("converges when the operator crashes right after each kind of step (failpoints)", func() {
		Expect(failpoint.Enabled).To(BeTrue(), "build the tests with -tags failpoints, as make test does")
		for _, name := range failpoint.All {
			failpoint.Arm(name, 2)
		}
		// Hits armed but not reached would crash the specs that follow, which run reconcilers of their own.
		DeferCleanup(failpoint.Disarm)
		start := time.Now()
		memberLogs := func() string { return "member 3:\n" + procs.Log(3) + "\nmember 4:\n" + procs.Log(4) }
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		Eventually(running(5), 180*time.Second, 250*time.Millisecond).Should(Succeed(), memberLogs)
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1beta1.EtcdCluster).Spec.Replicas = 3 })).To(Succeed())
		Eventually(running(3), 180*time.Second, 250*time.Millisecond).Should(Succeed(), memberLogs)
		// A certificate renewal: the client certificate is replaced by one that is due.
		caSecret, clientSecret := &corev1.Secret{}, &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key(realNS, resources.CASecretName(c)), caSecret)).To(Succeed())
		Expect(k8sClient.Get(ctx, key(realNS, resources.ClientSecretName(c)), clientSecret)).To(Succeed())
		ca, err := pki.ParseCA(caSecret.Data["tls.crt"], caSecret.Data["tls.key"])
		Expect(err).NotTo(HaveOccurred())
		short, shortKey, err := ca.Issue(pki.Request{CommonName: resources.ClientCommonName, Usage: pki.ClientOnly, Validity: time.Minute}, time.Now())
		Expect(err).NotTo(HaveOccurred())
		clientSecret.Data["tls.crt"], clientSecret.Data["tls.key"] = short, shortKey
		Expect(k8sClient.Update(ctx, clientSecret)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(realNS, resources.ClientSecretName(c)), clientSecret)).To(Succeed())
			cert, err := pki.ParseCertificate(clientSecret.Data["tls.crt"])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cert.NotAfter).To(BeTemporally(">", time.Now().Add(24*time.Hour)))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
		fired := failpoint.Fired()
		GinkgoWriter.Printf("failpoints fired: %v; scale 3->5->3 and a renewal converged in %s\n", fired, time.Since(start))
		for _, name := range failpoint.All {
			Expect(fired[name]).To(BeNumerically(">=", 1), "failpoint %s never fired", name)
		}
	})

	// kvClient is a client of the first three members, with the cluster's client certificate, closed at the
	// spec's end.
	kvClient := func() *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{procs.ClientURL(0), procs.ClientURL(1), procs.ClientURL(2)},
			TLS: kubelet.tlsConfig(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cli.Close)
		return cli
	}

	It("recovers a database that reached its space quota without a human, restarting no member", func() {
		pids := []int{procs.PID(0), procs.PID(1), procs.PID(2)}
		cli := kvClient()
		put := func(value string) error {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := cli.Put(pctx, "/space/overwritten", value)
			return err
		}
		By("overwriting one key with 256 KiB values until etcd raises NOSPACE")
		big := strings.Repeat("x", 256<<10)
		for i := 0; ; i++ {
			Expect(i).To(BeNumerically("<", 10*spaceQuota/len(big)), "etcd never raised NOSPACE")
			err := put(big)
			if errors.Is(err, rpctypes.ErrNoSpace) {
				break
			}
			Expect(err).NotTo(HaveOccurred())
		}
		start := time.Now()
		By("waiting for the operator to compact, defragment and disarm")
		Eventually(func() error { return put("writable again") }, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("NOSPACE to writable: %s\n", time.Since(start))
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.Alarms).To(BeEmpty())
			g.Expect(c.Status.CompactedRevision).To(BeNumerically(">", 0))
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionDegraded)).To(BeFalse())
			for _, m := range c.Status.Members {
				g.Expect(m.DBSizeBytes).To(BeNumerically("<", spaceQuota/2), m.Name)
				g.Expect(m.DBSizeInUseBytes).To(BeNumerically(">", 0), m.Name)
			}
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect([]int{procs.PID(0), procs.PID(1), procs.PID(2)}).To(Equal(pids), "no member restarted")
		// Events of one reason and action form a series (one object, counted), whatever their messages: one
		// of each is there; every member's file size above shows each was defragmented.
		for _, reason := range []string{ReasonCompacted, ReasonDefragmented, ReasonAlarmDisarmed, ReasonNoSpace} {
			events, err := eventsWithReason(ctx, c, reason)
			Expect(err).NotTo(HaveOccurred())
			Expect(events).NotTo(BeEmpty(), "%s events", reason)
		}
		Eventually(running(3), 30*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("defragments members whose database files are mostly free pages, leader last", func() {
		pids := []int{procs.PID(0), procs.PID(1), procs.PID(2)}
		cli := kvClient()

		By("writing 8 MiB, deleting it and compacting: the files keep their size, as free pages")
		value := strings.Repeat("x", 256<<10)
		for i := range 32 {
			_, err := cli.Put(ctx, fmt.Sprintf("/fragment/%04d", i), value)
			Expect(err).NotTo(HaveOccurred())
		}
		resp, err := cli.Delete(ctx, "/fragment/", clientv3.WithPrefix())
		Expect(err).NotTo(HaveOccurred())
		_, err = cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
		Expect(err).NotTo(HaveOccurred())
		// A member reports the pages a compaction freed only after its next write transactions: a cluster in
		// use, as this writer makes it.
		wctx, stopWriter := context.WithCancel(ctx)
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for i := 0; wctx.Err() == nil; i++ {
				_, _ = cli.Put(wctx, "/fragment-writer", strconv.Itoa(i))
				time.Sleep(200 * time.Millisecond)
			}
		}()
		DeferCleanup(func() { stopWriter(); <-writerDone })

		By("waiting for status to show the big files (below the default 64Mi of free space, nothing is defragmented)")
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.Members).To(HaveLen(3))
			for _, m := range c.Status.Members {
				g.Expect(m.DBSizeBytes).To(BeNumerically(">=", 6<<20), m.Name)
			}
		}, time.Minute, 250*time.Millisecond).Should(Succeed())

		By("lowering spec.defragmentation.minFreeSize to 1Mi")
		Expect(retryUpdate(ctx, c, func(o client.Object) {
			o.(*etcdv1beta1.EtcdCluster).Spec.Defragmentation.MinFreeSize = ptr.To(resource.MustParse("1Mi"))
		})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.Members).To(HaveLen(3))
			for _, m := range c.Status.Members {
				g.Expect(m.DBSizeBytes).To(BeNumerically("<", 4<<20), m.Name)
			}
		}, 3*time.Minute, time.Second).Should(Succeed())
		Eventually(func() ([]eventsv1.Event, error) { return eventsWithReason(ctx, c, ReasonDefragmented) }).
			ShouldNot(BeEmpty())
		Expect([]int{procs.PID(0), procs.PID(1), procs.PID(2)}).To(Equal(pids), "no member restarted")
	})

	It("defragments every member in turn when asked, followers first and the leader last, once per request", func() {
		memberPIDs := func() []int { return []int{procs.PID(0), procs.PID(1), procs.PID(2)} }
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeTrue())
			g.Expect(c.Status.Members).To(HaveLen(3))
			for _, m := range c.Status.Members {
				g.Expect(m.Healthy).To(BeTrue(), m.Name)
			}
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		leader := ""
		for _, m := range c.Status.Members {
			if m.Leader {
				leader = m.Name
			}
		}
		Expect(leader).NotTo(BeEmpty())
		// Each sweep is checked to restart no member over its own span, from the request to its completion.
		pids := memberPIDs()
		defragmentedBefore, err := eventsWithReason(ctx, c, ReasonDefragmented)
		Expect(err).NotTo(HaveOccurred())

		request := func(value string) {
			Expect(retryUpdate(ctx, c, func(o client.Object) {
				a := o.GetAnnotations()
				if a == nil {
					a = map[string]string{}
				}
				a[etcdv1beta1.DefragmentAnnotation] = value
				o.SetAnnotations(a)
			})).To(Succeed())
		}
		completed := func(value string) func(Gomega) {
			return func(g Gomega) {
				g.Expect(get(ctx, c)).To(Succeed())
				st := c.Status.Defragmentation
				g.Expect(st).NotTo(BeNil())
				g.Expect(st.LastRequest).To(Equal(value))
				g.Expect(st.Current).To(BeNil())
				g.Expect(st.LastCompletionTime).NotTo(BeNil())
			}
		}

		By("asking for a sweep with the annotation")
		request("first")
		Eventually(completed("first"), 2*time.Minute, 250*time.Millisecond).Should(Succeed())
		Expect(memberPIDs()).To(Equal(pids), "no member restarted by the sweep")
		started, err := eventsWithReason(ctx, c, ReasonDefragmentationStarted)
		Expect(err).NotTo(HaveOccurred())
		Expect(started).To(HaveLen(1))
		done, err := eventsWithReason(ctx, c, ReasonDefragmentationCompleted)
		Expect(err).NotTo(HaveOccurred())
		Expect(done).To(HaveLen(1))
		// The completion lists the members in the order they were done: both followers, then the leader.
		order := strings.Fields(strings.Trim(strings.SplitN(strings.SplitN(done[0].Note, "[", 2)[1], "]", 2)[0], " "))
		Expect(order).To(HaveLen(3), done[0].Note)
		Expect(order[2]).To(Equal(leader), done[0].Note)
		Expect(order[:2]).To(ConsistOf(Not(Equal(leader)), Not(Equal(leader))))
		defragmented, err := eventsWithReason(ctx, c, ReasonDefragmented)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(defragmented)-len(defragmentedBefore)).To(Equal(3), "one defragmentation per member")

		By("keeping the same annotation: no other sweep")
		lastCompletion := c.Status.Defragmentation.LastCompletionTime.DeepCopy()
		Consistently(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.Defragmentation.Current).To(BeNil())
			g.Expect(c.Status.Defragmentation.LastCompletionTime.Equal(lastCompletion)).To(BeTrue())
		}, 5*time.Second, 250*time.Millisecond).Should(Succeed())

		By("asking again with a new value")
		Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
		pids = memberPIDs()
		request("second")
		Eventually(completed("second"), 2*time.Minute, 250*time.Millisecond).Should(Succeed())
		Expect(eventsWithReason(ctx, c, ReasonDefragmentationCompleted)).To(HaveLen(2))
		Expect(memberPIDs()).To(Equal(pids), "no member restarted by the second sweep")
	})

	It("reports which members survive a lost majority and removes none of them", func() {
		Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
		before := etcdMembers(ctx, procs, kubelet.tlsConfig())
		Expect(get(ctx, c)).To(Succeed())
		ids := map[string]string{}
		for _, m := range c.Status.Members {
			ids[m.Name] = m.ID
		}

		By("losing two of three members")
		kubelet.setDown(1, 2)
		DeferCleanup(func() { kubelet.setDown() })
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			a := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable)
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(a.Reason).To(Equal(ReasonQuorumLost))
			g.Expect(a.Message).To(MatchRegexp(`answering: real-0 \(raft index [1-9][0-9]*, revision [1-9][0-9]*\); not answering: real-1, real-2$`))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())

		By("the members coming back")
		kubelet.setDown()
		Eventually(running(3), 90*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect(etcdMembers(ctx, procs, kubelet.tlsConfig())).To(Equal(before))
		for _, m := range c.Status.Members {
			Expect(m.ID).To(Equal(ids[m.Name]), "%s kept its member ID: nothing was removed or replaced", m.Name)
		}
	})

	It("recovers from the survivor once a majority has lost its data, keeping every write the survivor held", func() {
		Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect(retryUpdate(ctx, c, func(o client.Object) {
			o.(*etcdv1beta1.EtcdCluster).Spec.Recovery = etcdv1beta1.RecoverySpec{
				QuorumLoss: etcdv1beta1.QuorumLossFromSurvivor, After: &metav1.Duration{Duration: 30 * time.Second}}
		})).To(Succeed())
		Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
		ids := map[string]string{}
		for _, m := range c.Status.Members {
			ids[m.Name] = m.ID
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{procs.ClientURL(0), procs.ClientURL(1), procs.ClientURL(2)},
			TLS: kubelet.tlsConfig(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = cli.Close() }()
		const keys = 50
		for i := range keys {
			_, err := cli.Put(ctx, fmt.Sprintf("recovery/%03d", i), strconv.Itoa(i))
			Expect(err).NotTo(HaveOccurred())
		}
		// Every member has applied every write: whichever survives holds them all.
		Eventually(func(g Gomega) {
			var indexes []uint64
			for i := range 3 {
				st, err := cli.Status(ctx, procs.ClientURL(i))
				g.Expect(err).NotTo(HaveOccurred())
				indexes = append(indexes, st.RaftAppliedIndex)
			}
			g.Expect(indexes[0]).To(Equal(indexes[1]))
			g.Expect(indexes[0]).To(Equal(indexes[2]))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		survivorPID := procs.PID(0)
		forced := func(g Gomega) bool {
			cm := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(c)), cm)).To(Succeed())
			_, ok := cm.Data[membergate.EnvForceNewClusterMember]
			return ok
		}
		progressing := func(g Gomega) string {
			g.Expect(get(ctx, c)).To(Succeed())
			p := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)
			g.Expect(p).NotTo(BeNil())
			return p.Message
		}

		By("losing two members' nodes, with their data: the majority may come back")
		kubelet.setDown(1, 2)
		DeferCleanup(func() { kubelet.setDown() })
		Eventually(func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable).Reason).To(Equal(ReasonQuorumLost))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		// A manager whose clock is past the window: only the evidence holds recovery back.
		stopManager()
		stopManager = startRealManagerWithClock(procs, shiftedClock{by: time.Minute})
		DeferCleanup(func() { stopManager(); stopManager = startRealManager(procs) })
		Eventually(progressing, 30*time.Second, 250*time.Millisecond).Should(ContainSubstring("3 of 3 voters still hold their data (quorum 2), so the majority may come back"))
		Consistently(func(g Gomega) {
			g.Expect(forced(g)).To(BeFalse(), "no forced start while a majority may come back")
			g.Expect(procs.PID(0)).To(Equal(survivorPID), "the survivor is not restarted")
		}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect(get(ctx, c)).To(Succeed())
		for _, m := range c.Status.Members {
			Expect(m.ID).To(Equal(ids[m.Name]), "status keeps %s's member ID while etcd cannot be asked", m.Name)
		}

		By("their claims and pods deleted: the majority cannot come back")
		for _, i := range []int{1, 2} {
			claim := &corev1.PersistentVolumeClaim{}
			Expect(k8sClient.Get(ctx, key(realNS, resources.DataVolumeName+"-"+resources.MemberName(c, i)), claim)).To(Succeed())
			Expect(k8sClient.Delete(ctx, claim)).To(Succeed())
			pod := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key(realNS, resources.MemberName(c, i)), pod)).To(Succeed())
			Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		}
		// The nodes come back once the claims are gone (with their data).
		Eventually(func(g Gomega) {
			for _, i := range []int{1, 2} {
				claim := &corev1.PersistentVolumeClaim{}
				err := k8sClient.Get(ctx, key(realNS, resources.DataVolumeName+"-"+resources.MemberName(c, i)), claim)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim of member %d: %v", i, err)
				g.Expect(procs.HasData(i)).To(BeFalse(), "data of member %d", i)
			}
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
		kubelet.setDown()

		By("the survivor restarting alone, then the others rejoining empty")
		Eventually(running(3), 120*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect(procs.PID(0)).NotTo(Equal(survivorPID), "the survivor was restarted (with --force-new-cluster)")
		Expect(kubelet.forcedStartsTaken()).To(Equal(1), "one start of etcd, the survivor's, forced a new cluster")
		for _, m := range c.Status.Members {
			if m.Name == resources.MemberName(c, 0) {
				Expect(m.ID).To(Equal(ids[m.Name]), "the survivor keeps its member ID")
			} else {
				Expect(m.ID).NotTo(Equal(ids[m.Name]), "%s rejoined as a new member", m.Name)
			}
		}
		Expect(forced(Default)).To(BeFalse(), "--force-new-cluster is out of the configuration")
		for i := range keys {
			resp, err := cli.Get(ctx, fmt.Sprintf("recovery/%03d", i))
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Kvs).To(HaveLen(1), "write %d, acknowledged before the loss, survived", i)
			Expect(string(resp.Kvs[0].Value)).To(Equal(strconv.Itoa(i)))
		}
		Expect(eventsWithReason(ctx, c, ReasonQuorumRecovery)).NotTo(BeEmpty())
		Expect(eventsWithReason(ctx, c, ReasonQuorumRecovered)).NotTo(BeEmpty())
	})

	// Nodes are objects only here, their readiness what a spec writes; bound pods' kubelets are the fake
	// kubelet's, until their node is lost.
	Describe("a member's node lost", Ordered, func() {
		// healAfter is the manager's heal delay in these specs: long enough to read status during it.
		const healAfter = 8 * time.Second
		nodes := []string{"node-0", "node-1", "node-2", "node-3"}
		// setNodeReadySince sets node name's Ready condition, last changed at since.
		setNodeReadySince := func(name string, status corev1.ConditionStatus, since time.Time) {
			n := &corev1.Node{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, n)).To(Succeed())
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(since)}}
			Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
		}
		setNodeReady := func(name string, status corev1.ConditionStatus) { setNodeReadySince(name, status, time.Now()) }
		// operatorDeletions lists the operator's deletions of pod from the audit log, since time since (the
		// ordered container's earlier specs delete pods of the same names).
		operatorDeletions := func(pod string, since time.Time) []auditEvent {
			events, err := podDeletionEvents(realNS, pod)
			Expect(err).NotTo(HaveOccurred())
			var out []auditEvent
			for _, e := range events {
				at, err := time.Parse(time.RFC3339Nano, e.StageTimestamp)
				Expect(err).NotTo(HaveOccurred())
				if strings.HasSuffix(e.UserAgent, "/operator "+realNS) && !at.Before(since) {
					out = append(out, e)
				}
			}
			return out
		}
		memberID := func(name string) string {
			Expect(get(ctx, c)).To(Succeed())
			for _, m := range c.Status.Members {
				if m.Name == name {
					return m.ID
				}
			}
			return ""
		}

		BeforeAll(func() {
			Eventually(running(3), 60*time.Second, 250*time.Millisecond).Should(Succeed())
			for _, name := range nodes {
				Expect(k8sClient.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
				setNodeReady(name, corev1.ConditionTrue)
			}
			DeferCleanup(func() {
				for _, name := range nodes {
					Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
				}
			})
			By("binding member i's pod to node-i, as the scheduler would")
			for i := range 3 {
				pod := &corev1.Pod{}
				Expect(k8sClient.Get(ctx, key(realNS, resources.MemberName(c, i)), pod)).To(Succeed())
				Expect(k8sClient.SubResource("binding").Create(ctx, pod, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
					Target:     corev1.ObjectReference{Kind: "Node", Name: nodes[i]}})).To(Succeed())
				kubelet.placeOn(i, nodes[i])
			}
			DeferCleanup(func() {
				for i := range 3 {
					kubelet.placeOn(i, "")
				}
			})
			stopManager()
			stopManager = startRealManagerWith(procs, nil, healAfter)
			DeferCleanup(func() { stopManager(); stopManager = startRealManager(procs) })
		})

		It("replaces its member: removed from etcd first, then its pod deleted at once with its claim; nothing comes back with the node", func() {
			started := time.Now()
			victim := resources.MemberName(c, 2)
			claimName := resources.DataVolumeName + "-" + victim
			oldID := memberID(victim)
			Expect(oldID).NotTo(BeEmpty())
			id, err := strconv.ParseUint(oldID, 16, 64)
			Expect(err).NotTo(HaveOccurred())
			oldPod, oldClaim := &corev1.Pod{}, &corev1.PersistentVolumeClaim{}
			Expect(k8sClient.Get(ctx, key(realNS, victim), oldPod)).To(Succeed())
			Expect(oldPod.Spec.NodeName).To(Equal("node-2"))
			Expect(k8sClient.Get(ctx, key(realNS, claimName), oldClaim)).To(Succeed())
			// The claim stays while a pod uses it, as kube-controller-manager's pvc-protection keeps it.
			oldClaim.Finalizers = append(oldClaim.Finalizers, "kubernetes.io/pvc-protection")
			Expect(k8sClient.Update(ctx, oldClaim)).To(Succeed())

			// The pod is read before the member list: a pod gone before a member list that still holds its
			// member was deleted before the member's removal.
			var (
				mu                sync.Mutex
				violations        []string
				sawRemovedWithPod bool
			)
			octx, stopObserver := context.WithCancel(ctx)
			observed := make(chan struct{})
			go func() {
				defer GinkgoRecover()
				defer close(observed)
				for octx.Err() == nil {
					pod := &corev1.Pod{}
					err := k8sClient.Get(octx, key(realNS, victim), pod)
					members, merr := listMembers(octx, etcd.NewDialer(2*time.Second), []string{procs.ClientURL(0), procs.ClientURL(1)}, kubelet.tlsConfig())
					if (err == nil || apierrors.IsNotFound(err)) && merr == nil {
						listed := slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == id })
						there := err == nil && pod.UID == oldPod.UID
						mu.Lock()
						switch {
						case !there && listed:
							violations = append(violations, fmt.Sprintf("%s: pod %s gone while etcd lists member %s", time.Now().Format(time.StampMilli), victim, oldID))
						case there && !listed:
							sawRemovedWithPod = true
						}
						mu.Unlock()
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			DeferCleanup(func() { stopObserver(); <-observed })

			By("powering node-2 off: its kubelet stops reporting, its member's etcd stops with it")
			kubelet.placeOn(2, "node-3") // the StatefulSet's next pod of member 2 is scheduled elsewhere
			// The node stopped reporting heal-after ago, before its etcd stops (at the fake kubelet's next sync):
			// it is lost whenever the member is due, even when a slow health check on a loaded machine started
			// the member's heal clock before the node went down. A node down for less than heal-after when the
			// member is due is not yet lost, and its pod is first deleted for its kubelet to confirm (deleteData).
			setNodeReadySince("node-2", corev1.ConditionUnknown, time.Now().Add(-healAfter))
			kubelet.loseNode("node-2", true)
			DeferCleanup(kubelet.loseNode, "node-2", false)
			// The node controller marks the pods of a node that stopped reporting not ready.
			oldPod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady", LastTransitionTime: metav1.Now()}}
			Expect(k8sClient.Status().Update(ctx, oldPod)).To(Succeed())

			By("status saying what the replacement waits for")
			Eventually(func(g Gomega) string {
				g.Expect(get(ctx, c)).To(Succeed())
				p := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)
				g.Expect(p).NotTo(BeNil())
				return p.Message
			}, 2*healAfter, 100*time.Millisecond).Should(MatchRegexp(
				victim + ` unreachable since \S+, replaced from \S+ if quorum holds without it; its node node-2 stopped reporting \(Ready Unknown\) since `))

			By("the member removed from etcd, then its pod deleted without its kubelet and its claim with it")
			Eventually(func(g Gomega) {
				running(3)(g)
				pod := &corev1.Pod{}
				g.Expect(k8sClient.Get(ctx, key(realNS, victim), pod)).To(Succeed())
				g.Expect(pod.UID).NotTo(Equal(oldPod.UID))
				g.Expect(pod.Spec.NodeName).To(Equal("node-3"))
				claim := &corev1.PersistentVolumeClaim{}
				g.Expect(k8sClient.Get(ctx, key(realNS, claimName), claim)).To(Succeed())
				g.Expect(claim.UID).NotTo(Equal(oldClaim.UID))
				g.Expect(memberID(victim)).NotTo(Equal(oldID))
			}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
			stopObserver()
			<-observed
			mu.Lock()
			Expect(violations).To(BeEmpty())
			Expect(sawRemovedWithPod).To(BeTrue(), "the member was seen removed while its pod still existed")
			mu.Unlock()
			deletions := operatorDeletions(victim, started)
			Expect(deletions).NotTo(BeEmpty())
			for _, e := range deletions {
				Expect(e.forced()).To(BeTrue(), "the operator deleted %s on the lost node with grace period 0: %+v", victim, e)
				Expect(e.RequestObject.Preconditions.UID).To(Equal(oldPod.UID), "the operator deleted the old pod only: %+v", e)
			}
			Eventually(func(g Gomega) {
				events, err := eventsWithReason(ctx, c, ReasonNodeLost)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(events).To(ContainElement(And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note",
					ContainSubstring("its node node-2 stopped reporting (Ready Unknown) since")))))
			}, 10*time.Second, 250*time.Millisecond).Should(Succeed())

			By("node-2 coming back: nothing of the old member rejoins")
			newPod := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key(realNS, victim), newPod)).To(Succeed())
			kubelet.loseNode("node-2", false)
			setNodeReady("node-2", corev1.ConditionTrue)
			Consistently(func(g Gomega) {
				running(3)(g)
				members, err := listMembers(ctx, etcd.NewDialer(2*time.Second), []string{procs.ClientURL(0), procs.ClientURL(1)}, kubelet.tlsConfig())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(members).NotTo(ContainElement(HaveField("ID", id)), "the removed member stays out of etcd")
				pod := &corev1.Pod{}
				g.Expect(k8sClient.Get(ctx, key(realNS, victim), pod)).To(Succeed())
				g.Expect(pod.UID).To(Equal(newPod.UID))
			}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
		})

		It("deletes a member's pod on a Ready node as usual, for its kubelet to confirm", func() {
			started := time.Now()
			victim := resources.MemberName(c, 1)
			oldID := memberID(victim)
			oldPod := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, key(realNS, victim), oldPod)).To(Succeed())
			Expect(oldPod.Spec.NodeName).To(Equal("node-1"))
			lostEvents, err := eventsWithReason(ctx, c, ReasonNodeLost)
			Expect(err).NotTo(HaveOccurred())

			By("stopping member 1's etcd while node-1 and its kubelet stay")
			kubelet.setDown(1)
			DeferCleanup(kubelet.setDown)
			Eventually(func(g Gomega) {
				pod := &corev1.Pod{}
				g.Expect(k8sClient.Get(ctx, key(realNS, victim), pod)).To(Succeed())
				g.Expect(pod.UID).NotTo(Equal(oldPod.UID))
			}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
			kubelet.setDown()
			Eventually(func(g Gomega) {
				running(3)(g)
				g.Expect(memberID(victim)).NotTo(Equal(oldID))
			}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())

			deletions := operatorDeletions(victim, started)
			Expect(deletions).NotTo(BeEmpty())
			for _, e := range deletions {
				Expect(e.forced()).To(BeFalse(), "the operator left %s's end to its kubelet: %+v", victim, e)
				Expect(e.RequestObject.Preconditions.UID).To(Equal(oldPod.UID), "the operator deleted the old pod only: %+v", e)
			}
			Expect(eventsWithReason(ctx, c, ReasonNodeLost)).To(HaveLen(len(lostEvents)), "no node was lost")
		})
	})

	It("kept etcd's member list and the StatefulSet in agreement at every observed step", func() {
		kubelet.mu.Lock()
		defer kubelet.mu.Unlock()
		Expect(kubelet.checks).To(BeNumerically(">", 100), "the agreement was compared at every kubelet sync")
		Expect(kubelet.violations).To(BeEmpty())
	})
})
