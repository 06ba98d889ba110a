package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// testScheme knows Kubernetes' built-in kinds and the operator's, for fake clients in unit tests.
func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}
