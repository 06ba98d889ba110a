//go:build olm

package olm

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
	"github.com/seedops/etcd-operator/internal/kubectlplugin"
	"github.com/seedops/etcd-operator/tests/framework"
)

// The label the operator puts on everything it manages (its cache selects on it); the bundle's own objects say
// managed-by kustomize.
const managedBy, managedByOperator = "app.kubernetes.io/managed-by", "etcd-operator"

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
	framework.ReportDuration("CSV "+name+" Succeeded", time.Since(start))
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

// newCluster creates a small EtcdCluster of the suite's etcd version from the node's registry, through
// v1alpha1: the previous release serves no other version.
func newCluster(ns, name string, replicas int32) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{}
	sameFields(fw.NewCluster(ns, name, etcdVersion, replicas), c)
	c.APIVersion = etcdv1alpha1.GroupVersion.String()
	ExpectWithOffset(1, k8s.Create(ctx, c)).To(Succeed())
	return c
}

// sameFields copies one version's object into another's: the served versions have one schema, so the
// JSON of either is the other's.
func sameFields(from, to any) {
	b, err := json.Marshal(from)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	ExpectWithOffset(1, dec.Decode(to)).To(Succeed())
}

// current is c as the current API version's object (for the framework's writer, which needs only its name).
func current(c *etcdv1alpha1.EtcdCluster) *etcdv1beta1.EtcdCluster {
	out := &etcdv1beta1.EtcdCluster{}
	sameFields(c, out)
	return out
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
	framework.ReportDuration(fmt.Sprintf("EtcdCluster %s/%s Available", c.Namespace, c.Name), time.Since(start))
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

// removeBundleObjects deletes the bundle's cluster-scoped objects of the given kinds that exist on the node, and puts
// each back (from bundle/) when the container ends, as the other installs on the node expect them. A CRD goes only
// when no object of its kind exists anywhere, since deleting it deletes them all. Needed before OLM v1 installs
// (it never adopts objects it did not create) and before the previous release is installed: its CRDs do not serve
// the storage version of the current ones, and neither the API server nor OLM lets a CRD drop a version that
// status.storedVersions lists.
func removeBundleObjects(kinds ...string) {
	files, err := filepath.Glob("../../bundle/manifests/*.yaml")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, f := range files {
		data, err := os.ReadFile(f)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		obj := &unstructured.Unstructured{}
		ExpectWithOffset(1, yaml.Unmarshal(data, &obj.Object)).To(Succeed(), f)
		var cur client.Object
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			cur = &apiextensionsv1.CustomResourceDefinition{}
		case "ClusterRole":
			cur = &rbacv1.ClusterRole{}
		default:
			continue // namespaced (created in the install namespace) or the CSV
		}
		if !slices.Contains(kinds, obj.GetKind()) {
			continue
		}
		key := client.ObjectKey{Name: obj.GetName()}
		if err := k8s.Get(ctx, key, cur); err != nil {
			ExpectWithOffset(1, apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			continue
		}
		if crd, ok := cur.(*apiextensionsv1.CustomResourceDefinition); ok {
			// Objects of an earlier suite's namespaces may still be going with their namespace.
			EventuallyWithOffset(1, func(g Gomega) {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group,
					Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
				g.Expect(k8s.List(ctx, list)).To(Succeed())
				var left []string
				for _, o := range list.Items {
					left = append(left, o.GetNamespace()+"/"+o.GetName())
				}
				g.Expect(left).To(BeEmpty(), "%s exist on the node: their CRD cannot be replaced", crd.Spec.Names.Plural)
			}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		}
		ExpectWithOffset(1, k8s.Delete(ctx, cur)).To(Succeed())
		fw.ExpectGone(cur.DeepCopyObject().(client.Object), 2*time.Minute)
		DeferCleanup(func() {
			// An uninstall deletes what it installed: let that finish first.
			Eventually(func() bool {
				again := cur.DeepCopyObject().(client.Object)
				err := k8s.Get(context.Background(), key, again)
				return apierrors.IsNotFound(err) || (err == nil && again.GetDeletionTimestamp() == nil)
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(BeTrue())
			out, err := framework.RunLogged(kubectl, nil, "apply", "--server-side", "--force-conflicts", "-f", f)
			Expect(err).NotTo(HaveOccurred(), out)
		})
	}
}

// migrateStorage runs `kubectl etcd migrate-storage` with the suite's (admin) rights after an upgrade from a release
// that stored v1alpha1: before it the CRDs list both versions as stored, after it only v1beta1, and the rewrite
// changed no field of c (its generation stays, the operator has nothing to do).
func migrateStorage(c *etcdv1alpha1.EtcdCluster) {
	for _, name := range kubectlplugin.MigratedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1alpha1", "v1beta1"}), name)
		GinkgoWriter.Printf("%s: storedVersions before the migration %v\n", name, crd.Status.StoredVersions)
	}
	live := &etcdv1beta1.EtcdCluster{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), live)).To(Succeed())
	generation := live.Generation
	start := time.Now()
	var out bytes.Buffer
	Expect(kubectlplugin.MigrateStorage(ctx, cfg, &out)).To(Succeed(), out.String())
	framework.ReportDuration("kubectl etcd migrate-storage", time.Since(start))
	GinkgoWriter.Print(out.String())
	for _, name := range kubectlplugin.MigratedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1"}), name)
	}
	// The rewrite changes no field: the operator sees nothing to do.
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), live)).To(Succeed())
	Expect(live.Generation).To(Equal(generation))
	waitAvailable(c, time.Minute)
}

// etcdClient connects a Writer through the cluster's client Service, reading the cluster through v1alpha1: the
// upgrade scenarios' clusters are made by the previous release, whose CRDs do not serve v1beta1 yet.
func etcdClient(c *etcdv1beta1.EtcdCluster) *clientv3.Client {
	old := &etcdv1alpha1.EtcdCluster{}
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), old)).To(Succeed())
		g.Expect(old.Spec.TLS.Enabled).NotTo(BeNil(), "the operator has not recorded spec.tls.enabled yet")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	svc := &corev1.Service{}
	ExpectWithOffset(1, k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client"}, svc)).To(Succeed())
	host := c.Name + "-client." + c.Namespace + ".svc"
	var tlsConfig *tls.Config
	if *old.Spec.TLS.Enabled {
		secret := &corev1.Secret{}
		EventuallyWithOffset(1, func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client-tls"}, secret)
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		var err error
		tlsConfig, err = etcd.ClientTLSConfig(secret.Data["ca.crt"], secret.Data["tls.crt"], secret.Data["tls.key"])
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		tlsConfig.ServerName = host
	}
	var cli *clientv3.Client
	var err error
	if tlsConfig != nil {
		cli, err = framework.EtcdClientTLS(host, svc.Spec.ClusterIP, tlsConfig, 5*time.Second)
	} else {
		cli, err = clientv3.New(framework.ClientConfig([]string{"http://" + svc.Spec.ClusterIP + ":2379"}, 5*time.Second))
	}
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return cli
}
