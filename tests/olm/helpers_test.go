//go:build olm

package olm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// The label the operator puts on everything it manages (its cache selects on it); the bundle's own objects say
// managed-by kustomize.
const managedBy, managedByOperator = "app.kubernetes.io/managed-by", "etcd-operator"

// newNamespace creates a namespace and deletes it (with everything in it) when the spec or container ends.
// restricted: enforce the restricted Pod Security Standard (etcd pods and the operator pass it; operator-sdk's
// registry pod does not set a security context on its init container, so its namespace cannot enforce it).
func newNamespace(prefix string, restricted bool) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "olm-" + prefix + "-"}}
	if restricted {
		ns.Labels = map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		}
	}
	ExpectWithOffset(1, k8s.Create(ctx, ns)).To(Succeed())
	// Wait until it is gone: an operator watching all namespaces in a later spec would otherwise reconcile (and log
	// about) this spec's clusters while their namespace terminates.
	DeferCleanup(func() {
		bg := context.Background()
		Expect(client.IgnoreNotFound(k8s.Delete(bg, ns))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(bg, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
		}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(BeTrue(), "namespace %s still terminating", ns.Name)
	})
	return ns.Name
}

// install creates an OperatorGroup (targets; nil means AllNamespaces) and a Subscription to the stable channel of
// our CatalogSource in ns. startingCSV and manual approval are used by the upgrade scenario. Uninstalls on cleanup:
// the Subscription and every CSV in ns (OLM garbage-collects the deployment and RBAC it made for them).
func install(ns string, targets []string, startingCSV string, approval operatorsv1alpha1.Approval) *operatorsv1alpha1.Subscription {
	og := &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-operator"},
		Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: targets},
	}
	ExpectWithOffset(1, k8s.Create(ctx, og)).To(Succeed())
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: packageName},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource:          catalogSource,
			CatalogSourceNamespace: olmNamespace,
			Package:                packageName,
			Channel:                "stable",
			StartingCSV:            startingCSV,
			InstallPlanApproval:    approval,
		},
	}
	ExpectWithOffset(1, k8s.Create(ctx, sub)).To(Succeed())
	DeferCleanup(uninstall, ns)
	return sub
}

// uninstall removes what install made, and waits until the operator's deployment is gone, so the next spec never
// sees two operators.
func uninstall(ns string) {
	bg := context.Background()
	Expect(client.IgnoreNotFound(k8s.DeleteAllOf(bg, &operatorsv1alpha1.Subscription{}, client.InNamespace(ns)))).To(Succeed())
	Expect(client.IgnoreNotFound(k8s.DeleteAllOf(bg, &operatorsv1alpha1.ClusterServiceVersion{}, client.InNamespace(ns)))).To(Succeed())
	Expect(client.IgnoreNotFound(k8s.DeleteAllOf(bg, &operatorsv1.OperatorGroup{}, client.InNamespace(ns)))).To(Succeed())
	Eventually(func(g Gomega) {
		d := &appsv1.DeploymentList{}
		g.Expect(k8s.List(bg, d, client.InNamespace(ns))).To(Succeed())
		g.Expect(d.Items).To(BeEmpty())
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// waitCSV waits until the CSV in ns succeeds and returns it.
func waitCSV(ns, name string, timeout time.Duration) *operatorsv1alpha1.ClusterServiceVersion {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, csv)).To(Succeed())
		g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "%s: %s", csv.Status.Reason, csv.Status.Message)
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	report("CSV "+name+" Succeeded", time.Since(start))
	return csv
}

// operatorPod waits for the operator's deployment in ns to run image, and returns its pod.
func operatorPod(ns, img string, timeout time.Duration) corev1.Pod {
	var pod corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: operatorDeployment}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(img))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old pods still terminating")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == img {
				running = append(running, p)
			}
		}
		g.Expect(running).To(HaveLen(1))
		pod = running[0]
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return pod
}

// newCluster is a small EtcdCluster from the node's registry.
func newCluster(ns, name string, replicas int32) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdClusterSpec{
			Version:        etcdVersion,
			Replicas:       replicas,
			StorageSize:    resource.MustParse("1Gi"),
			BackupSchedule: "0 2 * * *",
			Repository:     etcdRepository,
		},
	}
	ExpectWithOffset(1, k8s.Create(ctx, c)).To(Succeed())
	return c
}

