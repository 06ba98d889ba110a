//go:build e2e

// Package e2e runs the operator on a real cluster: the local node of `make cluster-up` (hack/node), with the
// operator deployed by `make deploy` from images built offline. Run it with `make test-e2e`; it needs
// KUBECONFIG, and reaches Services' cluster IPs from the host (true on the local node, where the suite runs).
package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// Settings, from the environment (make test-e2e sets them) with defaults that match hack/node.
var (
	etcdRepository     = env("E2E_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion        = env("E2E_ETCD_VERSION", "3.5.35")
	etcdUpgradeFrom    = env("E2E_ETCD_UPGRADE_FROM", "3.5.34")
	etcdMinorUpgradeTo = env("E2E_ETCD_MINOR_UPGRADE_TO", "3.6.16")
	operatorNamespace  = env("E2E_OPERATOR_NAMESPACE", "etcd-operator-system")
	operatorDeployment = env("E2E_OPERATOR_DEPLOYMENT", "etcd-operator-controller-manager")
	operatorImage      = os.Getenv("E2E_OPERATOR_IMAGE")
)

var (
	ctx     context.Context
	cfg     *rest.Config
	k8s     client.Client
	kubectl string
)

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "etcd-operator e2e")
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	kubeconfig := os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must point at the cluster (make cluster-up writes bin/node/kubeconfig)")
	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(etcdv1alpha1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	kubectl = os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl, err = exec.LookPath("kubectl")
		Expect(err).NotTo(HaveOccurred(), "set KUBECTL or put kubectl on PATH")
	}

	By("waiting for the operator deployed by `make deploy` to be available")
	start := time.Now()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		if operatorImage != "" {
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatorImage))
		}
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	AddReportEntry("operator available after", time.Since(start).Round(100*time.Millisecond).String())
})
