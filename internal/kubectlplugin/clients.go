package kubectlplugin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// session is one command's connection: the REST config, a typed client for the operator's API and core
// objects, and the namespace the user chose (or the kubeconfig context's).
type session struct {
	config    *rest.Config
	client    client.WithWatch
	namespace string
}

func (k *kubeFlags) session() (*session, error) {
	cc := k.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := etcdv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &session{config: cfg, client: c, namespace: ns}, nil
}

// cluster reads an EtcdCluster, turning the API's errors into ones that say where it looked.
func (s *session) cluster(ctx context.Context, name string) (*etcdv1beta1.EtcdCluster, error) {
	c := &etcdv1beta1.EtcdCluster{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, c)
	return c, describeGetError(err, "EtcdCluster", name, s.namespace)
}

func describeGetError(err error, kind, name, namespace string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s %q not found in namespace %q (use -n to choose another namespace)", kind, name, namespace)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the %s API (%s) is not installed in this Kubernetes cluster: is etcd-operator installed?", kind, etcdv1beta1.GroupVersion)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read %s %q in namespace %q: %w", kind, name, namespace, err)
	}
	return fmt.Errorf("read %s %q in namespace %q: %w", kind, name, namespace, err)
}
