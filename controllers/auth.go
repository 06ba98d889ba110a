package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// rootPasswordKey is the key of the root password in its Secret.
const rootPasswordKey = "password"

// authRetry is how often a missing or incomplete password Secret (not watched) is looked for again.
const authRetry = 15 * time.Second

func rootPasswordSecretName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.Auth.RootPasswordSecretName != "" {
		return c.Spec.Auth.RootPasswordSecretName
	}
	return c.Name + "-root-password"
}

// reconcileAuth turns etcd authentication on or off as the spec says. It acts only on a reachable cluster
// with no membership step in flight (one change to etcd at a time), and never logs the password. With
// TLS, the operator's client certificate (common name root) keeps working once authentication is on.
func (r *EtcdClusterReconciler) reconcileAuth(ctx context.Context, s *reconcileScope) error {
	c, d, obs := s.cluster, s.decision, s.obs
	want := c.Spec.Auth.Enabled
	var password string
	if want {
		// Every reconcile that wants authentication reads the password (creating its Secret if need be),
		// not only the one that turns it on.
		var err error
		if password, err = r.rootPassword(ctx, c); err != nil {
			return err
		}
	}
	if obs.authEnabled == nil || *obs.authEnabled == want || !obs.reachable || d.InProgress() {
		return nil
	}
	cli, err := r.dial(ctx, c, &obs, sortedClientURLs(obs))
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	if want {
		if err := cli.EnableAuth(ctx, password); err != nil {
			return err
		}
		logf.FromContext(ctx).Info("enabled etcd authentication")
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonAuthEnabled, "EnableAuth",
			"etcd authentication enabled; root's password is in Secret %s", rootPasswordSecretName(c))
		return nil
	}
	if err := cli.DisableAuth(ctx); err != nil {
		return err
	}
	logf.FromContext(ctx).Info("disabled etcd authentication")
	r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, ReasonAuthDisabled, "DisableAuth", "etcd authentication disabled (users and roles kept)")
	return nil
}

// rootPassword reads the root password from the user's Secret, or from the operator's own Secret, which
// it creates with a random password the first time.
func (r *EtcdClusterReconciler) rootPassword(ctx context.Context, c *etcdv1beta1.EtcdCluster) (string, error) {
	name := rootPasswordSecretName(c)
	var reader client.Reader = r.Client
	if c.Spec.Auth.RootPasswordSecretName != "" {
		reader = r.liveReader() // not the operator's: not in its label-filtered cache
	}
	secret := &corev1.Secret{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, secret)
	switch {
	case err == nil:
		return passwordIn(secret)
	case !apierrors.IsNotFound(err):
		return "", err
	case c.Spec.Auth.RootPasswordSecretName != "":
		return "", waitError{fmt.Errorf("root password Secret %s named by spec.auth.rootPasswordSecretName not found", name), authRetry}
	}
	// Not in the cache, which holds only labelled Secrets: create it only if the API server has none either.
	existing, err := r.liveSecret(ctx, c, name, "root's etcd password", "leave it no longer matching the password etcd has for root")
	if err != nil {
		return "", err
	}
	if existing != nil { // the cache is behind
		return passwordIn(existing)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	password := base64.RawURLEncoding.EncodeToString(buf)
	ac := corev1ac.Secret(name, c.Namespace).
		WithLabels(resources.Labels(c, resources.ComponentAuth)).
		WithOwnerReferences(resources.OwnerReference(c)).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{rootPasswordKey: []byte(password)})
	if err := r.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("create root password Secret %s: %w", name, err)
	}
	return password, nil
}

// passwordIn reads the root password from its Secret.
func passwordIn(secret *corev1.Secret) (string, error) {
	if p := secret.Data[rootPasswordKey]; len(p) > 0 {
		return string(p), nil
	}
	return "", waitError{fmt.Errorf("the Secret %s has no %q key for the root password", secret.Name, rootPasswordKey), authRetry}
}

// sortedClientURLs are the member pods' client URLs in a stable order.
func sortedClientURLs(obs observation) []string {
	return slices.Sorted(maps.Values(obs.clientURLs))
}
