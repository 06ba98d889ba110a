//go:build bench

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/bench/internal/load"
	"github.com/seedops/etcd-operator/tests/framework"
)

var (
	// loadgenImage is tests/bench/loadgen's image (hack/node/images.sh with LOADGEN_IMAGE=1).
	loadgenImage = framework.Env("BENCH_LOADGEN_IMAGE", "localhost:5000/loadgen:bench")
	// loadDuration is each workload's measured phase; loadClients and loadConns the generator's goroutines
	// and clientv3 clients.
	loadDuration = framework.Env("BENCH_LOAD_DURATION", "15s")
	loadClients  = framework.EnvInt("BENCH_LOAD_CLIENTS", 16)
	loadConns    = framework.EnvInt("BENCH_LOAD_CONNS", 4)
)

// The served-load scenario's targets, modes and workloads, in the order their numeric codes in the recorded
// samples (servedload.json: "target", "mode", "workload") index them; tests/bench/report reads the same codes.
var (
	loadTargets   = []string{"bare", "operator-plain", "operator-tls"}
	loadModes     = []string{"service", "members"}
	loadWorkloads = []string{"put", "get-linearizable", "get-serializable", "txn"}
)

// loadTarget is one cluster the generator drives.
type loadTarget struct {
	code     int
	ns       string
	instance string // the member pods' instance label (the StatefulSet's name)
	scheme   string
	service  string // host:port of the client Service
	members  []string
	// secret is the client certificate's Secret (ca.crt, tls.crt, tls.key) when the members serve TLS.
	secret string
}

func (lt loadTarget) endpoints(mode string) string {
	if mode == "service" {
		return lt.scheme + "://" + lt.service
	}
	var eps []string
	for _, m := range lt.members {
		eps = append(eps, lt.scheme+"://"+m)
	}
	return strings.Join(eps, ",")
}

// loadResult mirrors tests/bench/loadgen's Result (the fields used here).
type loadResult struct {
	Workloads []struct {
		Name       string  `json:"name"`
		Requests   int     `json:"requests"`
		Errors     int     `json:"errors"`
		PerSecond  float64 `json:"perSecond"`
		FirstError string  `json:"firstError"`
		load.Percentiles
	} `json:"workloads"`
}

