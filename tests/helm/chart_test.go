//go:build helm

package helm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/framework"
)

const (
	chartName = "etcd-operator"
	// The release is not called etcd-operator: `make deploy`'s cluster-scoped objects (ClusterRoles and their
	// bindings, named etcd-operator-*) stay on the node when its Deployment is removed, and Helm refuses to adopt
	// objects it did not create. This name prefixes the release's objects with itself instead.
	releaseName = "helm-etcd-operator"
	// The operator's leader lease in the release namespace (controllers.LeaderElectionID).
	leaderElectionID = "etcd-operator.etcd.seedops.io"
	// The pod annotation the next chart version's defaults add (see packageChart).
	chartVersionAnnotation = "example.com/chart-version"
)

// The chart's CRDs (crds/): Helm installs them with the release and never upgrades or deletes them.
var crdNames = []string{"etcdclusters.etcd.seedops.io", "etcdbackups.etcd.seedops.io"}

// chartMeta reads the chart's version and appVersion.
func chartMeta() (version, appVersion string) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	ExpectWithOffset(1, yaml.Unmarshal(b, &c)).To(Succeed())
	return c.Version, c.AppVersion
}

// nextPatch is X.Y.(Z+1) of X.Y.Z.
func nextPatch(v string) string {
	m := regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)$`).FindStringSubmatch(v)
	ExpectWithOffset(1, m).NotTo(BeNil(), "chart version %q is not X.Y.Z", v)
	z, _ := strconv.Atoi(m[3])
	return fmt.Sprintf("%s.%s.%d", m[1], m[2], z+1)
}

// packageChart packages the chart at version into workDir and returns the archive. With annotate, the chart is a
// copy whose default podAnnotations carry the version: the next release's operator pod template differs from the
// previous one's, as a release with a new operator image's would, so the upgrade replaces the operator's pod (the
// suite has one operator build, so the image cannot be what changes).
func packageChart(version string, annotate bool) string {
	src := chartDir
	if annotate {
		parent := filepath.Join(workDir, "chart-"+version)
		ExpectWithOffset(1, os.MkdirAll(parent, 0o755)).To(Succeed())
		src = filepath.Join(parent, chartName)
		out, err := framework.RunLogged("cp", nil, "-r", chartDir, src)
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
		valuesFile := filepath.Join(src, "values.yaml")
		values, err := os.ReadFile(valuesFile)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		const from = "\npodAnnotations: {}\n"
		ExpectWithOffset(1, strings.Count(string(values), from)).To(Equal(1), "values.yaml: %q", from)
		to := fmt.Sprintf("\npodAnnotations:\n  %s: %q\n", chartVersionAnnotation, version)
		ExpectWithOffset(1, os.WriteFile(valuesFile, []byte(strings.Replace(string(values), from, to, 1)), 0o644)).To(Succeed())
	}
	helm("package", src, "--version", version, "--destination", workDir)
	archive := filepath.Join(workDir, fmt.Sprintf("%s-%s.tgz", chartName, version))
	_, err := os.Stat(archive)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return archive
}

// imageValues sets the operator image of both chart versions: the build hack/node/images.sh pushed.
func imageValues() []string {
	i := strings.LastIndex(operatorImage, ":")
	return []string{"--set-string", "image.repository=" + operatorImage[:i], "--set-string", "image.tag=" + operatorImage[i+1:]}
}

// helmRelease is a line of `helm list -o json`.
type helmRelease struct {
	Name       string `json:"name"`
	Revision   string `json:"revision"`
	Status     string `json:"status"`
	Chart      string `json:"chart"`
	AppVersion string `json:"app_version"`
}

func releases(ns string) []helmRelease {
	out, _, err := framework.Run("env", append(helmEnv, helmBin, "list", "-n", ns, "-a", "-o", "json")...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var rels []helmRelease
	ExpectWithOffset(1, json.Unmarshal([]byte(out), &rels)).To(Succeed(), out)
	return rels
}

// waitOperator waits for the release's operator Deployment in ns to finish its rollout to a single pod whose
// chart-version annotation is annotation ("" for none), and for that pod to hold the leader lease; it returns
// the pod.
func waitOperator(ns, annotation string) corev1.Pod {
	var pod corev1.Pod
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: releaseName + "-controller-manager"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatorImage))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old pods still running")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), operatorPodLabels)).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "operator pods, terminating ones included")
		pod = pods.Items[0]
		g.Expect(pod.DeletionTimestamp).To(BeNil())
		g.Expect(pod.Annotations[chartVersionAnnotation]).To(Equal(annotation))
		g.Expect(framework.PodReady(&pod)).To(BeTrue())
		// Ready is not leading: the operator works once its pod holds the lease.
		lease := &coordinationv1.Lease{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaderElectionID}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).To(Equal(pod.Name), "the lease is held under the leader pod's name")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	framework.ReportDuration("operator "+ns+"/"+pod.Name+" leading", time.Since(start))
	return pod
}

// podState is what changes when a member's pod is recreated or its container restarts.
type podState struct {
	UID      string
	Restarts int32
}

// clusterState is what an upgrade of the operator must leave alone: the member pods and the etcd members.
type clusterState struct {
	Pods map[string]podState
	// Members: etcd's member IDs (hex) by member name, as etcd lists them.
	Members map[string]string
}

func observe(g Gomega, c *etcdv1beta1.EtcdCluster) clusterState {
	s := clusterState{Pods: map[string]podState{}, Members: map[string]string{}}
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(c.Namespace), framework.MemberLabels(c.Name))).To(Succeed())
	for _, p := range pods.Items {
		st := podState{UID: string(p.UID)}
		for _, cs := range p.Status.ContainerStatuses {
			st.Restarts += cs.RestartCount
		}
		s.Pods[p.Name] = st
	}
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(mctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range resp.Members {
		s.Members[m.Name] = fmt.Sprintf("%x", m.ID)
	}
	return s
}

// managedObjects are the objects the operator made for the clusters of ns (labelled as managed by it), by kind and
// name, with their UIDs.
func managedObjects(g Gomega, ns string) map[string]string {
	out := map[string]string{}
	sel := client.MatchingLabels{resources.LabelManagedBy: "etcd-operator"}
	lists := map[string]client.ObjectList{
		"statefulset": &appsv1.StatefulSetList{}, "service": &corev1.ServiceList{}, "configmap": &corev1.ConfigMapList{},
		"secret": &corev1.SecretList{}, "pdb": &policyv1.PodDisruptionBudgetList{}, "cronjob": &batchv1.CronJobList{},
		"pvc": &corev1.PersistentVolumeClaimList{}, "pod": &corev1.PodList{},
	}
	for kind, l := range lists {
		g.Expect(k8s.List(ctx, l, client.InNamespace(ns), sel)).To(Succeed())
		items, err := meta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range items {
			obj := o.(client.Object)
			out[kind+"/"+obj.GetName()] = string(obj.GetUID())
		}
	}
	return out
}

// expectUntouched checks, for d, that the cluster keeps its pods, containers and members and stays Available at
// its current generation.
func expectUntouched(c *etcdv1beta1.EtcdCluster, before clusterState, d time.Duration) {
	ConsistentlyWithOffset(1, func(g Gomega) {
		cur := &etcdv1beta1.EtcdCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(BeTrue(),
			"conditions: %+v", cur.Status.Conditions)
		g.Expect(cur.Status.ReadyReplicas).To(Equal(cur.Spec.Replicas))
		g.Expect(observe(g, c)).To(Equal(before))
	}).WithTimeout(d).WithPolling(2 * time.Second).Should(Succeed())
}

// established reports the CRD's Established condition.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// deleteFromRegistry deletes a manifest the suite pushed (the node's registry allows deletes) through the
// registry's HTTP API, which Helm does not wrap; its blobs go at the registry's next garbage collection.
func deleteFromRegistry(repository, digest string) {
	pem, err := os.ReadFile(registryTLSBundle)
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(pem)).To(BeTrue(), registryTLSBundle)
	hc := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodDelete, fmt.Sprintf("https://%s/v2/%s/manifests/%s", registry, repository, digest), nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := hc.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Or(Equal(http.StatusAccepted), Equal(http.StatusNotFound)), "DELETE %s@%s: %s", repository, digest, body)
}

// crdObjects lists the objects of a CRD in every namespace.
func crdObjects(g Gomega, crd *apiextensionsv1.CustomResourceDefinition) []string {
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.ListKind})
	g.Expect(k8s.List(ctx, list)).To(Succeed())
	var names []string
	for _, o := range list.Items {
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}
	return names
}

// removeCRDs deletes the project's CRDs when they exist (from `make deploy` or an earlier stage), so that the
// release installs its own, as on a first install; only once no object of theirs is left anywhere, since deleting
// a CRD deletes its objects. Whatever happens, the CRDs exist again when the container ends.
func removeCRDs() {
	DeferCleanup(func() {
		out, err := framework.RunLogged(kubectl, nil, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(chartDir, "crds"))
		Expect(err).NotTo(HaveOccurred(), out)
	})
	for _, name := range crdNames {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			ExpectWithOffset(1, apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			continue
		}
		// Objects of an earlier stage's namespaces may still be going with their namespace.
		EventuallyWithOffset(1, func(g Gomega) {
			g.Expect(crdObjects(g, crd)).To(BeEmpty(), "%s exist on the node: their CRD cannot be replaced", crd.Spec.Names.Plural)
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		ExpectWithOffset(1, k8s.Delete(ctx, crd)).To(Succeed())
		fw.ExpectGone(crd, 2*time.Minute)
	}
}

var _ = Describe("The Helm chart from an OCI registry: install, upgrade under a running cluster, uninstall", Ordered, Label("helm"), func() {
	var (
		opNS, ns            string
		version, appVersion string
		next, ref           string
		c                   *etcdv1beta1.EtcdCluster
		w                   *framework.Writer
		before              clusterState
		operator            corev1.Pod
		pushed              []string // digests of the charts pushed, deleted from the registry when the container ends
	)

	BeforeAll(func() {
		version, appVersion = chartMeta()
		next = nextPatch(version)
		GinkgoWriter.Printf("chart %s (appVersion %s), upgraded to %s; operator image %s\n", version, appVersion, next, operatorImage)
		ref = "oci://" + registry + "/charts/" + chartName
		removeCRDs()
		opNS = fw.NewNamespace("operator")
		// Runs before the namespace's deletion (cleanups run last-registered first): the release's cluster-scoped
		// objects go too, whatever spec failed.
		DeferCleanup(func() {
			for _, r := range releases(opNS) {
				helm("uninstall", r.Name, "-n", opNS, "--wait", "--timeout", "3m")
			}
		})
		ns = fw.NewNamespace("cluster")
		// Registered here, not in the spec that pushes: a spec's cleanups run when that spec ends.
		DeferCleanup(func() {
			for _, digest := range pushed {
				deleteFromRegistry("charts/"+chartName, digest)
			}
		})
	})

	It("packages the chart at its version and the next patch version and pushes both to the registry", func() {
		for _, v := range []string{version, next} {
			archive := packageChart(v, v == next)
			out := helm("push", archive, "oci://"+registry+"/charts", "--ca-file", registryTLSBundle)
			m := regexp.MustCompile(`Digest: (sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
			Expect(m).NotTo(BeNil(), "no digest in helm push's output")
			pushed = append(pushed, m[1])
		}
		out := helm("show", "chart", ref, "--version", next, "--ca-file", registryTLSBundle)
		Expect(out).To(ContainSubstring("version: " + next))
	})

	It("installs the chart from the registry, CRDs included", func() {
		start := time.Now()
		helm(append([]string{"install", releaseName, ref, "--version", version, "-n", opNS,
			"--ca-file", registryTLSBundle, "--wait", "--timeout", "3m"}, imageValues()...)...)
		operator = waitOperator(opNS, "")
		framework.ReportDuration("helm install (operator leading)", time.Since(start))
		Expect(releases(opNS)).To(ConsistOf(helmRelease{Name: releaseName, Revision: "1", Status: "deployed",
			Chart: chartName + "-" + version, AppVersion: appVersion}))
		for _, name := range crdNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			Expect(established(crd)).To(BeTrue(), name)
		}
	})

	It("runs a 3-member EtcdCluster that takes writes", func() {
		c = fw.NewCluster(ns, "helm", etcdVersion, 3)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		framework.ReportDuration("EtcdCluster Available", fw.WaitAvailable(c, 5*time.Minute))
		w = fw.StartWriter(c, "helm")
		w.WaitProgress(50, time.Minute)
		Eventually(func(g Gomega) {
			before = observe(g, c)
			g.Expect(before.Pods).To(HaveLen(3))
			g.Expect(before.Members).To(HaveLen(3))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		GinkgoWriter.Printf("before the upgrade: %+v\n", before)
	})

	It("upgrades the release to the next chart version from the registry, which replaces the operator's pod", func() {
		start := time.Now()
		helm(append([]string{"upgrade", releaseName, ref, "--version", next, "-n", opNS,
			"--ca-file", registryTLSBundle, "--wait", "--timeout", "3m"}, imageValues()...)...)
		upgraded := waitOperator(opNS, next)
		Expect(upgraded.UID).NotTo(Equal(operator.UID))
		fw.ExpectGone(&operator, 2*time.Minute)
		operator = upgraded
		framework.ReportDuration("helm upgrade (new operator leading)", time.Since(start))
		Expect(releases(opNS)).To(ConsistOf(helmRelease{Name: releaseName, Revision: "2", Status: "deployed",
			Chart: chartName + "-" + next, AppVersion: appVersion}))
	})

	It("leaves the cluster untouched while the new operator reconciles it: no pod recreated or restarted, same members", func() {
		// A spec change that touches no member (the backup schedule lives in the CronJob only): once the CronJob
		// carries it and the status reports the new generation, the new operator has reconciled the cluster.
		fw.UpdateCluster(c, func(cur *etcdv1beta1.EtcdCluster) { cur.Spec.BackupSchedule = "0 3 * * *" })
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.BackupCronJobName(c)}, cj)).To(Succeed())
			g.Expect(cj.Spec.Schedule).To(Equal("0 3 * * *"))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		fw.WaitAvailable(c, 2*time.Minute)
		w.WaitProgress(50, time.Minute)
		expectUntouched(c, before, 30*time.Second)
	})

	It("keeps every acknowledged key", func() {
		w.StopAndVerify(c)
	})

	It("uninstalls the release: the operator and its RBAC go; the CRDs, the EtcdCluster and its running members stay", func() {
		var managed map[string]string
		Eventually(func(g Gomega) { managed = managedObjects(g, ns) }).WithTimeout(time.Minute).Should(Succeed())
		Expect(managed).To(HaveKey("statefulset/" + c.Name))
		generation := fw.GetCluster(c).Generation
		start := time.Now()
		helm("uninstall", releaseName, "-n", opNS, "--wait", "--timeout", "3m")
		framework.ReportDuration("helm uninstall", time.Since(start))
		Expect(releases(opNS)).To(BeEmpty())
		fw.ExpectGone(&operator, 2*time.Minute)

		By("checking that nothing of the release is left")
		gone := map[string]client.Object{
			releaseName + "-controller-manager":                 &appsv1.Deployment{},
			releaseName + "-controller-manager-metrics-service": &corev1.Service{},
		}
		for name, obj := range gone {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: name}, obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v", obj, name, err)
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: opNS, Name: releaseName + "-controller-manager"}, &corev1.ServiceAccount{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ServiceAccount: %v", err)
		byRelease := client.MatchingLabels{"app.kubernetes.io/instance": releaseName}
		for _, l := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			Expect(k8s.List(ctx, l, byRelease)).To(Succeed())
			Expect(meta.LenList(l)).To(BeZero(), "%T of the release left", l)
		}
		for _, l := range []client.ObjectList{&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}} {
			Expect(k8s.List(ctx, l, client.InNamespace(opNS), byRelease)).To(Succeed())
			Expect(meta.LenList(l)).To(BeZero(), "%T of the release left", l)
		}

		By("checking that the CRDs, the EtcdCluster and what the operator made for it stay, with the same members")
		for _, name := range crdNames {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			Expect(crd.DeletionTimestamp).To(BeNil(), name)
		}
		live := fw.GetCluster(c)
		Expect(live.DeletionTimestamp).To(BeNil())
		Expect(live.Generation).To(Equal(generation), "the EtcdCluster changed")
		Consistently(func(g Gomega) {
			g.Expect(managedObjects(g, ns)).To(Equal(managed))
			g.Expect(observe(g, c)).To(Equal(before))
		}).WithTimeout(15 * time.Second).WithPolling(3 * time.Second).Should(Succeed())

		By("checking that the cluster without an operator keeps its data and takes writes")
		w.Verify(c)
		after := fw.StartWriter(c, "after-uninstall")
		after.WaitProgress(50, time.Minute)
		after.StopAndVerify(c)
	})
})
