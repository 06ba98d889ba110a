//go:build e2e

// Package e2e runs the operator on a real cluster: the local node of `make cluster-up` (hack/node), with the
// operator deployed by `make deploy` from images built offline. Run it with `make test-e2e`; it needs
// KUBECONFIG, and reaches Services' cluster IPs from the host (true on the local node, where the suite runs).
package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/tests/framework"
)

// Settings, from the environment (make test-e2e sets them) with defaults that match hack/node.
var (
	etcdRepository     = framework.Env("E2E_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion        = framework.Env("E2E_ETCD_VERSION", "3.5.35")
	etcdUpgradeFrom    = framework.Env("E2E_ETCD_UPGRADE_FROM", "3.5.34")
	etcdMinorUpgradeTo = framework.Env("E2E_ETCD_MINOR_UPGRADE_TO", "3.6.16")
	operatorNamespace  = framework.Env("E2E_OPERATOR_NAMESPACE", "etcd-operator-system")
	operatorDeployment = framework.Env("E2E_OPERATOR_DEPLOYMENT", "etcd-operator-controller-manager")
	operatorImage      = os.Getenv("E2E_OPERATOR_IMAGE")
)

var (
	ctx     context.Context
	cfg     *rest.Config
	k8s     client.Client
	kubectl string
	// fw runs the shared helpers against k8s; set in BeforeSuite.
	fw *framework.Framework
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "etcd-operator e2e")
}

var _ = BeforeSuite(func() {
	ctx = context.Background()
	kubeconfig := os.Getenv("KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must point at the cluster (make cluster-up writes bin/node/kubeconfig)")
	var err error
	cfg, err = framework.RESTConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = framework.NewClient(cfg)
	Expect(err).NotTo(HaveOccurred())

	kubectl, err = framework.FindKubectl()
	Expect(err).NotTo(HaveOccurred(), "set KUBECTL or put kubectl on PATH")
	fw = &framework.Framework{Ctx: ctx, Client: k8s, KubectlPath: kubectl, EtcdRepository: etcdRepository, NamespacePrefix: "e2e-"}

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

// After a failed spec, the operator's latest errors join the namespace's diagnostics (framework.DumpNamespace).
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	// Restarts and why the last one ended (OOMKilled, a lost leader election, a panic), with its last words.
	out, err := fw.Kubectl("get", "pods", "-n", operatorNamespace, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.reason} restarts={.status.containerStatuses[0].restartCount} last={.status.containerStatuses[0].lastState.terminated.reason}({.status.containerStatuses[0].lastState.terminated.exitCode}) {.status.containerStatuses[0].lastState.terminated.finishedAt}{"\n"}{end}`)
	GinkgoWriter.Printf("%soperator pods: %s %v\n", framework.DiagnosticsPrefix, strings.TrimSpace(out), err)
	// The node's pressures and taints: a node under disk or memory pressure evicts pods and schedules none.
	out, err = fw.Kubectl("get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name} taints={.spec.taints[*].key} {range .status.conditions[?(@.status=="True")]}{.type} {end}{"\n"}{end}`)
	GinkgoWriter.Printf("%snode: %s %v\n", framework.DiagnosticsPrefix, strings.TrimSpace(out), err)
	if prev, err := fw.Kubectl("logs", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--previous", "--tail=5"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(prev), "\n") {
			GinkgoWriter.Printf("%soperator before its restart: %.400s\n", framework.DiagnosticsPrefix, l)
		}
	}
	out, err = fw.Kubectl("logs", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--tail=400")
	if err != nil {
		GinkgoWriter.Printf("%soperator log: %v\n", framework.DiagnosticsPrefix, err)
		return
	}
	var errors []string
	for _, l := range strings.Split(out, "\n") {
		// (Writes into namespaces other specs are deleting fail by the dozen and say nothing.)
		if strings.Contains(l, `"level":"error"`) && !strings.Contains(l, "because it is being terminated") {
			errors = append(errors, l)
		}
	}
	for _, l := range errors[max(0, len(errors)-15):] {
		GinkgoWriter.Printf("%soperator: %.400s\n", framework.DiagnosticsPrefix, l)
	}
})
