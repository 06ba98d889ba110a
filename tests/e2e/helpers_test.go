//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"google.golang.org/grpc"
)

// Label keys the operator puts on member pods (see internal/resources).
const (
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
)

// newNamespace creates a namespace that enforces the restricted Pod Security Standard, and deletes it
// (with everything in it) when the spec or container ends.
func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + prefix + "-",
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
			"pod-security.kubernetes.io/warn":            "restricted",
			"pod-security.kubernetes.io/audit":           "restricted",
		},
	}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), ns))).To(Succeed())
	})
	return ns.Name
}

// designCluster is the README's four-field sample EtcdCluster, with the image repository of the local registry.
func designCluster(ns, name, version string, replicas int32) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Version:        version,
			Replicas:       replicas,
			StorageSize:    resource.MustParse("1Gi"),
			BackupSchedule: "0 2 * * *",
			Repository:     etcdRepository,
		},
	}
}

func getCluster(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	out := &etcdv1alpha1.EtcdCluster{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKeyFromObject(c), out)).To(Succeed())
	return out
}

// updateCluster applies change to the latest version of the cluster, retrying on conflicts.
func updateCluster(c *etcdv1alpha1.EtcdCluster, change func(*etcdv1alpha1.EtcdCluster)) {
	EventuallyWithOffset(1, func() error {
		cur := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
			return err
		}
		change(cur)
		return k8s.Update(ctx, cur)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// waitAvailable waits until the cluster reports its current generation Available and Running with every
// member ready, and returns how long that took.
func waitAvailable(c *etcdv1alpha1.EtcdCluster, timeout time.Duration) time.Duration {
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		cur := &etcdv1alpha1.EtcdCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable)).To(BeTrue(),
			"conditions: %+v", cur.Status.Conditions)
		g.Expect(cur.Status.Phase).To(Equal(etcdv1alpha1.PhaseRunning))
		g.Expect(cur.Status.ReadyReplicas).To(Equal(cur.Spec.Replicas))
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	return time.Since(start)
}

// memberPods lists the cluster's member pods, sorted by name.
func memberPods(c *etcdv1alpha1.EtcdCluster) []corev1.Pod {
	pods := &corev1.PodList{}
	ExpectWithOffset(1, k8s.List(ctx, pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"})).To(Succeed())
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// run runs a command and returns its stdout; stderr goes into the error.
func run(name string, args ...string) (string, string, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

func kubectlRun(args ...string) (string, error) {
	out, _, err := run(kubectl, args...)
	return out, err
}

// clientServiceURL is the in-cluster URL of the cluster's client Service.
func clientServiceURL(c *etcdv1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s://%s-client.%s.svc.cluster.local:2379", scheme(c), c.Name, c.Namespace)
}

// localURL is a member's client URL from inside its own pod (etcdctl there has the member's certificate).
func localURL(c *etcdv1alpha1.EtcdCluster) string { return scheme(c) + "://localhost:2379" }

// tlsOn reports whether the cluster serves TLS, once the operator has recorded its choice in the spec.
func tlsOn(c *etcdv1alpha1.EtcdCluster) bool {
	var on bool
	EventuallyWithOffset(2, func(g Gomega) {
		fresh := &etcdv1alpha1.EtcdCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), fresh)).To(Succeed())
		g.Expect(fresh.Spec.TLS.Enabled).NotTo(BeNil(), "the operator has not recorded spec.tls.enabled yet")
		on = *fresh.Spec.TLS.Enabled
	}, 60*time.Second, time.Second).Should(Succeed())
	return on
}

func scheme(c *etcdv1alpha1.EtcdCluster) string {
	if tlsOn(c) {
		return "https"
	}
	return "http"
}

// clusterTLS authenticates as the cluster's client certificate (the Secret status.tls.clientSecretName
// names), verifying the server's certificate for serverName; nil for a cluster without TLS.
func clusterTLS(c *etcdv1alpha1.EtcdCluster, serverName string) *tls.Config {
	if !tlsOn(c) {
		return nil
	}
	secret := &corev1.Secret{}
	EventuallyWithOffset(2, func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client-tls"}, secret)
	}, 60*time.Second, time.Second).Should(Succeed())
	cfg, err := etcd.ClientTLSConfig(secret.Data["ca.crt"], secret.Data["tls.crt"], secret.Data["tls.key"])
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	cfg.ServerName = serverName
	return cfg
}

