//go:build olm

package olm

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/seedops/etcd-operator/tests/framework"
)

// operator-sdk reads the index image over TLS only, with the machine's CAs: every image it touches is referenced
// through the registry's TLS endpoint, and SSL_CERT_FILE adds the registry's CA for this process only.
func viaTLS(ref string) string { return strings.Replace(ref, "localhost:5000/", registryTLS+"/", 1) }

func operatorSDKRun(args ...string) {
	out, err := framework.RunLogged(operatorSDK, []string{"SSL_CERT_FILE=" + registryTLSBundle}, args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
}

var _ = Describe("operator-sdk run bundle, bundle-upgrade and cleanup", Ordered, Label("operator-sdk"), func() {
	var ns string

	BeforeAll(func() {
		Expect(operatorSDK).NotTo(BeEmpty(), "set OPERATOR_SDK")
		Expect(registryTLSBundle).NotTo(BeEmpty(), "set OLM_REGISTRY_TLS_BUNDLE")
		removeBundleObjects("CustomResourceDefinition")
		// operator-sdk's registry pod leaves its init container's security context empty: no restricted namespace.
		ns = fw.NewUnrestrictedNamespace("sdk")
		DeferCleanup(uninstall, ns)
	})

	It("installs the previous bundle with run bundle", func() {
		start := time.Now()
		operatorSDKRun("run", "bundle", viaTLS(image("BUNDLE", previousVersion)), "--namespace", ns,
			"--install-mode", "OwnNamespace", "--index-image", viaTLS(image("OPM", "")),
			"--decompression-image", image("BUSYBOX", ""), "--security-context-config", "restricted", "--timeout", "5m")
		waitCSV(ns, csvName(previousVersion), time.Minute)
		operatorPod(ns, image("OPERATOR", previousVersion), 3*time.Minute)
		framework.ReportDuration("run bundle", time.Since(start))
	})

	It("upgrades to the current bundle with run bundle-upgrade", func() {
		start := time.Now()
		operatorSDKRun("run", "bundle-upgrade", viaTLS(image("BUNDLE", currentVersion)), "--namespace", ns,
			"--security-context-config", "restricted", "--timeout", "5m")
		csv := waitCSV(ns, csvName(currentVersion), time.Minute)
		Expect(csv.Spec.Replaces).To(Equal(csvName(previousVersion)))
		fw.ExpectGone(&operatorsv1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: csvName(previousVersion)}}, 3*time.Minute)
		operatorPod(ns, image("OPERATOR", currentVersion), 3*time.Minute)
		framework.ReportDuration("run bundle-upgrade", time.Since(start))
	})

	It("removes it all with cleanup (but the CRD, shared with other installs on the node)", func() {
		// --delete-all (the default) would also delete the EtcdCluster CRD and with it every EtcdCluster on the node.
		operatorSDKRun("cleanup", packageName, "--namespace", ns, "--delete-all=false", "--delete-operator-groups",
			"--timeout", "3m")
		Eventually(func(g Gomega) {
			lists := map[string]client.ObjectList{
				"subscriptions": &operatorsv1alpha1.SubscriptionList{}, "csvs": &operatorsv1alpha1.ClusterServiceVersionList{},
				"catalogsources": &operatorsv1alpha1.CatalogSourceList{}, "operatorgroups": &operatorsv1.OperatorGroupList{},
				"deployments": &appsv1.DeploymentList{}, "pods": &corev1.PodList{}, "configmaps": &corev1.ConfigMapList{},
				"roles": &rbacv1.RoleList{}, "rolebindings": &rbacv1.RoleBindingList{},
			}
			for kind, l := range lists {
				g.Expect(k8s.List(ctx, l, client.InNamespace(ns))).To(Succeed())
				var left []string
				items, _ := metaItems(l)
				for _, o := range items {
					// The namespace's own root CA ConfigMap is Kubernetes', not operator-sdk's.
					if o.GetName() != "kube-root-ca.crt" {
						left = append(left, o.GetName())
					}
				}
				g.Expect(left).To(BeEmpty(), "%s left in %s", kind, ns)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
