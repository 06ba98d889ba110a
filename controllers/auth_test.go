package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// authCluster is a TLS cluster with authentication on; rootSecret names the user's password Secret ("" for
// the operator's own).
func authCluster(rootSecret string) *etcdv1beta1.EtcdCluster {
	return &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Replicas: 3, TLS: etcdv1beta1.TLSSpec{Enabled: ptr.To(true)},
			Auth: etcdv1beta1.AuthSpec{Enabled: true, RootPasswordSecretName: rootSecret}}}
}

func passwordSecret(name string, labels map[string]string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels}, Data: data}
}

// authReconciler reads cached Secrets through cached and the API server through live (the operator's
// cache holds only Secrets with its label).
func authReconciler(t *testing.T, cached, live []client.Object) (*EtcdClusterReconciler, client.Client) {
	t.Helper()
	scheme := testScheme(t)
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached...).Build()
	apiReader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live...).Build()
	return &EtcdClusterReconciler{Client: cl, APIReader: apiReader, Recorder: &events.FakeRecorder{}}, cl
}

// wantWait fails unless err is a waitError retried after authRetry whose message holds every part.
func wantWait(t *testing.T, err error, parts ...string) {
	t.Helper()
	var wait waitError
	if !errors.As(err, &wait) || wait.after != authRetry {
		t.Fatalf("error %v; want one retried after %s", err, authRetry)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

func TestPasswordIn(t *testing.T) {
	got, err := passwordIn(passwordSecret("s", nil, map[string][]byte{rootPasswordKey: []byte("hunter2")}))
	if err != nil || got != "hunter2" {
		t.Fatalf("passwordIn: %q, %v", got, err)
	}
	for name, data := range map[string]map[string][]byte{
		"no key":    {"other": []byte("x")},
		"empty key": {rootPasswordKey: nil},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := passwordIn(passwordSecret("s", nil, data))
			wantWait(t, err, "Secret s", `"`+rootPasswordKey+`"`)
		})
	}
}

// The operator dials every member pod, in the same order whatever the map's.
func TestSortedClientURLs(t *testing.T) {
	obs := observation{clientURLs: map[int]string{2: "https://c-2:2379", 0: "https://c-0:2379", 1: "https://c-1:2379"}}
	want := []string{"https://c-0:2379", "https://c-1:2379", "https://c-2:2379"}
	for range 5 {
		if got := sortedClientURLs(obs); !slices.Equal(got, want) {
			t.Fatalf("sortedClientURLs: %v, want %v", got, want)
		}
	}
}

func TestRootPassword(t *testing.T) {
	ctx := context.Background()
	managed := map[string]string{resources.LabelManagedBy: resources.ManagedBy}

	t.Run("the operator's Secret is created once, with a random password", func(t *testing.T) {
		c := authCluster("")
		r, cl := authReconciler(t, nil, nil)
		first, err := r.rootPassword(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) < 32 {
			t.Errorf("password of %d characters; want a long random one", len(first))
		}
		s := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "c-root-password"}, s); err != nil {
			t.Fatal(err)
		}
		if string(s.Data[rootPasswordKey]) != first {
			t.Errorf("the Secret holds another password than the one returned")
		}
		if s.Labels[resources.LabelManagedBy] != resources.ManagedBy || s.Labels[resources.LabelComponent] != resources.ComponentAuth {
			t.Errorf("labels %v: the operator's cache must see it", s.Labels)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != c.UID {
			t.Errorf("owner references %v: it goes with the cluster", s.OwnerReferences)
		}
		if again, err := r.rootPassword(ctx, c); err != nil || again != first {
			t.Errorf("second read: %v; the password must not change", err)
		}
	})

	t.Run("the operator's Secret the cache has not seen yet is used, not replaced", func(t *testing.T) {
		c := authCluster("")
		live := passwordSecret("c-root-password", managed, map[string][]byte{rootPasswordKey: []byte("kept")})
		r, cl := authReconciler(t, nil, []client.Object{live})
		if got, err := r.rootPassword(ctx, c); err != nil || got != "kept" {
			t.Fatalf("rootPassword: %q, %v; want the API server's", got, err)
		}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(live), &corev1.Secret{}); err == nil {
			t.Error("a new Secret was written over the existing one")
		}
	})

	t.Run("the user's Secret is read from the API server", func(t *testing.T) {
		c := authCluster("mine")
		r, _ := authReconciler(t, nil, []client.Object{passwordSecret("mine", nil, map[string][]byte{rootPasswordKey: []byte("users")})})
		if got, err := r.rootPassword(ctx, c); err != nil || got != "users" {
			t.Fatalf("rootPassword: %q, %v", got, err)
		}
	})

	t.Run("a missing user's Secret is waited for, never created", func(t *testing.T) {
		c := authCluster("mine")
		r, cl := authReconciler(t, nil, nil)
		_, err := r.rootPassword(ctx, c)
		wantWait(t, err, "mine", "spec.auth.rootPasswordSecretName")
		if err := cl.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "mine"}, &corev1.Secret{}); err == nil {
			t.Error("the operator created the user's Secret")
		}
	})

	t.Run("a user's Secret without the password key is waited for", func(t *testing.T) {
		c := authCluster("mine")
		r, _ := authReconciler(t, nil, []client.Object{passwordSecret("mine", nil, map[string][]byte{"pass": []byte("x")})})
		_, err := r.rootPassword(ctx, c)
		wantWait(t, err, "Secret mine", `"`+rootPasswordKey+`"`)
	})
}
