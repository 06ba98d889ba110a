//go:build bench

// Package node benchmarks the deployed operator on the local node (hack/node) against the practical
// limit: the same etcd StatefulSet, built by the operator's own builders with a static initial cluster,
// applied by hand. Every figure is recorded next to its baseline measured in the same run; the report
// takes medians. Benchmarks, not tests: a scenario fails only when something never happens.
//
// Run with `make bench-node` (holds the node lock, deploys the operator). Results go to
// $BENCH_OUT/<scenario>.json.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/pki"
	"github.com/seedops/etcd-operator/internal/resources"
	"github.com/seedops/etcd-operator/tests/framework"
)

var (
	k8s          client.WithWatch
	runs         = framework.EnvInt("BENCH_RUNS", 3)
	outDir       = framework.Env("BENCH_OUT", "bench-out")
	etcdRepo     = framework.Env("BENCH_ETCD_REPOSITORY", "localhost:5000/etcd")
	etcdVersion  = framework.Env("BENCH_ETCD_VERSION", "3.5.35")
	upgradeFrom  = framework.Env("BENCH_ETCD_UPGRADE_FROM", "3.5.34")
	nextVersion  = framework.Env("BENCH_ETCD_NEXT_VERSION", "3.6.16") // its members accept two learners at once
	operatorNS   = framework.Env("BENCH_OPERATOR_NAMESPACE", "etcd-operator-system")
	operatorName = framework.Env("BENCH_OPERATOR_DEPLOYMENT", "etcd-operator-controller-manager")
	// fw builds the clusters the benchmarks create (the suites' sample cluster).
	fw = &framework.Framework{Ctx: context.Background(), EtcdRepository: etcdRepo}
)

func TestMain(m *testing.M) {
	cfg, err := framework.RESTConfig(os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "KUBECONFIG:", err)
		os.Exit(1)
	}
	if k8s, err = framework.NewClient(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fw.Client = k8s
	if err := onlyOurOperator(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-node:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// onlyOurOperator refuses to measure while another etcd operator watching all namespaces (e.g. installed
// through OLM by someone else) could reconcile the same clusters, and waits until ours, from `make deploy`,
// runs the expected image (BENCH_OPERATOR_IMAGE).
func onlyOurOperator() error {
	ctx := context.Background()
	deps := &appsv1.DeploymentList{}
	if err := k8s.List(ctx, deps); err != nil {
		return err
	}
	for _, d := range deps.Items {
		if d.Namespace == operatorNS && d.Name == operatorName {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.Contains(c.Image, "etcd-operator") && d.Status.Replicas > 0 && watchesAll(&d, &c) {
				return fmt.Errorf("another etcd operator watching all namespaces runs (%s/%s); try later", d.Namespace, d.Name)
			}
		}
	}
	want := os.Getenv("BENCH_OPERATOR_IMAGE")
	return waitFor(ctx, &appsv1.DeploymentList{}, []client.ListOption{client.InNamespace(operatorNS)}, 3*time.Minute, func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: operatorName}, d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return d.Status.ObservedGeneration == d.Generation && d.Spec.Replicas != nil &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas &&
			d.Status.Replicas == *d.Spec.Replicas &&
			(want == "" || d.Spec.Template.Spec.Containers[0].Image == want), nil
	})
}

// watchesAll reads WATCH_NAMESPACE as the operator would: a value, or OLM's olm.targetNamespaces
// annotation; empty means all namespaces.
func watchesAll(d *appsv1.Deployment, c *corev1.Container) bool {
	for _, e := range c.Env {
		if e.Name != "WATCH_NAMESPACE" {
			continue
		}
		if e.Value != "" {
			return false
		}
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && strings.Contains(e.ValueFrom.FieldRef.FieldPath, "olm.targetNamespaces") {
			return d.Spec.Template.Annotations["olm.targetNamespaces"] == ""
		}
	}
	return true
}