// etcdctl runs etcdctl inside member pod (the etcd image has it), by default against the client Service.
func etcdctl(c *etcdv1alpha1.EtcdCluster, pod string, args ...string) (string, error) {
	full := []string{"exec", "-n", c.Namespace, pod, "-c", "etcd", "--", "/usr/local/bin/etcdctl",
		"--command-timeout=10s"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--endpoints") }) {
		full = append(full, "--endpoints="+clientServiceURL(c))
	}
	return kubectlRun(append(full, args...)...)
}

// etcdMember is one entry of `etcdctl member list -w json`.
type etcdMember struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// memberList runs `etcdctl member list` inside the cluster, from pod.
func memberList(c *etcdv1alpha1.EtcdCluster, pod string) ([]etcdMember, error) {
	out, err := etcdctl(c, pod, "member", "list", "-w", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return nil, fmt.Errorf("parse member list %q: %w", out, err)
	}
	sort.Slice(resp.Members, func(i, j int) bool { return resp.Members[i].Name < resp.Members[j].Name })
	return resp.Members, nil
}

// expectVotingMembers waits until etcd, asked from inside the cluster, lists exactly the given members, all
// started (named, with client URLs) and none a learner.
func expectVotingMembers(c *etcdv1alpha1.EtcdCluster, names []string, timeout time.Duration) {
	EventuallyWithOffset(1, func(g Gomega) {
		pods := memberPods(c)
		g.Expect(pods).NotTo(BeEmpty())
		var from string
		for i := range pods {
			if podReady(&pods[i]) {
				from = pods[i].Name
				break
			}
		}
		g.Expect(from).NotTo(BeEmpty(), "no ready member pod to run etcdctl in")
		members, err := memberList(c, from)
		g.Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, m := range members {
			g.Expect(m.Name).NotTo(BeEmpty(), "member %x was added but never started", m.ID)
			g.Expect(m.ClientURLs).NotTo(BeEmpty(), "member %s has no client URL", m.Name)
			g.Expect(m.IsLearner).To(BeFalse(), "member %s is still a learner", m.Name)
			got = append(got, m.Name)
		}
		g.Expect(got).To(Equal(names))
	}).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
}

// memberNames are the pod names of ordinals 0..n-1.
func memberNames(c *etcdv1alpha1.EtcdCluster, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", c.Name, i))
	}
	return out
}

// clusterClient connects from the host to the cluster's client Service IP (cluster IPs and pod IPs are
// routable on the node), over TLS with the cluster's client certificate when it serves TLS.
func clusterClient(c *etcdv1alpha1.EtcdCluster) *clientv3.Client {
	svc := &corev1.Service{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client"}, svc)).To(Succeed())
	cli, err := etcdClientVia(c, c.Name+"-client."+c.Namespace+".svc", svc.Spec.ClusterIP, 5*time.Second)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return cli
}

// etcdClientVia connects to host (a name the server certificate carries) at ip: the etcd client verifies
// the certificate against the endpoint's host name, and the host cannot resolve cluster DNS names, so the
// connection is dialled to the IP while TLS checks the name.
func etcdClientVia(c *etcdv1alpha1.EtcdCluster, host, ip string, timeout time.Duration) (*clientv3.Client, error) {
	if tlsOn(c) {
		return etcdClientTLS(host, ip, clusterTLS(c, host), timeout)
	}
	return clientv3.New(clientConfig([]string{"http://" + ip + ":2379"}, timeout))
}

// etcdClientTLS connects to https://host:2379, dialled at ip, with the given TLS configuration.
func etcdClientTLS(host, ip string, tlsConfig *tls.Config, timeout time.Duration) (*clientv3.Client, error) {
	cfg := clientConfig([]string{"https://" + host + ":2379"}, timeout)
	cfg.TLS = tlsConfig
	cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "2379"))
	})}
	return clientv3.New(cfg)
}

// clientConfig is a client as etcd recommends running one: with gRPC keepalive, so a connection to a member
// cut off from the network is found dead and dialled again (through the Service: to a member that
// answers) instead of timing out every request until TCP's retransmission back-off gives up. 6 s: etcd
// refuses pings more frequent than its --grpc-keepalive-min-time (5 s).
func clientConfig(endpoints []string, timeout time.Duration) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: timeout, Logger: zap.NewNop(),
		DialKeepAliveTime: 6 * time.Second, DialKeepAliveTimeout: 3 * time.Second, PermitWithoutStream: true}
}

// leaderPod asks the ready members directly (by pod IP) who leads, and returns the leader's name.
func leaderPod(c *etcdv1alpha1.EtcdCluster) (string, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if !podReady(&p) || p.Status.PodIP == "" {
			continue
		}
		if name, err := leaderFrom(c, &p); err == nil {
			return name, nil
		}
	}
	return "", fmt.Errorf("no member of %s/%s reports a leader", c.Namespace, c.Name)
}

