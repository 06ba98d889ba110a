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

// ClientService load-balances clients over ready members. With the HTTP endpoints split off the client
// port, it also carries their port, so the JSON gateway and /health stay reachable through the Service.
func ClientService(c *etcdv1beta1.EtcdCluster) *corev1ac.ServiceApplyConfiguration {
	spec := corev1ac.ServiceSpec().
		WithType(corev1.ServiceTypeClusterIP).
		WithSelector(SelectorLabels(c)).
		WithPorts(servicePort("client", ClientPort))
	if SplitsClientHTTP(c) {
		// A numeric target: a named one needs a container port of that name, and adding one to the pod
		// template would restart every member of an existing cluster when the operator is upgraded.
		// Members that have not restarted since do not listen on it yet and refuse its connections.
		spec.WithPorts(corev1ac.ServicePort().
			WithName(ClientHTTPPortName).
			WithPort(ClientHTTPPort).
			WithTargetPort(intstr.FromInt32(ClientHTTPPort)).
			WithProtocol(corev1.ProtocolTCP))
	}
	return corev1ac.Service(ClientServiceName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(spec)
}

// ClientHTTPPortName names ClientHTTPPort in the client Service.
const ClientHTTPPortName = "client-http"

func servicePort(name string, port int32) *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().
		WithName(name).
		WithPort(port).
		WithTargetPort(intstr.FromString(name)).
		WithProtocol(corev1.ProtocolTCP)
}
