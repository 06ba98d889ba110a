package resources

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// toApplyConfiguration converts a typed API struct into its apply configuration. Both share one JSON
// shape, so a JSON round trip is exact; it can only fail on a programming error.
func toApplyConfiguration[T any](in any) *T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("unmarshal into %T: %v", out, err))
	}
	return out
}

func toleration(t *corev1.Toleration) *corev1ac.TolerationApplyConfiguration {
	return toApplyConfiguration[corev1ac.TolerationApplyConfiguration](t)
}

func topologySpread(t *corev1.TopologySpreadConstraint) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	return toApplyConfiguration[corev1ac.TopologySpreadConstraintApplyConfiguration](t)
}

func affinityFrom(a *corev1.Affinity) *corev1ac.AffinityApplyConfiguration {
	return toApplyConfiguration[corev1ac.AffinityApplyConfiguration](a)
}