// waitAvailable waits for the Available condition with every member ready.
func waitAvailable(c *etcdv1alpha1.EtcdCluster, timeout time.Duration) {
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		cur := &etcdv1alpha1.EtcdCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, "Available")).To(BeTrue(), "conditions: %v", cur.Status.Conditions)
		g.Expect(cur.Status.ReadyReplicas).To(Equal(cur.Spec.Replicas))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	report(fmt.Sprintf("EtcdCluster %s/%s Available", c.Namespace, c.Name), time.Since(start))
}

// managedObjects lists what the operator would have made in ns (anything labelled as managed by it).
func managedObjects(g Gomega, ns string) []string {
	var names []string
	sel := client.MatchingLabels{managedBy: managedByOperator}
	lists := map[string]client.ObjectList{
		"statefulset": &appsv1.StatefulSetList{}, "service": &corev1.ServiceList{}, "configmap": &corev1.ConfigMapList{},
		"pdb": &policyv1.PodDisruptionBudgetList{}, "cronjob": &batchv1.CronJobList{},
		"pvc": &corev1.PersistentVolumeClaimList{}, "pod": &corev1.PodList{},
	}
	for kind, l := range lists {
		g.Expect(k8s.List(ctx, l, client.InNamespace(ns), sel)).To(Succeed())
		items, err := meta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range items {
			names = append(names, kind+"/"+o.(client.Object).GetName())
		}
	}
	sort.Strings(names)
	return names
}

// expectIgnored checks, for a while, that the operator leaves EtcdClusters in namespaces it does not watch alone:
// no status, no objects, no warning events about them.
func expectIgnored(clusters []*etcdv1alpha1.EtcdCluster, d time.Duration) {
	ConsistentlyWithOffset(1, func(g Gomega) {
		for _, c := range clusters {
			expectClusterIgnored(g, c)
		}
	}).WithTimeout(d).WithPolling(time.Second).Should(Succeed())
}

func expectClusterIgnored(g Gomega, c *etcdv1alpha1.EtcdCluster) {
	{
		cur := &etcdv1alpha1.EtcdCluster{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)).To(Succeed())
		g.Expect(cur.Status.Conditions).To(BeEmpty())
		g.Expect(cur.Status.Phase).To(BeEmpty())
		g.Expect(cur.Status.ObservedGeneration).To(BeZero())
		g.Expect(cur.Finalizers).To(BeEmpty())
		g.Expect(managedObjects(g, c.Namespace)).To(BeEmpty())
		ev := &corev1.EventList{}
		g.Expect(k8s.List(ctx, ev, client.InNamespace(c.Namespace))).To(Succeed())
		// Events about the cluster or anything the operator would make for it (the operator's own pod may live in
		// the namespace too: its probe warnings at start are not about the cluster).
		for _, e := range ev.Items {
			if e.InvolvedObject.Kind == "EtcdCluster" || strings.HasPrefix(e.InvolvedObject.Name, c.Name) {
				g.Expect(e.Type).NotTo(Equal(corev1.EventTypeWarning), "event %s: %s", e.Reason, e.Message)
			}
		}
	}
}

// expectNoOperatorErrors checks the operator pod's log for error lines and its container for restarts.
func expectNoOperatorErrors(pod corev1.Pod) {
	p := &corev1.Pod{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKeyFromObject(&pod), p)).To(Succeed())
	for _, st := range p.Status.ContainerStatuses {
		ExpectWithOffset(1, st.RestartCount).To(BeZero(), "container %s restarted", st.Name)
	}
	raw, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "manager"}).DoRaw(ctx)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var errs []string
	for _, line := range strings.Split(string(raw), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, `"level":"error"`) || strings.Contains(line, "\tERROR\t") || strings.Contains(l, "forbidden") {
			errs = append(errs, line)
		}
	}
	ExpectWithOffset(1, errs).To(BeEmpty(), "the operator logged errors")
}

// canI asks the API server whether the operator's service account (in operatorNS) may verb resource in ns.
func canI(operatorNS, verb, group, resource, ns string) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   fmt.Sprintf("system:serviceaccount:%s:%s", operatorNS, operatorDeployment),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource,
		},
	}}
	ExpectWithOffset(1, k8s.Create(ctx, sar)).To(Succeed())
	return sar.Status.Allowed
}

