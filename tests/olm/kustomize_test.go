//go:build olm

package olm

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// Users who install with kustomize upgrade by applying the new release's config/default over the running one
// (`make deploy`). The previous release is applied from its own source tree (the one its operator image is built
// from, extracted by hack/olm/images.sh), the current one with `make deploy` itself.
var _ = Describe("Upgrade with kustomize (make deploy over a running release)", Ordered, Label("kustomize"), func() {
	var (
		ns     string
		c      *etcdv1alpha1.EtcdCluster
		w      *framework.Writer
		before map[string]podState
	)

	BeforeAll(func() {
		Expect(releaseSources).NotTo(BeEmpty(), "set OLM_RELEASE_SOURCES")
		Expect(kustomize).NotTo(BeEmpty(), "set KUSTOMIZE")
		removeBundleObjects("CustomResourceDefinition")
		DeferCleanup(func() {
			// The operator must not outlive the container: the other scenarios install their own.
			out, err := framework.RunLogged(kubectl, nil, "-n", deployNamespace, "delete", "deployment", "--all", "--wait=true")
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(k8s.List(ctx, pods, client.InNamespace(deployNamespace))).To(Succeed())
				g.Expect(pods.Items).To(BeEmpty())
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		})
		ns = fw.NewNamespace("kustomize")
	})

	It("deploys the previous release from its config/default", func() {
		src := filepath.Join(releaseSources, "v"+previousVersion)
		tmp := GinkgoT().TempDir()
		out, err := framework.RunLogged("cp", nil, "-r", filepath.Join(src, "config"), tmp)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = framework.RunLogged("sh", nil, "-c", `cd "$1/config/manager" && "$2" edit set image controller="$3"`,
			"sh", tmp, kustomize, image("OPERATOR", previousVersion))
		Expect(err).NotTo(HaveOccurred(), out)
		manifests, err := framework.RunLogged(kustomize, nil, "build", filepath.Join(tmp, "config", "default"))
		Expect(err).NotTo(HaveOccurred(), manifests)
		file := filepath.Join(tmp, "previous.yaml")
		Expect(os.WriteFile(file, []byte(manifests), 0o600)).To(Succeed())
		out, err = framework.RunLogged(kubectl, nil, "apply", "--server-side", "--force-conflicts", "-f", file)
		Expect(err).NotTo(HaveOccurred(), out)
		operatorPod(deployNamespace, image("OPERATOR", previousVersion), 3*time.Minute)
	})

	It("runs a 3-member EtcdCluster written through v1alpha1 that takes writes", func() {
		c = newCluster(ns, "kustomize", 3)
		waitAvailable(c, 5*time.Minute)
		w = fw.StartWriter(current(c), "kustomize")
		w.WaitProgress(50, time.Minute)
		before = memberPods(c)
		Expect(before).To(HaveLen(3))
	})

	It("is replaced by the current release with make deploy", func() {
		start := time.Now()
		out, err := framework.RunLogged("make", []string{"KUBECONFIG=" + os.Getenv("KUBECONFIG")},
			"--no-print-directory", "-C", filepath.Join("..", ".."), "deploy", "IMG="+image("OPERATOR", currentVersion))
		Expect(err).NotTo(HaveOccurred(), out)
		operatorPod(deployNamespace, image("OPERATOR", currentVersion), 3*time.Minute)
		framework.ReportDuration("make deploy over the previous release (new operator running)", time.Since(start))
		// The new operator has reconciled the cluster once the backup CronJob runs its image.
		Eventually(func(g Gomega) {
			cj := &batchv1.CronJob{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-backup"}, cj)).To(Succeed())
			g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image).To(Equal(image("OPERATOR", currentVersion)))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitAvailable(c, 2*time.Minute)
		w.WaitProgress(50, time.Minute)
	})

	It("migrates the stored objects to v1beta1 and trims the CRDs' storedVersions", func() {
		migrateStorage(c)
	})

	It("keeps every acknowledged key", func() {
		w.StopAndVerify(current(c))
	})

	It("did not restart or recreate etcd pods", func() {
		Expect(memberPods(c)).To(Equal(before))
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name}, sts)).To(Succeed())
		expectSameMemberTemplate(sts)
	})
})
