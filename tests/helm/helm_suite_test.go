//go:build helm

// Package helm installs the operator's Helm chart (charts/etcd-operator) from an OCI registry on the local node
// (`make test-helm-node`): the chart is packaged at its version and at the next patch version, both are pushed to the
// node's registry over TLS, the first is installed, upgraded to the second under a running EtcdCluster, and
// uninstalled. It needs KUBECONFIG, helm (HELM), kubectl (KUBECTL) and the operator image hack/node/images.sh pushed
// (HELM_OPERATOR_IMAGE, else bin/node/operator-image). tests/chart checks the chart's render offline.
package helm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/tests/framework"
)

// Settings, from the environment (make test-helm-node sets them) with defaults that match hack/node.
var (
	helmBin = framework.Env("HELM", "helm")
	// The chart directory, packaged by the suite.
	chartDir = framework.Env("HELM_CHART", "../../charts/etcd-operator")
	// The node registry's TLS endpoint and the CA bundle that trusts it (hack/node/registry.sh); charts go to
	// oci://<registry>/charts.
	registry          = framework.Env("HELM_REGISTRY", "localhost:5443")
	registryTLSBundle = framework.Env("HELM_REGISTRY_TLS_BUNDLE", "../../bin/node/registry-tls/ca-bundle.crt")
	// The operator image both chart versions run (hack/node/images.sh writes its reference).
	operatorImage  = os.Getenv("HELM_OPERATOR_IMAGE")
	etcdRepository = framework.Env("HELM_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion    = framework.Env("HELM_ETCD_VERSION", "3.5.35")
)

// operatorPodLabels are the operator pod's labels, fixed by the chart whatever the release is called (and the same
// for `make deploy` and OLM installs): no other operator may run while the suite does.
var operatorPodLabels = client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator", "control-plane": "controller-manager"}

var (
	ctx     context.Context
	k8s     client.Client
	kubectl string
	fw      *framework.Framework
	// helmEnv keeps helm's configuration, cache and registry credentials in a directory of the suite's own.
	helmEnv []string
	// workDir holds the packaged charts.
	workDir string
)

func TestHelm(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "etcd-operator's Helm chart on the local node")
}

// helm runs helm with the suite's environment and returns its combined output.
func helm(args ...string) string {
	out, err := framework.RunLogged(helmBin, helmEnv, args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	return out
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	kubeconfig := os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must point at the node (bin/node/kubeconfig)")
	cfg, err := framework.RESTConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = framework.NewClient(cfg, apiextensionsv1.AddToScheme)
	Expect(err).NotTo(HaveOccurred())
	kubectl, err = framework.FindKubectl()
	Expect(err).NotTo(HaveOccurred(), "set KUBECTL or put kubectl on PATH")
	fw = &framework.Framework{Ctx: ctx, Client: k8s, KubectlPath: kubectl, EtcdRepository: etcdRepository,
		// Wait until a namespace is gone: later stages on the node must not see this suite's objects terminate.
		NamespacePrefix: "helm-", NamespaceGoneTimeout: 3 * time.Minute, Poll: time.Second,
		// Pace the writer (it shares 2 cores with the node).
		WritePause: 20 * time.Millisecond}

	if operatorImage == "" {
		b, err := os.ReadFile("../../bin/node/operator-image")
		Expect(err).NotTo(HaveOccurred(), "set HELM_OPERATOR_IMAGE or run hack/node/images.sh (make images)")
		operatorImage = strings.TrimSpace(string(b))
	}
	Expect(operatorImage).To(MatchRegexp(`^[^:]+(:[0-9]+)?/.+:[^:/]+$`), "HELM_OPERATOR_IMAGE must be repository:tag")
	_, err = os.Stat(registryTLSBundle)
	Expect(err).NotTo(HaveOccurred(), "the registry's CA bundle (hack/node/registry.sh writes it)")
	registryTLSBundle, err = filepath.Abs(registryTLSBundle)
	Expect(err).NotTo(HaveOccurred())

	workDir, err = os.MkdirTemp("", "etcd-operator-helm-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, workDir)
	helmEnv = []string{
		"HELM_CONFIG_HOME=" + filepath.Join(workDir, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(workDir, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(workDir, "data"),
		"HELM_REGISTRY_CONFIG=" + filepath.Join(workDir, "registry.json"),
		"KUBECONFIG=" + kubeconfig,
	}
	GinkgoWriter.Println(helm("version", "--short"))

	By("checking that no other etcd operator runs (make deploy, OLM): two operators would fight over the same clusters")
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, operatorPodLabels)).To(Succeed())
		var running []string
		for _, p := range pods.Items {
			running = append(running, p.Namespace+"/"+p.Name)
		}
		g.Expect(running).To(BeEmpty(), "operators run on the node: `make undeploy`, or remove their OLM installs")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
})