// leaderFrom asks member pod p (at its pod IP, checked against its stable name) who leads.
func leaderFrom(c *etcdv1alpha1.EtcdCluster, p *corev1.Pod) (string, error) {
	host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.Name, c.Name, c.Namespace)
	cli, err := etcdClientVia(c, host, p.Status.PodIP, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = cli.Close() }()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, cli.Endpoints()[0])
	if err != nil {
		return "", err
	}
	if st.Leader == 0 {
		return "", fmt.Errorf("%s knows no leader", p.Name)
	}
	ml, err := cli.MemberList(sctx)
	if err != nil {
		return "", err
	}
	for _, m := range ml.Members {
		if m.ID == st.Leader && m.Name != "" {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("leader %x is not in the member list", st.Leader)
}

// writer writes sequential keys through the client Service and records every acknowledged one.
type writer struct {
	cli    *clientv3.Client
	prefix string
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
}

func startWriter(c *etcdv1alpha1.EtcdCluster, prefix string) *writer {
	w := &writer{cli: clusterClient(c), prefix: prefix, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s/%08d", w.prefix, i)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := w.cli.Put(wctx, key, "v"+key)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
			} else {
				w.failed++
			}
			w.mu.Unlock()
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	return w
}

func (w *writer) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitProgress waits until n more writes have been acknowledged.
func (w *writer) waitProgress(n int, timeout time.Duration) {
	target := w.ackedCount() + n
	EventuallyWithOffset(1, w.ackedCount).WithTimeout(timeout).WithPolling(200*time.Millisecond).
		Should(BeNumerically(">=", target), "the writer makes no progress")
}

// stopAndVerify stops the writer and checks that every acknowledged key is readable with its value.
func (w *writer) stopAndVerify(c *etcdv1alpha1.EtcdCluster) {
	close(w.stop)
	<-w.done
	defer func() { _ = w.cli.Close() }()
	w.mu.Lock()
	acked, failed := slices.Clone(w.acked), w.failed
	w.mu.Unlock()
	GinkgoWriter.Printf("writer %s: %d writes acknowledged, %d failed\n", w.prefix, len(acked), failed)
	ExpectWithOffset(1, len(acked)).To(BeNumerically(">", 20), "too few acknowledged writes to prove anything")

	cli := clusterClient(c)
	defer func() { _ = cli.Close() }()
	var got map[string]string
	EventuallyWithOffset(1, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, w.prefix+"/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		got = make(map[string]string, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return nil
	}).WithTimeout(time.Minute).Should(Succeed())
	var lost []string
	for _, k := range acked {
		if got[k] != "v"+k {
			lost = append(lost, k)
		}
	}
	ExpectWithOffset(1, lost).To(BeEmpty(), "%d of %d acknowledged writes are lost", len(lost), len(acked))
}

// putGet writes a key through the Go client and reads it back.
func putGet(c *etcdv1alpha1.EtcdCluster, key, value string) {
	cli := clusterClient(c)
	defer func() { _ = cli.Close() }()
	EventuallyWithOffset(1, func(g Gomega) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := cli.Put(pctx, key, value)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.Get(pctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(1))
		g.Expect(string(resp.Kvs[0].Value)).To(Equal(value))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// expectKey checks that a key has a value, read through the client Service.
func expectKey(c *etcdv1alpha1.EtcdCluster, key, value string) {
	cli := clusterClient(c)
	defer func() { _ = cli.Close() }()
	EventuallyWithOffset(1, func(g Gomega) {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.Get(gctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Kvs).To(HaveLen(1))
		g.Expect(string(resp.Kvs[0].Value)).To(Equal(value))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// waitPodReplaced waits until the pod named name exists again with another UID and is ready.
func waitPodReplaced(ns, name string, oldUID string, timeout time.Duration) {
	EventuallyWithOffset(1, func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		g.Expect(string(p.UID)).NotTo(Equal(oldUID))
		g.Expect(podReady(p)).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// expectGone waits until obj no longer exists.
func expectGone(obj client.Object, timeout time.Duration) {
	EventuallyWithOffset(1, func() bool {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(500*time.Millisecond).Should(BeTrue(), "%T %s still exists", obj, obj.GetName())
}

// report records a measured duration in the suite's report.
func report(name string, d time.Duration) {
	AddReportEntry(name, d.Round(100*time.Millisecond).String())
	GinkgoWriter.Printf("%s: %s\n", name, d.Round(100*time.Millisecond))
}
