//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

var (
	// prometheusBin is the Prometheus server built from its module (make prometheus); make test-e2e sets it.
	prometheusBin = os.Getenv("E2E_PROMETHEUS")
	// operatorMetricsService is the Service of the operator's metrics endpoint (make deploy).
	operatorMetricsService = framework.Env("E2E_OPERATOR_METRICS_SERVICE", "etcd-operator-controller-manager-metrics-service")
)

// A real Prometheus beside the node scrapes the operator and a 3-member cluster and evaluates the alerting
// rules of config/prometheus/alerts.yaml; the dashboard's queries run against what it scraped. The node has
// no prometheus-operator, so the members are scraped with the scrape configuration the cluster's PodMonitor
// stands for (the same pods, port, job and relabelling), discovered through the node's API server.
var _ = Describe("Monitoring with a real Prometheus", Ordered, Label("prometheus"), func() {
	var (
		ns   string
		c    *etcdv1beta1.EtcdCluster
		prom promv1.API
		stop func()
	)

	BeforeAll(func() {
		Expect(prometheusBin).NotTo(BeEmpty(), "E2E_PROMETHEUS must name a Prometheus binary (make test-monitoring builds it)")
		ns = fw.NewNamespace("prometheus")
		c = fw.NewCluster(ns, "watched", etcdVersion, 3)
		// Backups every minute to an object store that refuses connections: the backup alert's case.
		c.Spec.BackupSchedule = "* * * * *"
		c.Spec.Backup.S3 = &etcdv1beta1.S3BackupDestination{Endpoint: "http://127.0.0.1:1", Bucket: "none", CredentialsSecretName: "s3-credentials"}
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-credentials"},
			StringData: map[string]string{"accessKeyID": "e2e", "secretAccessKey": "e2e-secret"}})).To(Succeed())
		Expect(k8s.Create(ctx, c)).To(Succeed())
		fw.WaitAvailable(c, 5*time.Minute)

		var url string
		url, stop = startPrometheus(ns, c.Name, metricsReaderToken(ns))
		cli, err := promapi.NewClient(promapi.Config{Address: url})
		Expect(err).NotTo(HaveOccurred())
		prom = promv1.NewAPI(cli)
	})

	AfterAll(func() {
		if stop != nil {
			stop()
		}
	})

	It("scrapes every member's etcd metrics and the operator's series of the cluster", func() {
		start := time.Now()
		sel := fmt.Sprintf(`namespace=%q,cluster=%q`, ns, c.Name)
		Eventually(func(g Gomega) {
			up := query(g, prom, fmt.Sprintf(`up{job="etcd",%s}`, sel))
			g.Expect(up).To(HaveLen(3), "one target per member")
			for _, s := range up {
				g.Expect(float64(s.Value)).To(Equal(1.0), "member %s", s.Metric["member"])
			}
			g.Expect(query(g, prom, fmt.Sprintf(`etcd_operator_cluster_quorum{%s}`, sel))).To(HaveLen(1))
			g.Expect(query(g, prom, fmt.Sprintf(`etcd_server_has_leader{%s} == 1`, sel))).To(HaveLen(3))
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("Prometheus has the members' and the operator's series", time.Since(start))

		names := query(Default, prom, fmt.Sprintf(`count by (__name__) ({job="etcd",%s,member=%q})`, sel, c.Name+"-0"))
		ops := query(Default, prom, fmt.Sprintf(`count by (__name__) ({__name__=~"etcd_operator_.+",%s})`, sel))
		GinkgoWriter.Printf("one member's scrape: %d metric names; the operator's series of the cluster: %d metric names: %v\n",
			len(names), len(ops), metricNamesOf(ops))
		Expect(len(names)).To(BeNumerically(">", 100), "etcd serves hundreds of metrics")

		By("the operator's Go runtime runs with half its container's memory limit as the soft limit")
		d := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
		var limit int64
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if ctr.Name == "manager" {
				limit = ctr.Resources.Limits.Memory().Value()
			}
		}
		Expect(limit).To(BeNumerically(">", 0), "the manager container has a memory limit")
		soft := query(Default, prom, `go_gc_gomemlimit_bytes{job="etcd-operator"}`)
		Expect(soft).To(HaveLen(1))
		Expect(float64(soft[0].Value)).To(Equal(float64(limit/2)), "container limit %d bytes", limit)
	})

	It("returns data for every query of the dashboard", func() {
		// Panels of things that happen only now and then (steps taken, members without a leader) have no
		// series on a cluster that never needed them; they must still be queries Prometheus accepts.
		events := []string{"Membership steps", "Maintenance steps", "Members that know no leader", "Time since the last successful backup"}
		vars := strings.NewReplacer("$namespace", ns, "$cluster", c.Name, "$__rate_interval", "1m")
		Eventually(func(g Gomega) {
			for _, p := range dashboardQueries() {
				expr := vars.Replace(p.expr)
				res, _, err := prom.Query(ctx, expr, time.Now())
				g.Expect(err).NotTo(HaveOccurred(), "panel %q: %s", p.title, expr)
				if !slices.Contains(events, p.title) {
					g.Expect(res.(model.Vector)).NotTo(BeEmpty(), "panel %q returns no data: %s", p.title, expr)
				}
			}
		}).WithTimeout(2 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())
	})

	It("makes the member-down and unhealthy-member alerts pending when a member stops answering", func() {
		victim := fw.MemberPods(c)[1]
		start := time.Now()
		cutNetwork(&victim)
		restored := false
		defer func() {
			if !restored {
				restoreNetwork(&victim)
			}
		}()
		Eventually(func(g Gomega) {
			g.Expect(alertStates(g, prom, ns, c.Name)).To(And(
				HaveKeyWithValue("EtcdMemberDown/"+victim.Name, promv1.AlertStatePending),
				HaveKeyWithValue("EtcdMemberUnhealthy/", promv1.AlertStatePending)))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("member cut off to EtcdMemberDown pending", time.Since(start))

		restoreNetwork(&victim)
		restored = true
		Eventually(func(g Gomega) {
			g.Expect(alertStates(g, prom, ns, c.Name)).NotTo(Or(HaveKey("EtcdMemberDown/"+victim.Name), HaveKey("EtcdMemberUnhealthy/")))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		framework.ReportDuration("member back to both alerts inactive", time.Since(start))
	})

	It("makes the backup alert pending when the scheduled backup fails", func() {
		start := time.Now()
		Eventually(func(g Gomega) {
			g.Expect(alertStates(g, prom, ns, c.Name)).To(HaveKeyWithValue("EtcdBackupFailed/", promv1.AlertStatePending))
		}).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("scheduled backup failing to EtcdBackupFailed pending", time.Since(start))
	})
})

// query runs an instant query and returns its samples.
func query(g Gomega, prom promv1.API, q string) model.Vector {
	res, _, err := prom.Query(ctx, q, time.Now())
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred(), q)
	vec, ok := res.(model.Vector)
	g.ExpectWithOffset(1, ok).To(BeTrue(), "%s: a %s, not a vector", q, res.Type())
	return vec
}

func metricNamesOf(v model.Vector) []string {
	var out []string
	for _, s := range v {
		out = append(out, string(s.Metric[model.MetricNameLabel]))
	}
	slices.Sort(out)
	return out
}

// alertStates maps "<alertname>/<member>" of the cluster's active alerts to their state.
func alertStates(g Gomega, prom promv1.API, ns, cluster string) map[string]promv1.AlertState {
	res, err := prom.Alerts(ctx)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := map[string]promv1.AlertState{}
	for _, a := range res.Alerts {
		if string(a.Labels["namespace"]) == ns && string(a.Labels["cluster"]) == cluster {
			out[string(a.Labels["alertname"])+"/"+string(a.Labels["member"])] = a.State
		}
	}
	return out
}

type dashboardQuery struct{ title, expr string }

// dashboardQueries are the queries of config/grafana's dashboard, panel by panel.
func dashboardQueries() []dashboardQuery {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "grafana", "etcd-operator-dashboard.json"))
	Expect(err).NotTo(HaveOccurred())
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	Expect(json.Unmarshal(data, &d)).To(Succeed())
	var out []dashboardQuery
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, dashboardQuery{p.Title, t.Expr})
		}
	}
	Expect(out).NotTo(BeEmpty())
	return out
}

