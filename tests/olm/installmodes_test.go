//go:build olm

package olm

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"

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
	// OwnNamespace, SingleNamespace and MultiNamespace target disjoint namespaces, so OLM lets all three run at once
	// (as several teams' installs do on one cluster): they are installed side by side, and each must reconcile its
	// own targets only. AllNamespaces intersects every other OperatorGroup: it runs alone.
	It("installs OwnNamespace, SingleNamespace and MultiNamespace side by side: each reconciles its targets only, with the RBAC OLM generates", func() {
		ns := fw.NewNamespaces("own", "own-other", "single", "single-target", "single-other",
			"multi", "multi-target1", "multi-target2", "multi-other")
		own, ownOther, single, singleTarget, singleOther, multi, t1, t2, multiOther := ns[0], ns[1], ns[2], ns[3], ns[4], ns[5], ns[6], ns[7], ns[8]
		expectInstallModes(
			installModeCase{operatorNS: own, targets: []string{own}, watched: []string{own},
				ignored: []string{ownOther}, noRights: []string{ownOther, singleTarget, t1}},
			// The operator's own namespace is not a target: clusters there are ignored too (OLM still grants the
			// CSV's namespaced permissions there, for leader election).
			installModeCase{operatorNS: single, targets: []string{singleTarget}, watched: []string{singleTarget},
				ignored: []string{single, singleOther}, noRights: []string{singleOther, own, t2}},
			installModeCase{operatorNS: multi, targets: []string{t1, t2}, watched: []string{t1, t2},
				ignored: []string{multi, multiOther}, noRights: []string{multiOther, own, singleTarget}},
		)
	})

	It("installs AllNamespaces: reconciles any namespace", func() {
		op := fw.NewNamespace("all")
		expectInstallModes(installModeCase{operatorNS: op, targets: nil, watched: []string{fw.NewNamespace("all-any")}})
	})
})

// expectInstallModes installs the operator once per case, all at once, then checks each install: its CSV succeeds,
// its operator runs with the targets OLM sets and only the rights it needs, EtcdClusters in its watched namespaces
// become Available and those in namespaces no install watches are left alone.
func expectInstallModes(cases ...installModeCase) {
	for _, tc := range cases {
		install(tc.operatorNS, tc.targets, "", operatorsv1alpha1.ApprovalAutomatic)
	}
	pods := make([]corev1.Pod, len(cases))
	var ignored, watched []*etcdv1alpha1.EtcdCluster
	for i, tc := range cases {
		By(fmt.Sprintf("waiting for the current CSV in %s to succeed", tc.operatorNS))
		csv := waitCSV(tc.operatorNS, csvName(currentVersion), 4*time.Minute)
		want := strings.Join(tc.targets, ",")
		Expect(csv.Annotations).To(HaveKeyWithValue("olm.targetNamespaces", want))
		pods[i] = operatorPod(tc.operatorNS, image("OPERATOR", currentVersion), 3*time.Minute)
		// WATCH_NAMESPACE comes from this annotation (fieldRef in the CSV).
		Expect(pods[i].Annotations).To(HaveKeyWithValue("olm.targetNamespaces", want))
		Expect(pods[i].Spec.ServiceAccountName).To(Equal(operatorDeployment))

		By(fmt.Sprintf("checking the rights of the operator in %s: its objects in %v, nothing in %v", tc.operatorNS, tc.watched, tc.noRights))
		expectRBACScope(tc.operatorNS, tc.watched, tc.noRights)

		By(fmt.Sprintf("creating EtcdClusters in %v (ignored) and %v (watched)", tc.ignored, tc.watched))
		for _, ns := range tc.ignored {
			ignored = append(ignored, newCluster(ns, "ignored", 1))
		}
		for _, ns := range tc.watched {
			watched = append(watched, newCluster(ns, "watched", 1))
		}
	}
	for _, c := range watched {
		waitAvailable(c, 4*time.Minute)
	}
	if len(ignored) > 0 {
		By("checking that the clusters in namespaces no install watches are left alone")
		expectIgnored(ignored, 15*time.Second)
	}
	for _, p := range pods {
		expectNoOperatorErrors(p)
	}
}