// record appends one sample to $BENCH_OUT/<scenario>.json.
func record(t *testing.T, scenario string, sample map[string]float64) {
	t.Helper()
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f, err := strconv.ParseFloat(strings.Fields(string(la))[0], 64); err == nil {
			sample["load1"] = f
		}
	}
	t.Logf("%s: %v", scenario, sample)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(outDir, scenario+".json")
	var all []map[string]float64
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &all)
	}
	all = append(all, sample)
	b, _ := json.MarshalIndent(all, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newNamespace creates a namespace and returns a func that deletes it and waits until it is gone, so a
// trial's objects never load the next trial; call it when the trial ends (t.Cleanup is the fallback).
func newNamespace(t *testing.T, prefix string) (string, func()) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + prefix + "-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	done := func() {
		once.Do(func() {
			_ = k8s.Delete(ctx, ns)
			_ = waitFor(ctx, &corev1.NamespaceList{}, nil, 5*time.Minute, func() (bool, error) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
				return err != nil && client.IgnoreNotFound(err) == nil, nil
			})
			// The namespace's volumes are removed after it (the provisioner's helper pods delete their
			// directories): the next trial would share the node with that work, and the provisioner's
			// queue, while its own volumes are made.
			_ = waitFor(ctx, &corev1.PersistentVolumeList{}, nil, 5*time.Minute, func() (bool, error) {
				pvs := &corev1.PersistentVolumeList{}
				if err := k8s.List(ctx, pvs); err != nil {
					return false, err
				}
				for _, pv := range pvs.Items {
					if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns.Name {
						return false, nil
					}
				}
				return true, nil
			})
		})
	}
	t.Cleanup(done)
	return ns.Name, done
}

// waitFor evaluates cond now and after every watch event on list's kind (in the given namespace, or all
// namespaces for nil opts), until it holds or timeout. Watches are re-opened when the server closes them.
func waitFor(ctx context.Context, list client.ObjectList, opts []client.ListOption, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		w, err := k8s.Watch(ctx, list, opts...)
		if err != nil {
			return err
		}
		if ok, err := cond(); err != nil || ok {
			w.Stop()
			return err
		}
		// Re-check on every event, and at least once a second (status read from etcd by the operator
		// can change between events of this kind).
		tick := time.NewTicker(time.Second)
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				tick.Stop()
				return fmt.Errorf("timed out after %s", timeout)
			case ev, open := <-w.ResultChan():
				if !open {
					break events
				}
				if ev.Type == watch.Error {
					break events
				}
			case <-tick.C:
			}
			if ok, err := cond(); err != nil || ok {
				w.Stop()
				tick.Stop()
				return err
			}
		}
		w.Stop()
		tick.Stop()
	}
}

// cluster is the suites' sample cluster without backups (they would add Jobs to what is measured), whose
// volume claims go with it and with removed members, so no trial leaves volumes to the next.
func cluster(ns, name, version string, replicas int32) *etcdv1beta1.EtcdCluster {
	c := fw.NewCluster(ns, name, version, replicas)
	c.Spec.BackupSchedule = ""
	c.Spec.PVCRetentionPolicy = etcdv1beta1.PVCRetentionPolicy{WhenDeleted: "Delete", WhenScaled: "Delete"}
	return c
}

// available reports whether the cluster's status describes its current generation as Available and
// Running with every member ready (as the e2e suite's waitAvailable), and etcd's member list, as the
// status reports it, holds exactly the spec's members, each a healthy voter (a scale step or a heal is
// done only then).
func available(c *etcdv1beta1.EtcdCluster) (bool, error) {
	cur := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), cur); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if len(cur.Status.Members) != int(cur.Spec.Replicas) {
		return false, nil
	}
	for _, m := range cur.Status.Members {
		if !m.Healthy || m.Learner {
			return false, nil
		}
	}
	return cur.Status.ObservedGeneration == cur.Generation &&
		meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1beta1.ConditionAvailable) &&
		cur.Status.Phase == etcdv1beta1.PhaseRunning &&
		cur.Status.ReadyReplicas == cur.Spec.Replicas, nil
}

