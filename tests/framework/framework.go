// Package framework holds the helpers the node suites share (tests/e2e, tests/olm, tests/helm,
// tests/bench/node): the suite's connection to the cluster, namespaces and EtcdCluster fixtures, waits, an
// etcd client that works from the host, a writer that proves no acknowledged write is lost, command runners
// and duration reports. It has no build tag, so every tagged suite can import it. Helpers that assert do so
// with Gomega's global assertions (offset to the caller), so they run inside Ginkgo specs; the rest return
// errors, for suites built on package testing.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// Framework is what a suite's helpers need from the suite: the API client and context its specs use, and
// the choices in which suites differ (namespace names, polling, how to reach etcd, the writer's pace).
// Zero values of the optional fields give the e2e suite's behaviour.
type Framework struct {
	Ctx    context.Context
	Client client.Client
	// KubectlPath is the kubectl binary Kubectl runs.
	KubectlPath string
	// EtcdRepository is the image repository of the clusters NewCluster builds (the node's registry).
	EtcdRepository string
	// NamespacePrefix starts the generated name of every namespace NewNamespace creates ("e2e-").
	NamespacePrefix string
	// NamespaceGoneTimeout, when set, makes a namespace's cleanup wait that long until it is gone: a later
	// spec whose operator watches all namespaces would otherwise see this spec's clusters terminate.
	NamespaceGoneTimeout time.Duration
	// Poll is how often waits check again (500 ms).
	Poll time.Duration
	// EtcdClient connects a Writer to a cluster (ClusterClient: through the client Service, TLS when the
	// cluster serves it).
	EtcdClient func(c *etcdv1beta1.EtcdCluster) *clientv3.Client
	// WritePause is the Writer's pause after each acknowledged write (10 ms); a longer one leaves the node's
	// CPUs to what the suite measures.
	WritePause time.Duration
}

func (f *Framework) poll() time.Duration {
	if f.Poll > 0 {
		return f.Poll
	}
	return 500 * time.Millisecond
}

// Env is the environment variable key, or def when it is unset or empty: suites take their settings
// from the Makefile that way and run with hack/node's defaults without it.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// EnvInt is the positive integer in the environment variable key, or def.
func EnvInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// RESTConfig loads a kubeconfig with client-side limits high enough that a suite's polling is not
// throttled (50 QPS, burst 100).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// NewClient is a client that knows core objects and the project's API, plus whatever extra adds (OLM's
// types, CRDs).
func NewClient(cfg *rest.Config, extra ...func(*runtime.Scheme) error) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, etcdv1beta1.AddToScheme, etcdv1alpha1.AddToScheme}, extra...) {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// FindKubectl is $KUBECTL (the Makefile's pinned kubectl), else kubectl on PATH.
func FindKubectl() (string, error) {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k, nil
	}
	return exec.LookPath("kubectl")
}

// NewNamespace creates a namespace that enforces the restricted Pod Security Standard (etcd pods and the
// operator must pass it), and deletes it (with everything in it) when the spec or container ends.
func (f *Framework) NewNamespace(prefix string) string {
	return f.newNamespace(prefix, restrictedNamespaceLabels())
}

// NewNamespaces is NewNamespace for each prefix, in order, with one cleanup that deletes them all at once and
// then waits for each: a spec with many namespaces does not wait for them one after the other.
func (f *Framework) NewNamespaces(prefixes ...string) []string {
	names := make([]string, len(prefixes))
	for i, prefix := range prefixes {
		names[i] = f.createNamespace(2, prefix, restrictedNamespaceLabels())
	}
	ginkgo.DeferCleanup(f.deleteNamespaces, names)
	return names
}

// restrictedNamespaceLabels enforce the restricted Pod Security Standard, as the operator's pods must pass it.
func restrictedNamespaceLabels() map[string]string {
	return map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		"pod-security.kubernetes.io/audit":           "restricted",
	}
}

// NewUnrestrictedNamespace is NewNamespace without a Pod Security Standard to enforce, for pods the project
// does not make (operator-sdk's registry pod sets no security context on its init container).
func (f *Framework) NewUnrestrictedNamespace(prefix string) string {
	return f.newNamespace(prefix, nil)
}

func (f *Framework) newNamespace(prefix string, labels map[string]string) string {
	name := f.createNamespace(3, prefix, labels)
	ginkgo.DeferCleanup(f.deleteNamespaces, []string{name})
	return name
}

// createNamespace creates a namespace named after prefix; a failure points offset frames up (the spec's line).
func (f *Framework) createNamespace(offset int, prefix string, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: f.NamespacePrefix + prefix + "-", Labels: labels}}
	gomega.ExpectWithOffset(offset, f.Client.Create(f.Ctx, ns)).To(gomega.Succeed())
	return ns.Name
}

// deleteNamespaces dumps the namespaces of a failed spec, deletes them all, then waits until each is gone (when
// NamespaceGoneTimeout is set).
func (f *Framework) deleteNamespaces(names []string) {
	if ginkgo.CurrentSpecReport().Failed() {
		for _, name := range names {
			f.DumpNamespace(name)
		}
	}
	bg := context.Background()
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		gomega.Expect(client.IgnoreNotFound(f.Client.Delete(bg, ns))).To(gomega.Succeed())
	}
	if f.NamespaceGoneTimeout <= 0 {
		return
	}
	for _, name := range names {
		gomega.Eventually(func() bool {
			return apierrors.IsNotFound(f.Client.Get(bg, client.ObjectKey{Name: name}, &corev1.Namespace{}))
		}).WithTimeout(f.NamespaceGoneTimeout).WithPolling(f.poll()).Should(gomega.BeTrue(), "namespace %s still terminating", name)
	}
}