// TestServedLoad: a load generator in a pod on the node (tests/bench/loadgen) drives three 3-member
// clusters of the same image, volumes and resources: (a) a bare StatefulSet without TLS, applied by hand
// (applyBare) with a plain ClusterIP client Service of its own as etcd's documentation writes one, (b) the
// operator's cluster with TLS off, (c) the operator's cluster with TLS (the generator holds the cluster's
// client certificate). Each through its client Service and with every member's stable DNS name as an
// endpoint; puts, linearizable and serializable gets, small transactions. BENCH_RUNS rounds, the targets'
// order rotating; ratios to (a) are taken within a round. For every run, how the members shared the
// requests (their gRPC servers' started-call counters, and which one led), the evidence of how a client
// Service spreads connections.
func TestServedLoad(t *testing.T) {
	cfg, err := framework.RESTConfig(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.ParseDuration(loadDuration); err != nil {
		t.Fatalf("BENCH_LOAD_DURATION: %v", err)
	}
	targets := []loadTarget{startBareLoadTarget(t), startOperatorLoadTarget(t, 1, withoutTLS), startOperatorLoadTarget(t, 2, nil)}

	type key struct{ target, mode, workload int }
	var lines []string
	for round := range runs {
		got := map[key]map[string]float64{}
		for i := range targets {
			lt := targets[(i+round)%len(targets)]
			for m, mode := range loadModes {
				before := memberMetrics(t, cs, lt)
				res := runLoadgen(t, cs, lt, mode, fmt.Sprintf("%s/%s/r%d", loadTargets[lt.code], mode, round))
				after := memberMetrics(t, cs, lt)
				for w, name := range loadWorkloads {
					var found bool
					for _, r := range res.Workloads {
						if r.Name != name {
							continue
						}
						found = true
						if r.Errors > 0 {
							t.Logf("%s %s %s: %d errors, first: %s", loadTargets[lt.code], mode, name, r.Errors, r.FirstError)
						}
						s := map[string]float64{"round": float64(round), "target": float64(lt.code), "mode": float64(m), "workload": float64(w),
							"requests": float64(r.Requests), "errors": float64(r.Errors), "perSecond": r.PerSecond,
							"p50ms": r.P50ms, "p90ms": r.P90ms, "p99ms": r.P99ms, "maxms": r.Maxms}
						spread(s, before, after, grpcMethod[name])
						got[key{lt.code, m, w}] = s
					}
					if !found {
						t.Fatalf("%s %s: no %s in the generator's result", loadTargets[lt.code], mode, name)
					}
				}
			}
		}
		// Ratios to the bare StatefulSet of the same round, then every sample of the round is recorded.
		for k, s := range got {
			if base := got[key{0, k.mode, k.workload}]; base != nil && base["perSecond"] > 0 && base["p99ms"] > 0 {
				s["perSecondRatio"] = s["perSecond"] / base["perSecond"]
				s["p99Ratio"] = s["p99ms"] / base["p99ms"]
			}
		}
		for tg := range loadTargets {
			for m := range loadModes {
				for w := range loadWorkloads {
					if s := got[key{tg, m, w}]; s != nil {
						record(t, "servedload", s)
						lines = append(lines, fmt.Sprintf("| %d | %s | %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %s |", round, loadTargets[tg], loadModes[m],
							loadWorkloads[w], s["perSecond"], s["p50ms"], s["p99ms"], s["perSecondRatio"], s["p99Ratio"], spreadText(s)))
					}
				}
			}
		}
	}
	t.Logf("served load (%s per workload, %d clients over %d connections):\n| round | target | endpoints | workload | req/s | p50 ms | p99 ms | req/s / bare | p99 / bare | requests per member (leader) |\n|---|---|---|---|---|---|---|---|---|---|\n%s",
		loadDuration, loadClients, loadConns, strings.Join(lines, "\n"))
}

// startBareLoadTarget applies target (a) in a namespace of its own: the bare StatefulSet without TLS and a
// client Service written as etcd's documentation writes one (a selector over the members, the client port,
// nothing else), and waits for its pods.
func startBareLoadTarget(t *testing.T) loadTarget {
	ns, _ := newNamespace(t, "load-bare") // deleted when the test ends
	applyBareSpec(t, ns, "bare", 3, withoutTLS)
	c := cluster(ns, "bare", etcdVersion, 3)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd"}, Spec: corev1.ServiceSpec{
		Type:     corev1.ServiceTypeClusterIP,
		Selector: resources.SelectorLabels(c),
		Ports:    []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromInt32(2379), Protocol: corev1.ProtocolTCP}},
	}}
	if err := k8s.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	waitPodsReady(t, ns, "bare", 3, nil, 5*time.Minute)
	return loadTarget{code: 0, ns: ns, instance: "bare", scheme: "http", service: "etcd:2379", members: memberHosts(c)}
}

// startOperatorLoadTarget creates the operator's 3-member cluster, changed by spec, and waits until it is
// Available; with TLS the generator uses the cluster's client certificate.
func startOperatorLoadTarget(t *testing.T, code int, spec func(*etcdv1beta1.EtcdCluster)) loadTarget {
	c, _ := startCluster(t, "load-op", etcdVersion, spec) // its namespace is deleted when the test ends
	lt := loadTarget{code: code, ns: c.Namespace, instance: c.Name, scheme: "http", service: fmt.Sprintf("%s:%d", resources.ClientServiceName(c), resources.ClientPort),
		members: memberHosts(c)}
	if resources.TLSEnabled(c) {
		lt.scheme, lt.secret = "https", resources.ClientSecretName(c)
	}
	return lt
}

