package controllers

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
)

// caIssuer creates a cert-manager CA Issuer of its own CA Secret (both named name) in certManagerNS and waits
// until it is Ready.
func caIssuer(ctx context.Context, name string) (*pki.CA, []byte) {
	ca, keyPEM, err := pki.NewCA(name+" CA", 24*time.Hour, time.Now())
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: certManagerNS},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: keyPEM},
	})).To(Succeed())
	issuer := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ca": map[string]any{"secretName": name}}}}
	issuer.SetGroupVersionKind(resources.IssuerGVK(&etcdv1beta1.IssuerReference{Kind: "Issuer"}))
	issuer.SetNamespace(certManagerNS)
	issuer.SetName(name)
	Expect(k8sClient.Create(ctx, issuer)).To(Succeed())
	Eventually(func(g Gomega) string {
		g.Expect(get(ctx, issuer)).To(Succeed())
		status, _ := readyCondition(issuer)
		return status
	}, timeout, interval).Should(Equal("True"), "Issuer %s becomes Ready", name)
	return ca, keyPEM
}

// renewNow asks cert-manager to issue a Certificate again, as `cmctl renew` does (its Issuing condition).
func renewNow(ctx context.Context, ns, name string) {
	Eventually(func() error {
		cert := certificateObject(ns, name)
		if err := get(ctx, cert); err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
		conditions = append(conditions, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message": "renewal requested by the test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
		if err := unstructured.SetNestedSlice(cert.Object, conditions, "status", "conditions"); err != nil {
			return err
		}
		return k8sClient.Status().Update(ctx, cert)
	}, timeout, interval).Should(Succeed())
}

// caChangeLog follows, through watches, every version of a cluster's mounted Secrets and StatefulSet during a
// CA change from old to new, by resourceVersion (etcd's revision: one order over every object).
type caChangeLog struct {
	mu         sync.Mutex
	old, new   *pki.CA
	both       string            // the digest of the bundle of both CAs
	stsBoth    uint64            // the first StatefulSet version whose template loads both CAs
	stsDropped uint64            // the first one after it that loads one CA again
	bundleBoth map[string]uint64 // per Secret, the first version with both CAs in ca.crt
	leafNew    map[string]uint64 // per Secret, the first version with a certificate of the new CA
	bundleNew  map[string]uint64 // per Secret, the first version with the new CA alone in ca.crt
	violations []string
}

func (l *caChangeLog) secret(s *corev1.Secret) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rv, _ := strconv.ParseUint(s.ResourceVersion, 10, 64)
	cas, err := resources.ParseCAs(s.Data[resources.CAKey])
	if err != nil {
		l.violations = append(l.violations, fmt.Sprintf("%s@%d: ca.crt: %v", s.Name, rv, err))
		return
	}
	cert, err := pki.ParseCertificate(s.Data[corev1.TLSCertKey])
	if err != nil {
		l.violations = append(l.violations, fmt.Sprintf("%s@%d: tls.crt: %v", s.Name, rv, err))
		return
	}
	if cas.Signer(cert) == nil {
		l.violations = append(l.violations, fmt.Sprintf("%s@%d: its certificate's CA is not in its ca.crt", s.Name, rv))
	}
	first := func(m map[string]uint64) {
		if m[s.Name] == 0 {
			m[s.Name] = rv
		}
	}
	if cas.Equal(resources.CASet{l.old.Cert, l.new.Cert}) {
		first(l.bundleBoth)
	}
	if cas.Equal(resources.CASet{l.new.Cert}) {
		first(l.bundleNew)
	}
	if (resources.CASet{l.new.Cert}).Signer(cert) != nil {
		first(l.leafNew)
	}
}

func (l *caChangeLog) statefulSet(sts *appsv1.StatefulSet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rv, _ := strconv.ParseUint(sts.ResourceVersion, 10, 64)
	switch digest := sts.Spec.Template.Annotations[resources.AnnotationTrustBundle]; {
	case digest == l.both && l.stsBoth == 0:
		l.stsBoth = rv
	case digest == "" && l.stsBoth != 0 && l.stsDropped == 0:
		l.stsDropped = rv
	}
}

// follow watches the cluster's mounted Secrets and StatefulSet until ctx ends.
func (l *caChangeLog) follow(ctx context.Context, c *etcdv1beta1.EtcdCluster) {
	w, err := client.NewWithWatch(testEnv.Config, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	mounted := map[string]bool{}
	for _, leaf := range issuedLeaves(c) {
		mounted[leaf.SecretName] = true
	}
	secrets, err := w.Watch(ctx, &corev1.SecretList{}, client.InNamespace(c.Namespace))
	Expect(err).NotTo(HaveOccurred())
	sets, err := w.Watch(ctx, &appsv1.StatefulSetList{}, client.InNamespace(c.Namespace))
	Expect(err).NotTo(HaveOccurred())
	run := func(ch <-chan watch.Event, on func(client.Object)) {
		for ev := range ch {
			if o, ok := ev.Object.(client.Object); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				on(o)
			}
		}
	}
	go run(secrets.ResultChan(), func(o client.Object) {
		if s, ok := o.(*corev1.Secret); ok && mounted[s.Name] {
			l.secret(s)
		}
	})
	go run(sets.ResultChan(), func(o client.Object) {
		if sts, ok := o.(*appsv1.StatefulSet); ok && sts.Name == resources.StatefulSetName(c) {
			l.statefulSet(sts)
		}
	})
	go func() {
		<-ctx.Done()
		secrets.Stop()
		sets.Stop()
	}()
}

// check says what of the change's order the versions seen break.
func (l *caChangeLog) check(c *etcdv1beta1.EtcdCluster) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string{}, l.violations...)
	if l.stsBoth == 0 || l.stsDropped == 0 {
		return append(out, fmt.Sprintf("the member template never loaded both CAs and then one again (%d, %d)", l.stsBoth, l.stsDropped))
	}
	var lastLeaf, lastDrop uint64
	for _, leaf := range issuedLeaves(c) {
		both, leafNew, dropped := l.bundleBoth[leaf.SecretName], l.leafNew[leaf.SecretName], l.bundleNew[leaf.SecretName]
		switch {
		case both == 0 || leafNew == 0 || dropped == 0:
			out = append(out, fmt.Sprintf("%s: bundle of both CAs at %d, new certificate at %d, new CA alone at %d: a step is missing",
				leaf.SecretName, both, leafNew, dropped))
		case both >= l.stsBoth || l.stsBoth >= leafNew:
			out = append(out, fmt.Sprintf("%s: bundle at %d, member template with it at %d, certificate of the new CA at %d: out of order",
				leaf.SecretName, both, l.stsBoth, leafNew))
		}
		lastLeaf, lastDrop = max(lastLeaf, leafNew), max(lastDrop, dropped)
	}
	for _, leaf := range issuedLeaves(c) {
		if d := l.bundleNew[leaf.SecretName]; d != 0 && d < lastLeaf {
			out = append(out, fmt.Sprintf("%s: the old CA left its bundle at %d, before the last certificate of the new CA (%d)", leaf.SecretName, d, lastLeaf))
		}
	}
	if l.stsDropped < lastDrop {
		out = append(out, fmt.Sprintf("the member template dropped the bundle at %d, before the Secrets did (%d)", l.stsDropped, lastDrop))
	}
	return out
}