// metricsReaderToken is a token of a service account bound to the operator's metrics-reader role: what a
// Prometheus in the cluster presents to the operator's authenticated metrics endpoint.
func metricsReaderToken(ns string) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "etcd-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	Expect(k8s.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, binding) })
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return tr.Status.Token
}

// startPrometheus runs Prometheus on the host with the rules file, a scrape of the cluster's members as the
// PodMonitor describes it, and a scrape of the operator's metrics endpoint (HTTPS, a bearer token; its
// certificate is the operator's self-signed one, so it is not verified). It returns the API's URL and
// a function that stops it.
func startPrometheus(ns, cluster, token string) (string, func()) {
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)).To(Succeed())
	rules, err := filepath.Abs(filepath.Join("..", "..", "config", "prometheus", "alerts.yaml"))
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := filepath.Abs(os.Getenv("KUBECONFIG"))
	Expect(err).NotTo(HaveOccurred())
	sd := func(namespace string) []any {
		return []any{map[string]any{"role": "pod", "kubeconfig_file": kubeconfig, "namespaces": map[string]any{"names": []any{namespace}}}}
	}
	keep := func(label, regex string) map[string]any {
		return map[string]any{"source_labels": []any{label}, "regex": regex, "action": "keep"}
	}
	set := func(from, to string) map[string]any {
		return map[string]any{"source_labels": []any{from}, "target_label": to, "action": "replace"}
	}
	config := map[string]any{
		"global":     map[string]any{"scrape_interval": "2s", "scrape_timeout": "1s", "evaluation_interval": "2s"},
		"rule_files": []any{rules},
		"scrape_configs": []any{
			map[string]any{
				// What the cluster's PodMonitor (internal/resources/podmonitor.go) makes prometheus-operator generate.
				"job_name":              "etcd",
				"kubernetes_sd_configs": sd(ns),
				"relabel_configs": []any{
					keep("__meta_kubernetes_pod_label_app_kubernetes_io_instance", cluster),
					keep("__meta_kubernetes_pod_label_app_kubernetes_io_name", "etcd"),
					keep("__meta_kubernetes_pod_container_port_name", "metrics"),
					set("__meta_kubernetes_pod_label_app_kubernetes_io_name", "job"),
					set("__meta_kubernetes_namespace", "namespace"),
					set("__meta_kubernetes_pod_label_app_kubernetes_io_instance", "cluster"),
					set("__meta_kubernetes_pod_name", "member"),
				},
			},
			map[string]any{
				"job_name": "etcd-operator",
				// The operator's series carry the cluster's namespace: without honor_labels, Prometheus would
				// move it to exported_namespace and put the operator's own namespace in its place.
				"honor_labels":  true,
				"scheme":        "https",
				"tls_config":    map[string]any{"insecure_skip_verify": true},
				"authorization": map[string]any{"credentials_file": filepath.Join(dir, "token")},
				"kubernetes_sd_configs": []any{map[string]any{"role": "endpoints", "kubeconfig_file": kubeconfig,
					"namespaces": map[string]any{"names": []any{operatorNamespace}}}},
				"relabel_configs": []any{
					keep("__meta_kubernetes_service_name", operatorMetricsService),
					keep("__meta_kubernetes_endpoint_port_name", "https"),
					set("__meta_kubernetes_namespace", "namespace"),
				},
			},
		},
	}
	data, err := yaml.Marshal(config)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), data, 0o600)).To(Succeed())

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := lis.Addr().String()
	Expect(lis.Close()).To(Succeed())
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(prometheusBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the suite
	Expect(cmd.Start()).To(Succeed())
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = log.Close()
		if CurrentSpecReport().Failed() || GinkgoT().Failed() {
			tail, _ := os.ReadFile(log.Name())
			GinkgoWriter.Printf("Prometheus log:\n%s\n", lastLines(string(tail), 40))
		}
	}
	url := "http://" + addr
	Eventually(func() error {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "Prometheus did not start; see %s", log.Name())
	return url, stop
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