// waitAvailable waits until the cluster is Available with all members ready, and every member pod runs
// image (if set) and is Ready.
func waitAvailable(t *testing.T, c *etcdv1beta1.EtcdCluster, image string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	err := waitFor(ctx, &etcdv1beta1.EtcdClusterList{}, []client.ListOption{client.InNamespace(c.Namespace)}, timeout, func() (bool, error) {
		ok, err := available(c)
		if !ok || err != nil {
			return false, err
		}
		cur := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
			return false, err
		}
		pods, err := memberPods(c.Namespace, c.Name)
		if err != nil || len(pods) != int(cur.Spec.Replicas) {
			return false, err
		}
		for _, p := range pods {
			if !framework.PodReady(&p) || p.DeletionTimestamp != nil || (image != "" && p.Spec.Containers[0].Image != image) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s/%s not available: %v", c.Namespace, c.Name, err)
	}
}

func memberPods(ns, instance string) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := k8s.List(context.Background(), pods, client.InNamespace(ns), framework.MemberLabels(instance))
	return pods.Items, err
}

// applyBare applies, by hand, what the operator would run for a new n-member cluster: ConfigMap with the
// static initial cluster, peer and client Services, and the StatefulSet, from the operator's own builders,
// without owner and without the managed-by label (so the operator ignores them). Same image, probes,
// volumes and Parallel start as the operator's members: the difference is the operator.
func applyBare(t *testing.T, ns, name string, n int32) {
	t.Helper()
	applyBareSpec(t, ns, name, n, nil)
}

// applyBareSpec is applyBare of the cluster spec changes (nil: the defaults), e.g. withoutTLS.
func applyBareSpec(t *testing.T, ns, name string, n int32, spec func(*etcdv1beta1.EtcdCluster)) {
	t.Helper()
	ctx := context.Background()
	c := cluster(ns, name, etcdVersion, n)
	if spec != nil {
		spec(c)
	}
	o := resources.DefaultOptions()
	cm := resources.ConfigMap(c, resources.BootstrapConfig(c, int(n), o))
	cm.OwnerReferences = nil
	unmanage(cm.Labels)
	peer, cl := resources.PeerService(c), resources.ClientService(c)
	peer.OwnerReferences, cl.OwnerReferences = nil, nil
	unmanage(peer.Labels)
	unmanage(cl.Labels)
	sts := resources.StatefulSet(c, n, o, nil, resources.MemberGate{})
	sts.OwnerReferences = nil
	unmanage(sts.Labels)
	unmanage(sts.Spec.Template.Labels)
	for i := range sts.Spec.VolumeClaimTemplates {
		unmanage(sts.Spec.VolumeClaimTemplates[i].Labels)
	}
	applies := []runtime.ApplyConfiguration{cm, peer, cl, sts}
	if resources.TLSEnabled(c) {
		// The members serve TLS as the operator's do: the same certificates, issued here, before the pods.
		secrets, err := bareTLSSecrets(c, o)
		if err != nil {
			t.Fatalf("bare %s certificates: %v", name, err)
		}
		applies = append(secrets, applies...)
	}
	for _, ac := range applies {
		if err := k8s.Apply(ctx, ac, client.FieldOwner("bench"), client.ForceOwnership); err != nil {
			t.Fatalf("apply bare %s: %v", name, err)
		}
	}
}