// memberHosts are the members' stable DNS names through the headless peer Service, with the client port.
func memberHosts(c *etcdv1beta1.EtcdCluster) []string {
	o := resources.DefaultOptions()
	var out []string
	for i := range int(c.Spec.Replicas) {
		out = append(out, fmt.Sprintf("%s:%d", resources.MemberHost(c, i, o), resources.ClientPort))
	}
	return out
}

// runLoadgen runs the generator as a Job in the target's namespace, waits until its pod ends (watching),
// reads its JSON from the pod's log, and deletes the Job with its pod before returning.
func runLoadgen(t *testing.T, cs kubernetes.Interface, lt loadTarget, mode, label string) loadResult {
	t.Helper()
	ctx := context.Background()
	args := []string{"-endpoints", lt.endpoints(mode), "-duration", loadDuration, "-clients", strconv.Itoa(loadClients),
		"-conns", strconv.Itoa(loadConns), "-workloads", strings.Join(loadWorkloads, ","), "-label", label}
	pod := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{
			Name: "loadgen", Image: loadgenImage, ImagePullPolicy: corev1.PullAlways, // the tag is rebuilt in place
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		}},
	}
	if lt.secret != "" {
		args = append(args, "-cacert", "/tls/ca.crt", "-cert", "/tls/tls.crt", "-key", "/tls/tls.key")
		pod.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: lt.secret}}}}
		pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}}
	}
	pod.Containers[0].Args = args
	name := "loadgen-" + mode
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: lt.ns, Name: name}, Spec: batchv1.JobSpec{
		BackoffLimit: ptr.To[int32](0),
		Template: corev1.PodTemplateSpec{
			// Admitted by the cluster's NetworkPolicy, when it has one.
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "loadgen", resources.LabelClient: lt.instance}},
			Spec:       pod,
		},
	}}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	defer deleteJob(t, job)
	var ended *corev1.Pod
	d, _ := time.ParseDuration(loadDuration)
	timeout := 5*time.Minute + time.Duration(len(loadWorkloads))*(d+10*time.Second)
	err := waitFor(ctx, &corev1.PodList{}, []client.ListOption{client.InNamespace(lt.ns)}, timeout, func() (bool, error) {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(lt.ns), client.MatchingLabels{"job-name": name}); err != nil {
			return false, err
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				ended = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s: the generator did not finish: %v", label, err)
	}
	logs, err := cs.CoreV1().Pods(lt.ns).GetLogs(ended.Name, &corev1.PodLogOptions{Container: "loadgen"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("%s: log: %v", label, err)
	}
	if ended.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("%s: the generator failed:\n%s", label, logs)
	}
	// Its JSON is the one line that is an object (stderr's readable lines come with it in the log).
	var res loadResult
	var parsed bool
	sc := bufio.NewScanner(strings.NewReader(string(logs)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &res) == nil {
			parsed = true
		} else if l != "" {
			t.Log(l)
		}
	}
	if !parsed {
		t.Fatalf("%s: no JSON in the generator's log:\n%s", label, logs)
	}
	return res
}

