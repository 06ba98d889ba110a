//go:build olm

// Package olm installs the operator through OLM v0 on the local node (`make test-olm`: hack/olm installs OLM from
// its pinned module and serves the local variant of catalog/), in every install mode, upgrades it through a manual
// InstallPlan, and drives `operator-sdk run bundle`/`bundle-upgrade`/`cleanup`. It needs KUBECONFIG and the image
// references hack/olm/images.sh writes (OLM_IMAGES_ENV).
package olm

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/tests/framework"
)

// Settings, from the environment (make test-olm sets them) with defaults that match hack/olm and hack/node.
var (
	imagesEnv       = framework.Env("OLM_IMAGES_ENV", "../../bin/node/olm/images.env")
	olmNamespace    = framework.Env("OLM_NAMESPACE", "olm")
	catalogSource   = framework.Env("OLM_CATALOG_SOURCE", "etcd-operator-catalog")
	packageName     = framework.Env("OLM_PACKAGE", "etcd-operator")
	currentVersion  = framework.Env("OLM_CURRENT_VERSION", "0.3.0")
	previousVersion = framework.Env("OLM_PREVIOUS_VERSION", "0.2.0")
	etcdRepository  = framework.Env("OLM_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion     = framework.Env("OLM_ETCD_VERSION", "3.5.35")
	operatorSDK     = os.Getenv("OPERATOR_SDK")
	// The node registry's TLS endpoint and the CA bundle that trusts it (hack/node/registry.sh).
	registryTLS       = framework.Env("OLM_REGISTRY_TLS", "localhost:5443")
	registryTLSBundle = os.Getenv("OLM_REGISTRY_TLS_BUNDLE")
	// Namespaces where `make deploy` puts the operator: it must not run during this suite (two operators would
	// reconcile the same clusters).
	deployNamespace = framework.Env("OLM_DEPLOY_NAMESPACE", "etcd-operator-system")
	// Each release's source tree (hack/olm/images.sh extracts them to build their images), and kustomize: the
	// kustomize upgrade scenario deploys the previous release from its own config/.
	releaseSources = os.Getenv("OLM_RELEASE_SOURCES")
	kustomize      = os.Getenv("KUSTOMIZE")
)

const operatorDeployment = "etcd-operator-controller-manager"

var (
	ctx     context.Context
	cfg     *rest.Config
	k8s     client.Client
	cs      *kubernetes.Clientset
	kubectl string
	images  map[string]string
	// fw runs the shared helpers against k8s; set in BeforeSuite.
	fw *framework.Framework
)

func TestOLM(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "etcd-operator through OLM")
}

// image returns a reference from images.env, e.g. image("BUNDLE", "0.2.0") is BUNDLE_IMAGE_0_2_0.
func image(kind, version string) string {
	key := kind + "_IMAGE"
	if version != "" {
		key += "_" + strings.ReplaceAll(version, ".", "_")
	}
	ref, ok := images[key]
	ExpectWithOffset(1, ok).To(BeTrue(), "%s is not in %s", key, imagesEnv)
	return ref
}

func csvName(version string) string { return packageName + ".v" + version }

var _ = BeforeSuite(func() {
	ctx = context.Background()
	kubeconfig := os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must point at the node (bin/node/kubeconfig)")
	var err error
	cfg, err = framework.RESTConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = framework.NewClient(cfg, operatorsv1alpha1.AddToScheme, operatorsv1.AddToScheme, apiextensionsv1.AddToScheme)
	Expect(err).NotTo(HaveOccurred())
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	kubectl, err = framework.FindKubectl()
	Expect(err).NotTo(HaveOccurred(), "set KUBECTL or put kubectl on PATH")
	fw = &framework.Framework{Ctx: ctx, Client: k8s, KubectlPath: kubectl, EtcdRepository: etcdRepository,
		// Wait until a namespace is gone: an operator watching all namespaces in a later spec would otherwise
		// reconcile (and log about) this spec's clusters while their namespace terminates.
		NamespacePrefix: "olm-", NamespaceGoneTimeout: 3 * time.Minute, Poll: time.Second,
		// Pace the writer (it shares 2 cores with the node).
		WritePause: 20 * time.Millisecond}
	fw.EtcdClient = etcdClient

	f, err := os.Open(imagesEnv)
	Expect(err).NotTo(HaveOccurred(), "run hack/olm/images.sh (make olm-up) first")
	defer func() { _ = f.Close() }()
	images = map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			images[k] = v
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())

	By("checking that no operator deployed by `make deploy` runs")
	deps := &appsv1.DeploymentList{}
	Expect(k8s.List(ctx, deps, client.InNamespace(deployNamespace))).To(Succeed())
	Expect(deps.Items).To(BeEmpty(), "an operator runs in %s (make deploy): `make undeploy` first", deployNamespace)

	By("waiting for packageserver to list the package from our CatalogSource")
	Eventually(func(g Gomega) {
		pm := &unstructured.Unstructured{}
		pm.SetGroupVersionKind(schema.GroupVersionKind{Group: "packages.operators.coreos.com", Version: "v1", Kind: "PackageManifest"})
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: olmNamespace, Name: packageName}, pm)).To(Succeed())
		src, _, _ := unstructured.NestedString(pm.Object, "status", "catalogSource")
		g.Expect(src).To(Equal(catalogSource))
		def, _, _ := unstructured.NestedString(pm.Object, "status", "defaultChannel")
		g.Expect(def).To(Equal("stable"))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
})
