//go:build olm

package olm

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// installModeCase sets up the namespaces of one install mode: where the operator is installed, the OperatorGroup's
// targets (nil: AllNamespaces), where EtcdClusters must be reconciled, where they must be left alone, and where the
// operator must have no rights at all.
type installModeCase struct {
	operatorNS string
	targets    []string
	watched    []string
	ignored    []string
	noRights   []string
}

var _ = Describe("Install modes", Label("install-modes"), func() {
	DescribeTable("installs from the catalog, reconciles watched namespaces only, with the RBAC OLM generates",
		func(setup func() installModeCase) {
			tc := setup()
			install(tc.operatorNS, tc.targets, "", operatorsv1alpha1.ApprovalAutomatic)

			By("waiting for the current CSV to succeed")
			csv := waitCSV(tc.operatorNS, csvName(currentVersion), 4*time.Minute)
			want := strings.Join(tc.targets, ",")
			Expect(csv.Annotations).To(HaveKeyWithValue("olm.targetNamespaces", want))
			pod := operatorPod(tc.operatorNS, image("OPERATOR", currentVersion), 3*time.Minute)
			// WATCH_NAMESPACE comes from this annotation (fieldRef in the CSV).
			Expect(pod.Annotations).To(HaveKeyWithValue("olm.targetNamespaces", want))
			Expect(pod.Spec.ServiceAccountName).To(Equal(operatorDeployment))

			By("checking the operator's rights: its objects in the watched namespaces, nothing elsewhere")
			expectRBACScope(tc.operatorNS, tc.watched, tc.noRights)

			By("creating EtcdClusters in ignored and in watched namespaces")
			var ignored, watched []*etcdv1alpha1.EtcdCluster
			for _, ns := range tc.ignored {
				ignored = append(ignored, newCluster(ns, "ignored", 1))
			}
			for _, ns := range tc.watched {
				watched = append(watched, newCluster(ns, "watched", 1))
			}
			for _, c := range watched {
				waitAvailable(c, 4*time.Minute)
			}
			if len(ignored) > 0 {
				By(fmt.Sprintf("checking that the clusters in %v are left alone", tc.ignored))
				expectIgnored(ignored, 15*time.Second)
			}
			expectNoOperatorErrors(pod)
		},
		Entry("OwnNamespace", func() installModeCase {
			op, other := fw.NewNamespace("own"), fw.NewNamespace("own-other")
			return installModeCase{operatorNS: op, targets: []string{op}, watched: []string{op},
				ignored: []string{other}, noRights: []string{other}}
		}),
		Entry("SingleNamespace", func() installModeCase {
			op, target, other := fw.NewNamespace("single"), fw.NewNamespace("single-target"), fw.NewNamespace("single-other")
			// The operator's own namespace is not a target: clusters there are ignored too (OLM still grants the
			// CSV's namespaced permissions there, for leader election).
			return installModeCase{operatorNS: op, targets: []string{target}, watched: []string{target},
				ignored: []string{op, other}, noRights: []string{other}}
		}),
		Entry("MultiNamespace", func() installModeCase {
			op := fw.NewNamespace("multi")
			t1, t2, other := fw.NewNamespace("multi-target1"), fw.NewNamespace("multi-target2"), fw.NewNamespace("multi-other")
			return installModeCase{operatorNS: op, targets: []string{t1, t2}, watched: []string{t1, t2},
				ignored: []string{op, other}, noRights: []string{other}}
		}),
		Entry("AllNamespaces", func() installModeCase {
			op := fw.NewNamespace("all")
			return installModeCase{operatorNS: op, targets: nil, watched: []string{fw.NewNamespace("all-any")}}
		}),
	)
})