// expectRBACScope checks that the operator may manage its objects exactly in the watched namespaces (all
// namespaces when watched is nil) and nowhere else among others.
func expectRBACScope(operatorNS string, watched, others []string) {
	checks := []struct{ verb, group, resource string }{
		{"list", "etcd.seedops.io", "etcdclusters"},
		{"create", "apps", "statefulsets"},
		{"delete", "", "pods"},
	}
	for _, c := range checks {
		for _, ns := range watched {
			ExpectWithOffset(1, canI(operatorNS, c.verb, c.group, c.resource, ns)).To(BeTrue(), "%s %s.%s in %s", c.verb, c.resource, c.group, ns)
		}
		for _, ns := range others {
			ExpectWithOffset(1, canI(operatorNS, c.verb, c.group, c.resource, ns)).To(BeFalse(), "%s %s.%s in %s", c.verb, c.resource, c.group, ns)
		}
	}
}

// run runs a command and returns its combined output.
func run(name string, env []string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var out bytes.Buffer
	// Shown live with -ginkgo.v, kept for the error message.
	cmd.Stdout = io.MultiWriter(&out, GinkgoWriter)
	cmd.Stderr = cmd.Stdout
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), err
}

func report(name string, d time.Duration) {
	AddReportEntry(name, d.Round(100*time.Millisecond).String())
}

// clientEndpoint is the client Service's cluster IP URL (routable from the host on the local node).
func clientEndpoint(c *etcdv1alpha1.EtcdCluster) string {
	svc := &corev1.Service{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client"}, svc)).To(Succeed())
	return fmt.Sprintf("http://%s:2379", svc.Spec.ClusterIP)
}

func newEtcdClient(endpoints ...string) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return cli
}

// writer writes keys continuously and remembers which writes etcd acknowledged.
type writer struct {
	cli    *clientv3.Client
	prefix string
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
}

func startWriter(c *etcdv1alpha1.EtcdCluster, prefix string) *writer {
	w := &writer{cli: newEtcdClient(clientEndpoint(c)), prefix: prefix, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s/%08d", w.prefix, i)
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := w.cli.Put(wctx, key, "v"+key)
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
			} else {
				w.failed++
			}
			w.mu.Unlock()
			// Pace the writer (it shares 2 cores with the node); back off after a failure.
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	return w
}

func (w *writer) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitProgress waits until n more writes have been acknowledged.
func (w *writer) waitProgress(n int, timeout time.Duration) {
	target := w.ackedCount() + n
	EventuallyWithOffset(1, w.ackedCount).WithTimeout(timeout).WithPolling(200*time.Millisecond).
		Should(BeNumerically(">=", target), "the writer makes no progress")
}

// stopAndVerify stops the writer and checks that every acknowledged key is readable with its value.
func (w *writer) stopAndVerify(c *etcdv1alpha1.EtcdCluster) {
	close(w.stop)
	<-w.done
	defer func() { _ = w.cli.Close() }()
	w.mu.Lock()
	acked, failed := slices.Clone(w.acked), w.failed
	w.mu.Unlock()
	AddReportEntry("writer "+w.prefix, fmt.Sprintf("%d writes acknowledged, %d failed", len(acked), failed))
	ExpectWithOffset(1, len(acked)).To(BeNumerically(">", 20), "too few acknowledged writes to prove anything")
	cli := newEtcdClient(clientEndpoint(c))
	defer func() { _ = cli.Close() }()
	got := map[string]string{}
	EventuallyWithOffset(1, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, w.prefix+"/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return nil
	}).WithTimeout(time.Minute).Should(Succeed())
	var lost []string
	for _, k := range acked {
		if got[k] != "v"+k {
			lost = append(lost, k)
		}
	}
	ExpectWithOffset(1, lost).To(BeEmpty(), "%d of %d acknowledged writes are lost", len(lost), len(acked))
}

// expectGone waits until the object ns/name of obj's type no longer exists.
func expectGone(obj client.Object, ns, name string, timeout time.Duration) {
	EventuallyWithOffset(1, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeTrue(), "%T %s/%s still exists", obj, ns, name)
}

// metaItems returns the objects of a list.
func metaItems(l client.ObjectList) ([]client.Object, error) {
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, o := range items {
		out = append(out, o.(client.Object))
	}
	return out, nil
}