// bareTLSSecrets issues the server, peer and client certificates the operator would, from a CA of their own.
func bareTLSSecrets(c *etcdv1beta1.EtcdCluster, o resources.Options) ([]runtime.ApplyConfiguration, error) {
	now := time.Now()
	ca, _, err := pki.NewCA(c.Name+"-bench-ca", 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	var out []runtime.ApplyConfiguration
	for _, leaf := range resources.LeafCertificates(c, o) {
		certPEM, keyPEM, err := ca.Issue(leaf.Request, now)
		if err != nil {
			return nil, err
		}
		s := resources.TLSSecret(c, leaf.SecretName, certPEM, keyPEM, ca.CertPEM)
		s.OwnerReferences = nil
		unmanage(s.Labels)
		out = append(out, s)
	}
	return out, nil
}

func unmanage(l map[string]string) {
	if l != nil {
		l[resources.LabelManagedBy] = "bench"
	}
}

// waitPodsReady waits until instance has exactly n member pods, all Ready, none of them in exclude
// (UIDs of pods that must have been replaced).
func waitPodsReady(t *testing.T, ns, instance string, n int, exclude map[types.UID]bool, timeout time.Duration) {
	t.Helper()
	err := waitFor(context.Background(), &corev1.PodList{}, []client.ListOption{client.InNamespace(ns)}, timeout, func() (bool, error) {
		pods, err := memberPods(ns, instance)
		if err != nil || len(pods) != n {
			return false, err
		}
		for _, p := range pods {
			if !framework.PodReady(&p) || p.DeletionTimestamp != nil || exclude[p.UID] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: %d ready pods: %v", ns, instance, n, err)
	}
}

func secs(d time.Duration) float64 { return d.Seconds() }

// barePodStart is the time from applying a bare 1-member StatefulSet (new volume) to its pod Ready: one
// member's start, the unit of a scale step.
func barePodStart(t *testing.T) float64 {
	ns, done := newNamespace(t, "pod")
	defer done()
	start := time.Now()
	applyBare(t, ns, "bare", 1)
	waitPodsReady(t, ns, "bare", 1, nil, 5*time.Minute)
	return secs(time.Since(start))
}

// bareVolumeLoss applies a bare 1-member StatefulSet, deletes its claim and then its pod, and times until
// the successor pod, on a new volume, is Ready: the floor of replacing a member's pod and volume, since the
// StatefulSet makes the successor only once the old pod is gone, and the new volume is provisioned first.
func bareVolumeLoss(t *testing.T) float64 {
	ctx := context.Background()
	ns, done := newNamespace(t, "pod")
	defer done()
	applyBare(t, ns, "bare", 1)
	waitPodsReady(t, ns, "bare", 1, nil, 5*time.Minute)
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare-0"}}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-bare-0"}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitPodsReady(t, ns, "bare", 1, map[types.UID]bool{victim.UID: true}, 5*time.Minute)
	return secs(time.Since(start))
}

// bareMemberRestart applies a bare 3-member StatefulSet in a namespace of its own and times one member
// pod's restart (barePodRestart).
func bareMemberRestart(t *testing.T) float64 {
	ns, done := newNamespace(t, "bare")
	defer done()
	applyBare(t, ns, "bare", 3)
	waitPodsReady(t, ns, "bare", 3, nil, 5*time.Minute)
	return barePodRestart(t, ns, "bare", 3)
}

// startCluster creates a 3-member cluster of version, changed by spec (nil: the defaults), in a namespace of
// its own, and waits until it is Available; done deletes the namespace.
func startCluster(t *testing.T, prefix, version string, spec func(*etcdv1beta1.EtcdCluster)) (*etcdv1beta1.EtcdCluster, func()) {
	ns, done := newNamespace(t, prefix)
	c := cluster(ns, "op", version, 3)
	if spec != nil {
		spec(c)
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "", 5*time.Minute)
	return c, done
}

// barePodRestart is the time from deleting one member pod of a running bare StatefulSet (volume kept)
// to its replacement Ready: the unit of a rolling change.
func barePodRestart(t *testing.T, ns, instance string, n int) float64 {
	ctx := context.Background()
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: instance + "-1"}}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := k8s.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	waitPodsReady(t, ns, instance, n, map[types.UID]bool{victim.UID: true}, 5*time.Minute)
	return secs(time.Since(start))
}
