package controllers

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/etcdtest"
	"github.com/seedops/etcd-operator/internal/resources"
)

// realNS is served by a second manager whose controller talks to real etcd processes; the processes
// stand in for the member pods, started and stopped by fakeKubelet as the StatefulSet says.
const realNS = "etcd-real"

// processURLs resolves members to the local etcd processes.
type processURLs struct{ c *etcdtest.Cluster }

func (u processURLs) PeerURL(_ *etcdv1alpha1.EtcdCluster, i int) string   { return u.c.PeerURL(i) }
func (u processURLs) ClientURL(_ *etcdv1alpha1.EtcdCluster, i int) string { return u.c.ClientURL(i) }

// fakeKubelet plays the StatefulSet controller and the kubelet for one cluster: a pod per ordinal below
// the StatefulSet's size, each an etcd process configured from the operator's ConfigMap, ready when
// etcd says it is healthy; a deleted pod's process stops.
type fakeKubelet struct {
	c       *etcdtest.Cluster
	cluster *etcdv1alpha1.EtcdCluster
	dialer  etcd.Dialer

	mu         sync.Mutex
	violations []string
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

func (k *fakeKubelet) sync(ctx context.Context) {
	sts := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, key(realNS, resources.StatefulSetName(k.cluster)), sts); err != nil {
		return
	}
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(ctx, key(realNS, resources.ConfigMapName(k.cluster)), cm); err != nil {
		return
	}
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
			k.c.Stop(i)
			continue
		case apierrors.IsNotFound(err):
			k.c.Stop(i) // the pod was deleted: its container stops, and a new pod starts
			pod = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: realNS, Labels: resources.Labels(k.cluster, resources.ComponentEtcd)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: sts.Spec.Template.Spec.Containers[0].Image}}},
			}
			if err := k8sClient.Create(ctx, pod); err != nil {
				continue
			}
		case err != nil:
			continue
		}
		if !k.c.Running(i) {
			_ = k.c.Start(i, cm.Data["ETCD_INITIAL_CLUSTER"], cm.Data["ETCD_INITIAL_CLUSTER_STATE"])
		}
		k.setReady(ctx, pod, i)
	}
	k.checkAgreement(ctx)
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
	if cli, err := k.dialer.Dial(ctx, []string{k.c.ClientURL(i)}); err == nil {
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
	_ = k8sClient.Status().Update(ctx, pod)
}

// checkAgreement records any moment where etcd's member list and the StatefulSet disagree beyond the
// one step in flight: a learner just added may wait for its pod slot (add, then raise the StatefulSet),
// and a member just removed may leave its slot behind (remove, then lower the StatefulSet). The member
// list is read between two reads of the StatefulSet that agree, so the comparison is of one moment.
func (k *fakeKubelet) checkAgreement(ctx context.Context) {
	cli, err := k.dialer.Dial(ctx, []string{k.c.ClientURL(0)})
	if err != nil {
		return
	}
	defer cli.Close()
	replicas := k.replicas(ctx)
	members, err := cli.MemberList(ctx)
	if err != nil || replicas < 0 || k.replicas(ctx) != replicas {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
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
	if replicas-len(members) > 1 {
		k.violations = append(k.violations, "StatefulSet "+itoa(replicas)+" vs "+itoa(len(members))+" members")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// startRealManager runs a manager for realNS whose controller dials the local etcd processes.
func startRealManager(procs *etcdtest.Cluster) context.CancelFunc {
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{
		Scheme:  k8sClient.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   CacheOptions(realNS),
		// A restarted manager registers the same controller name again.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&EtcdClusterReconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("etcd-operator"),
		Options: resources.DefaultOptions(), Dialer: etcd.NewDialer(2 * time.Second), URLs: processURLs{procs},
		StepInterval: 300 * time.Millisecond, HealthInterval: 2 * time.Second,
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
func etcdMembers(ctx context.Context, procs *etcdtest.Cluster) []string {
	cli, err := etcd.NewDialer(2*time.Second).Dial(ctx, []string{procs.ClientURL(0), procs.ClientURL(1), procs.ClientURL(2)})
	if err != nil {
		return nil
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
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

var _ = Describe("EtcdCluster controller with real etcd", Ordered, func() {
	var (
		ctx         context.Context
		procs       *etcdtest.Cluster
		kubelet     *fakeKubelet
		c           *etcdv1alpha1.EtcdCluster
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
		DeferCleanup(procs.Close)
		stopManager = startRealManager(procs)
		DeferCleanup(func() { stopManager() })

		kctx, stopKubelet := context.WithCancel(context.Background())
		kubelet = &fakeKubelet{c: procs, cluster: c, dialer: etcd.NewDialer(2 * time.Second)}
		done := make(chan struct{})
		go func() { defer close(done); kubelet.run(kctx) }()
		DeferCleanup(func() { stopKubelet(); <-done })
	})

	running := func(n int) func(g Gomega) {
		return func(g Gomega) {
			g.Expect(get(ctx, c)).To(Succeed())
			g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
			g.Expect(c.Status.Phase).To(Equal(etcdv1alpha1.PhaseRunning), "conditions: %v", c.Status.Conditions)
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
			g.Expect(etcdMembers(ctx, procs)).To(Equal(want))
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
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1alpha1.EtcdCluster).Spec.Replicas = 5 })).To(Succeed())
		// Kill the operator as soon as the first learner exists, then start a new one.
		Eventually(func() int { return len(etcdMembers(ctx, procs)) }, 60*time.Second, 50*time.Millisecond).Should(Equal(4))
		stopManager()
		stopManager = startRealManager(procs)
		Eventually(running(5), 120*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("scale 3->5 with an operator restart: %s\n", time.Since(start))
	})

	It("scales 5 back to 3, removing members before shrinking the StatefulSet", func() {
		start := time.Now()
		Expect(retryUpdate(ctx, c, func(o client.Object) { o.(*etcdv1alpha1.EtcdCluster).Spec.Replicas = 3 })).To(Succeed())
		Eventually(running(3), 120*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("scale 5->3: %s\n", time.Since(start))
	})

	It("kept etcd's member list and the StatefulSet in agreement at every observed step", func() {
		kubelet.mu.Lock()
		defer kubelet.mu.Unlock()
		Expect(kubelet.violations).To(BeEmpty())
	})
})
