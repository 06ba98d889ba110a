package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// PeerService is the headless Service that gives each member a stable DNS name. It publishes members
// that are not ready yet, because a bootstrapping member must reach its peers before it can be ready.
func PeerService(c *etcdv1beta1.EtcdCluster) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(PeerServiceName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithPublishNotReadyAddresses(true).
			WithSelector(SelectorLabels(c)).
			WithPorts(
				servicePort("client", ClientPort),
				servicePort("peer", PeerPort),
			))
}

// ClientService load-balances clients over ready members.
func ClientService(c *etcdv1beta1.EtcdCluster) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(ClientServiceName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(SelectorLabels(c)).
			WithPorts(servicePort("client", ClientPort)))
}

func servicePort(name string, port int32) *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().
		WithName(name).
		WithPort(port).
		WithTargetPort(intstr.FromString(name)).
		WithProtocol(corev1.ProtocolTCP)
}
