package framework

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
)

// TLSOn reports whether the cluster serves TLS, once the operator has recorded its choice in the spec.
func (f *Framework) TLSOn(c *etcdv1beta1.EtcdCluster) bool {
	var on bool
	gomega.EventuallyWithOffset(2, func(g gomega.Gomega) {
		fresh := &etcdv1beta1.EtcdCluster{}
		g.Expect(f.Client.Get(f.Ctx, client.ObjectKeyFromObject(c), fresh)).To(gomega.Succeed())
		g.Expect(fresh.Spec.TLS.Enabled).NotTo(gomega.BeNil(), "the operator has not recorded spec.tls.enabled yet")
		on = *fresh.Spec.TLS.Enabled
	}, 60*time.Second, time.Second).Should(gomega.Succeed())
	return on
}

// ClusterTLS authenticates as the cluster's client certificate (the Secret status.tls.clientSecretName
// names), verifying the server's certificate for serverName; nil for a cluster without TLS.
func (f *Framework) ClusterTLS(c *etcdv1beta1.EtcdCluster, serverName string) *tls.Config {
	if !f.TLSOn(c) {
		return nil
	}
	secret := &corev1.Secret{}
	gomega.EventuallyWithOffset(2, func() error {
		return f.Client.Get(f.Ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client-tls"}, secret)
	}, 60*time.Second, time.Second).Should(gomega.Succeed())
	cfg, err := etcd.ClientTLSConfig(secret.Data["ca.crt"], secret.Data["tls.crt"], secret.Data["tls.key"])
	gomega.ExpectWithOffset(2, err).NotTo(gomega.HaveOccurred())
	cfg.ServerName = serverName
	return cfg
}

// ClusterClient connects from the host to the cluster's client Service IP (cluster IPs and pod IPs are
// routable on the node), over TLS with the cluster's client certificate when it serves TLS.
func (f *Framework) ClusterClient(c *etcdv1beta1.EtcdCluster) *clientv3.Client {
	svc := &corev1.Service{}
	gomega.ExpectWithOffset(1, f.Client.Get(f.Ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client"}, svc)).To(gomega.Succeed())
	cli, err := f.EtcdClientVia(c, c.Name+"-client."+c.Namespace+".svc", svc.Spec.ClusterIP, 5*time.Second)
	gomega.ExpectWithOffset(1, err).NotTo(gomega.HaveOccurred())
	return cli
}

// EtcdClientVia connects to host (a name the server certificate carries) at ip: the etcd client verifies
// the certificate against the endpoint's host name, and the host cannot resolve cluster DNS names, so the
// connection is dialled to the IP while TLS checks the name.
func (f *Framework) EtcdClientVia(c *etcdv1beta1.EtcdCluster, host, ip string, timeout time.Duration) (*clientv3.Client, error) {
	if f.TLSOn(c) {
		return EtcdClientTLS(host, ip, f.ClusterTLS(c, host), timeout)
	}
	return clientv3.New(ClientConfig([]string{"http://" + ip + ":2379"}, timeout))
}

// EtcdClientTLS connects to https://host:2379, dialled at ip, with the given TLS configuration.
func EtcdClientTLS(host, ip string, tlsConfig *tls.Config, timeout time.Duration) (*clientv3.Client, error) {
	cfg := ClientConfig([]string{"https://" + host + ":2379"}, timeout)
	cfg.TLS = tlsConfig
	cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "2379"))
	})}
	return clientv3.New(cfg)
}

// ClientConfig is a client as etcd recommends running one: with gRPC keepalive, so a connection to a member
// cut off from the network is found dead and dialled again (through the Service: to a member that
// answers) instead of timing out every request until TCP's retransmission back-off gives up. 6 s: etcd
// refuses pings more frequent than its --grpc-keepalive-min-time (5 s).
func ClientConfig(endpoints []string, timeout time.Duration) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: timeout, Logger: zap.NewNop(),
		DialKeepAliveTime: 6 * time.Second, DialKeepAliveTimeout: 3 * time.Second, PermitWithoutStream: true}
}