// NewCluster is the README's four-field sample EtcdCluster (daily backups, 1Gi volumes) with images from
// EtcdRepository; it is not created, so a spec can change it first.
func (f *Framework) NewCluster(ns, name, version string, replicas int32) *etcdv1beta1.EtcdCluster {
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Version:        version,
			Replicas:       replicas,
			StorageSize:    resource.MustParse("1Gi"),
			BackupSchedule: "0 2 * * *",
			Repository:     f.EtcdRepository,
		},
	}
}

// GetCluster reads the cluster's current state.
func (f *Framework) GetCluster(c *etcdv1beta1.EtcdCluster) *etcdv1beta1.EtcdCluster {
	out := &etcdv1beta1.EtcdCluster{}
	gomega.ExpectWithOffset(1, f.Client.Get(f.Ctx, client.ObjectKeyFromObject(c), out)).To(gomega.Succeed())
	return out
}

// UpdateCluster applies change to the latest version of the cluster, retrying on conflicts with the
// operator's own writes.
func (f *Framework) UpdateCluster(c *etcdv1beta1.EtcdCluster, change func(*etcdv1beta1.EtcdCluster)) {
	gomega.EventuallyWithOffset(1, func() error {
		cur := &etcdv1beta1.EtcdCluster{}
		if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(c), cur); err != nil {
			return err
		}
		change(cur)
		return f.Client.Update(f.Ctx, cur)
	}).WithTimeout(30 * time.Second).Should(gomega.Succeed())
}

// WaitAvailable waits until the cluster reports its current generation Available and Running with every
// member ready, and returns how long that took.
func (f *Framework) WaitAvailable(c *etcdv1beta1.EtcdCluster, timeout time.Duration) time.Duration {
	start := time.Now()
	gomega.EventuallyWithOffset(1, func(g gomega.Gomega) {
		cur := &etcdv1beta1.EtcdCluster{}
		g.Expect(f.Client.Get(f.Ctx, client.ObjectKeyFromObject(c), cur)).To(gomega.Succeed())
		g.Expect(cur.Status.ObservedGeneration).To(gomega.Equal(cur.Generation))
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable)).To(gomega.BeTrue(),
			"conditions: %+v", cur.Status.Conditions)
		g.Expect(cur.Status.Phase).To(gomega.Equal(etcdv1beta1.PhaseRunning), "conditions: %+v", cur.Status.Conditions)
		g.Expect(cur.Status.ReadyReplicas).To(gomega.Equal(cur.Spec.Replicas))
	}).WithTimeout(timeout).WithPolling(f.poll()).Should(gomega.Succeed())
	return time.Since(start)
}

// MemberLabels select the member pods of the cluster named instance (the labels internal/resources puts
// on them).
func MemberLabels(instance string) client.MatchingLabels {
	return client.MatchingLabels{resources.LabelInstance: instance, resources.LabelComponent: resources.ComponentEtcd}
}

// MemberPods lists the cluster's member pods, sorted by name.
func (f *Framework) MemberPods(c *etcdv1beta1.EtcdCluster) []corev1.Pod {
	pods := &corev1.PodList{}
	gomega.ExpectWithOffset(1, f.Client.List(f.Ctx, pods, client.InNamespace(c.Namespace), MemberLabels(c.Name))).To(gomega.Succeed())
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items
}

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ExpectGone waits until obj (by its namespace and name) no longer exists.
func (f *Framework) ExpectGone(obj client.Object, timeout time.Duration) {
	gomega.EventuallyWithOffset(1, func() bool {
		return apierrors.IsNotFound(f.Client.Get(f.Ctx, client.ObjectKeyFromObject(obj), obj))
	}).WithTimeout(timeout).WithPolling(f.poll()).Should(gomega.BeTrue(), "%T %s/%s still exists", obj, obj.GetNamespace(), obj.GetName())
}

// RunTimeout bounds every command Run starts: a command that hangs (a kubectl waiting on a watch that never
// delivers) fails its spec instead of stalling the suite until its own timeout.
const RunTimeout = 5 * time.Minute

// Run runs a command, killed after RunTimeout, and returns its stdout and stderr; the error names the
// command and carries stderr.
func Run(name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), stderr.String(), err
}

// RunLogged runs a command with env added to the environment and returns its combined output, which it
// also shows live on GinkgoWriter (with -ginkgo.v): long installs show their progress as they go.
func RunLogged(name string, env []string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, ginkgo.GinkgoWriter)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), err
}

// Kubectl runs kubectl (KubectlPath) and returns its stdout; the error carries stderr.
func (f *Framework) Kubectl(args ...string) (string, error) {
	out, _, err := Run(f.KubectlPath, args...)
	return out, err
}

// ReportDuration records a measured duration in the suite's report and prints it (durations are what the node
// suites measure besides pass or fail).
func ReportDuration(name string, d time.Duration) {
	ginkgo.AddReportEntry(name, d.Round(100*time.Millisecond).String())
	ginkgo.GinkgoWriter.Printf("%s: %s\n", name, d.Round(100*time.Millisecond))
}
