//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Label keys the operator puts on member pods (see internal/resources).
const (
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
)

// clientServiceURL is the in-cluster URL of the cluster's client Service.
func clientServiceURL(c *etcdv1beta1.EtcdCluster) string {
	return fmt.Sprintf("%s://%s-client.%s.svc.cluster.local:2379", scheme(c), c.Name, c.Namespace)
}

// localURL is a member's client URL from inside its own pod (etcdctl there has the member's certificate).
func localURL(c *etcdv1beta1.EtcdCluster) string { return scheme(c) + "://localhost:2379" }

func scheme(c *etcdv1beta1.EtcdCluster) string {
	if fw.TLSOn(c) {
		return "https"
	}
	return "http"
}

// etcdctl runs etcdctl inside member pod (the etcd image has it), by default against the client Service.
func etcdctl(c *etcdv1beta1.EtcdCluster, pod string, args ...string) (string, error) {
	full := []string{"exec", "-n", c.Namespace, pod, "-c", "etcd", "--", "/usr/local/bin/etcdctl",
		"--command-timeout=10s"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--endpoints") }) {
		full = append(full, "--endpoints="+clientServiceURL(c))
	}
	return fw.Kubectl(append(full, args...)...)
}

// etcdMember is one entry of `etcdctl member list -w json`.
type etcdMember struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// memberList runs `etcdctl member list` inside the cluster, from pod, with etcdctl's flags (by default,
// through the client Service).
func memberList(c *etcdv1beta1.EtcdCluster, pod string, flags ...string) ([]etcdMember, error) {
	out, err := etcdctl(c, pod, append(flags, "member", "list", "-w", "json")...)
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
func expectVotingMembers(c *etcdv1beta1.EtcdCluster, names []string, timeout time.Duration) {
	EventuallyWithOffset(1, func(g Gomega) {
		pods := fw.MemberPods(c)
		g.Expect(pods).NotTo(BeEmpty())
		var from string
		for i := range pods {
			if framework.PodReady(&pods[i]) {
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
func memberNames(c *etcdv1beta1.EtcdCluster, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", c.Name, i))
	}
	return out
}

// leaderPod asks the ready members directly (by pod IP) who leads, and returns the leader's name.
func leaderPod(c *etcdv1beta1.EtcdCluster) (string, error) {
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace),
		client.MatchingLabels{labelInstance: c.Name, labelComponent: "member"}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if !framework.PodReady(&p) || p.Status.PodIP == "" {
			continue
		}
		if name, err := leaderFrom(c, &p); err == nil {
			return name, nil
		}
	}
	return "", fmt.Errorf("no member of %s/%s reports a leader", c.Namespace, c.Name)
}

// leaderFrom asks member pod p (at its pod IP, checked against its stable name) who leads.
func leaderFrom(c *etcdv1beta1.EtcdCluster, p *corev1.Pod) (string, error) {
	host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", p.Name, c.Name, c.Namespace)
	cli, err := fw.EtcdClientVia(c, host, p.Status.PodIP, 3*time.Second)
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

// putGet writes a key through the Go client and reads it back.
func putGet(c *etcdv1beta1.EtcdCluster, key, value string) {
	cli := fw.ClusterClient(c)
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
func expectKey(c *etcdv1beta1.EtcdCluster, key, value string) {
	cli := fw.ClusterClient(c)
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
		g.Expect(framework.PodReady(p)).To(BeTrue())
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// podNamed is the pod ns/name, or nil while it does not exist.
func podNamed(ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return nil
	}
	return p
}

// clusterEvents are the events of the type about c with one of the reasons, each once per time it was
// recorded (keyed by UID and count).
func clusterEvents(c *etcdv1beta1.EtcdCluster, eventType string, reasons ...string) map[string]string {
	events := &eventsv1.EventList{}
	Expect(k8s.List(ctx, events, client.InNamespace(c.Namespace))).To(Succeed())
	out := map[string]string{}
	for _, e := range events.Items {
		if e.Regarding.Name != c.Name || e.Regarding.Kind != "EtcdCluster" || e.Type != eventType ||
			!slices.Contains(reasons, e.Reason) {
			continue
		}
		count := e.DeprecatedCount
		if e.Series != nil {
			count = max(count, e.Series.Count)
		}
		out[fmt.Sprintf("%s/%d", e.UID, count)] = fmt.Sprintf("%s: %s (x%d)", e.Reason, e.Note, count)
	}
	return out
}
