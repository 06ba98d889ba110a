package framework

import (
	"fmt"
	"slices"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeFaultScript is the local cluster's fault injector (hack/node/fault.sh): it powers a node off and on,
// partitions it and heals it. Tests that inject node faults run as root on the machine of the cluster.
var NodeFaultScript = Env("E2E_NODE_FAULT", "")

// NodeFault runs the fault injector: PowerOff, PowerOn, Partition and Heal name what it does.
func NodeFault(fault, node string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(NodeFaultScript).NotTo(gomega.BeEmpty(), "E2E_NODE_FAULT: hack/node/fault.sh of the local cluster")
	out, err := RunLogged(NodeFaultScript, nil, fault, node)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s: %s", fault, node, out)
}

// PowerOff kills the node's kubelet, container runtime and every container at once, leaving its disk as it
// was; PowerOn starts them again on the same disk.
func PowerOff(node string) { ginkgo.GinkgoHelper(); NodeFault("power-off", node) }
func PowerOn(node string)  { ginkgo.GinkgoHelper(); NodeFault("power-on", node) }

// Partition cuts the node off every other node and the API server while its kubelet and pods keep running;
// Heal connects it again.
func Partition(node string) { ginkgo.GinkgoHelper(); NodeFault("partition", node) }
func Heal(node string)      { ginkgo.GinkgoHelper(); NodeFault("heal", node) }

// Nodes returns the cluster's nodes, by name.
func (f *Framework) Nodes() []corev1.Node {
	ginkgo.GinkgoHelper()
	nodes := &corev1.NodeList{}
	gomega.Expect(f.Client.List(f.Ctx, nodes)).To(gomega.Succeed())
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return nodes.Items
}

// NodeReady says whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeZone is the node's topology.kubernetes.io/zone label.
func NodeZone(n *corev1.Node) string { return n.Labels[corev1.LabelTopologyZone] }

// WaitNodeReady waits until the named node's Ready condition is True (ready) or not True (!ready).
func (f *Framework) WaitNodeReady(name string, ready bool, timeout time.Duration) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		n := &corev1.Node{}
		g.Expect(f.Client.Get(f.Ctx, client.ObjectKey{Name: name}, n)).To(gomega.Succeed())
		g.Expect(NodeReady(n)).To(gomega.Equal(ready), fmt.Sprintf("node %s Ready", name))
	}).WithTimeout(timeout).WithPolling(f.poll()).Should(gomega.Succeed())
}
