package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// LabelClient marks a pod allowed to reach a cluster's client port when its NetworkPolicy is on; the value
// is the cluster's name.
const LabelClient = "etcd.seedops.io/client"

// operatorPodLabels select the operator's own pods (the manager Deployment's template labels).
var operatorPodLabels = map[string]string{"app.kubernetes.io/name": "etcd-operator", "control-plane": "controller-manager"}

// NetworkPolicyName is the name of a cluster's NetworkPolicy.
func NetworkPolicyName(c *etcdv1beta1.EtcdCluster) string { return c.Name }

// NetworkPolicy admits to the members only: peers (peer and client ports), the operator, the cluster's
// backup pods and pods labelled etcd.seedops.io/client=<cluster> in the namespace (client port, and the
// port of the HTTP endpoints when they are split off it), and anyone on the metrics port (health and
// metrics only; the kubelet's probes use it).
func NetworkPolicy(c *etcdv1beta1.EtcdCluster, o Options) *networkingv1ac.NetworkPolicyApplyConfiguration {
	port := func(p int32) *networkingv1ac.NetworkPolicyPortApplyConfiguration {
		return networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(p))
	}
	pods := func(labels map[string]string) *networkingv1ac.NetworkPolicyPeerApplyConfiguration {
		return networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(labels))
	}
	operator := networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(operatorPodLabels))
	if o.OperatorNamespace != "" {
		operator.WithNamespaceSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: o.OperatorNamespace}))
	} else {
		operator.WithNamespaceSelector(metav1ac.LabelSelector()) // any namespace: where the operator runs is unknown
	}
	// Whoever may reach the client port may reach etcd's HTTP endpoints of the client side where they are.
	clientPorts := []*networkingv1ac.NetworkPolicyPortApplyConfiguration{port(ClientPort)}
	if SplitsClientHTTP(c) {
		clientPorts = append(clientPorts, port(ClientHTTPPort))
	}
	backup := map[string]string{LabelName: AppName, LabelInstance: c.Name, LabelComponent: ComponentBackup}
	agent := map[string]string{LabelName: AppName, LabelInstance: c.Name, LabelComponent: ComponentContinuousBackup}
	return networkingv1ac.NetworkPolicy(NetworkPolicyName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(
				networkingv1ac.NetworkPolicyIngressRule().WithFrom(pods(SelectorLabels(c))).WithPorts(port(PeerPort)).WithPorts(clientPorts...),
				networkingv1ac.NetworkPolicyIngressRule().
					WithFrom(operator, pods(backup), pods(agent), pods(map[string]string{LabelClient: c.Name})).
					WithPorts(clientPorts...),
				networkingv1ac.NetworkPolicyIngressRule().WithPorts(port(MetricsPort)),
			))
}

// SnapshotServerNetworkPolicy admits to the snapshot server only the cluster's member pods, on its port,
// and lets it open no connection: it serves a whole snapshot of the cluster, secrets included. It exists
// with the server whatever spec.networkPolicy says. The kubelet's readiness probe comes from the node,
// which NetworkPolicy always admits.
func SnapshotServerNetworkPolicy(c *etcdv1beta1.EtcdCluster) *networkingv1ac.NetworkPolicyApplyConfiguration {
	return networkingv1ac.NetworkPolicy(SnapshotServerName(c), c.Namespace).
		WithLabels(Labels(c, ComponentSnapshotServer)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(Labels(c, ComponentSnapshotServer))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c)))).
				WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(SnapshotServerPort)))))
}