// deleteJob deletes a Job with its pods and waits until they are gone, so no generator overlaps the next.
func deleteJob(t *testing.T, job *batchv1.Job) {
	ctx := context.Background()
	if err := k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete %s: %v", job.Name, err)
		return
	}
	err := waitFor(ctx, &corev1.PodList{}, []client.ListOption{client.InNamespace(job.Namespace)}, 2*time.Minute, func() (bool, error) {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil {
			return false, err
		}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		return len(pods.Items) == 0 && client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	if err != nil {
		t.Errorf("%s not gone: %v", job.Name, err)
	}
}

// grpcMethod is the gRPC method of each workload, as etcd's grpc_server_started_total labels it.
var grpcMethod = map[string]string{"put": "Put", "get-linearizable": "Range", "get-serializable": "Range", "txn": "Txn"}

// metricsSnapshot is, per member ordinal, the started unary calls by gRPC method, the client gRPC bytes
// received, and whether it led.
type metricsSnapshot []struct {
	started  map[string]float64
	received float64
	leader   bool
}

// memberMetrics reads every member's metrics listener (plain HTTP on resources.MetricsPort, the same for
// the bare StatefulSet, whose configuration comes from the operator's builders) through the API server's
// pod proxy.
func memberMetrics(t *testing.T, cs kubernetes.Interface, lt loadTarget) metricsSnapshot {
	t.Helper()
	snap := make(metricsSnapshot, len(lt.members))
	for i := range snap {
		snap[i].started = map[string]float64{}
		pod := fmt.Sprintf("%s-%d", lt.instance, i)
		b, err := cs.CoreV1().Pods(lt.ns).ProxyGet("http", pod, strconv.Itoa(resources.MetricsPort), "/metrics", nil).DoRaw(context.Background())
		if err != nil {
			t.Logf("metrics of %s/%s: %v", lt.ns, pod, err)
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			name, labels, value, ok := metricLine(l)
			switch {
			case !ok:
			case name == "grpc_server_started_total" && strings.Contains(labels, `grpc_type="unary"`):
				if m := labelValue(labels, "grpc_method"); m != "" {
					snap[i].started[m] += value
				}
			case name == "etcd_network_client_grpc_received_bytes_total":
				snap[i].received += value
			case name == "etcd_server_is_leader":
				snap[i].leader = value == 1
			}
		}
	}
	return snap
}

// metricLine splits a line of Prometheus' text format into name, labels and value.
func metricLine(l string) (name, labels string, value float64, ok bool) {
	if l == "" || l[0] == '#' {
		return "", "", 0, false
	}
	sp := strings.LastIndexByte(l, ' ')
	if sp < 0 {
		return "", "", 0, false
	}
	v, err := strconv.ParseFloat(l[sp+1:], 64)
	if err != nil {
		return "", "", 0, false
	}
	head := l[:sp]
	if i := strings.IndexByte(head, '{'); i >= 0 {
		return head[:i], head[i:], v, true
	}
	return head, "", v, true
}

func labelValue(labels, name string) string {
	_, rest, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// spread adds to a sample how the members shared the run's calls of method (every workload of the run
// counts: the Range calls of both get workloads together): each member's share ("member<i>Share"), the
// largest share, the leader's share and its ordinal, and each member's share of the client bytes received.
func spread(s map[string]float64, before, after metricsSnapshot, method string) {
	var total, bytes float64
	calls := make([]float64, len(after))
	recv := make([]float64, len(after))
	for i := range min(len(before), len(after)) {
		calls[i] = after[i].started[method] - before[i].started[method]
		recv[i] = after[i].received - before[i].received
		total += calls[i]
		bytes += recv[i]
		if after[i].leader {
			s["leader"] = float64(i)
		}
	}
	if total <= 0 {
		return
	}
	for i, c := range calls {
		s[fmt.Sprintf("member%dShare", i)] = c / total
		if bytes > 0 {
			s[fmt.Sprintf("member%dBytesShare", i)] = recv[i] / bytes
		}
	}
	s["maxShare"] = slices.Max(calls) / total
	if l, ok := s["leader"]; ok {
		s["leaderShare"] = calls[int(l)] / total
	}
}

func spreadText(s map[string]float64) string {
	var parts []string
	for i := 0; ; i++ {
		v, ok := s[fmt.Sprintf("member%dShare", i)]
		if !ok {
			break
		}
		mark := ""
		if l, ok := s["leader"]; ok && int(l) == i {
			mark = "*"
		}
		parts = append(parts, fmt.Sprintf("%d%s %.0f%%", i, mark, v*100))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}
