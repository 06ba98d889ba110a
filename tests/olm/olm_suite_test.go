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
	"os/exec"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// Settings, from the environment (make test-olm sets them) with defaults that match hack/olm and hack/node.
var (
	imagesEnv       = env("OLM_IMAGES_ENV", "../../bin/node/olm/images.env")
	olmNamespace    = env("OLM_NAMESPACE", "olm")
	catalogSource   = env("OLM_CATALOG_SOURCE", "etcd-operator-catalog")
	packageName     = env("OLM_PACKAGE", "etcd-operator")
	currentVersion  = env("OLM_CURRENT_VERSION", "0.2.0")
	previousVersion = env("OLM_PREVIOUS_VERSION", "0.1.0")
	etcdRepository  = env("OLM_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion     = env("OLM_ETCD_VERSION", "3.5.35")
	operatorSDK     = os.Getenv("OPERATOR_SDK")
	// The node registry's TLS endpoint and the CA bundle that trusts it (hack/node/registry.sh).
	registryTLS       = env("OLM_REGISTRY_TLS", "localhost:5443")
	registryTLSBundle = os.Getenv("OLM_REGISTRY_TLS_BUNDLE")
	// Namespaces where `make deploy` puts the operator: it must not run during this suite (two operators would
	// reconcile the same clusters).
	deployNamespace = env("OLM_DEPLOY_NAMESPACE", "etcd-operator-system")
)

const operatorDeployment = "etcd-operator-controller-manager"

var (
	ctx     context.Context
	cfg     *rest.Config
	k8s     client.Client
	cs      *kubernetes.Clientset
	kubectl string
	images  map[string]string
)

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

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
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(operatorsv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(operatorsv1.AddToScheme(scheme)).To(Succeed())
	Expect(etcdv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	cs, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	kubectl = os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl, err = exec.LookPath("kubectl")
		Expect(err).NotTo(HaveOccurred(), "set KUBECTL or put kubectl on PATH")
	}

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
