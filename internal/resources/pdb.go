package resources

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// PodDisruptionBudget keeps a quorum of members running through voluntary disruptions (drains,
// evictions). With one member down already, no further eviction of a 3-member cluster is allowed.
func PodDisruptionBudget(c *etcdv1beta1.EtcdCluster, voters int32) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(PDBName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMinAvailable(intstr.FromInt32(Quorum(voters))).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(c))))
}
