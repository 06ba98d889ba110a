package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// A StatefulSet ControllerRevision's data is the strategic merge patch the StatefulSet controller stores:
// {"spec":{"template":{...,"$patch":"replace"}}}, the pod template as the API server held it.
type revisionData struct {
	Spec struct {
		Template *corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// RevisionTemplate decodes the pod template of a StatefulSet ControllerRevision's data.
func RevisionTemplate(data []byte) (*corev1.PodTemplateSpec, error) {
	var d revisionData
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode the revision's pod template: %w", err)
	}
	if d.Spec.Template == nil {
		return nil, fmt.Errorf("the revision holds no pod template")
	}
	return d.Spec.Template, nil
}

// WithoutPlacement clears the fields of t the scheduler alone reads, once, when it places a pod: affinity
// and topology spread constraints. A running pod never looks at them again, so templates equal without them
// run the same member.
func WithoutPlacement(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	t = t.DeepCopy()
	t.Spec.Affinity, t.Spec.TopologySpreadConstraints = nil, nil
	return t
}

// RevisionDigest is a digest of a StatefulSet ControllerRevision's pod template without placement: two
// revisions have the same digest when their templates differ in placement at most. The template is
// decoded and encoded again, so the digest depends on its content only, not on how it was written (field
// order, a quantity written as 1000m or 1).
func RevisionDigest(data []byte) (string, error) {
	t, err := RevisionTemplate(data)
	if err != nil {
		return "", err
	}
	canonical, err := json.Marshal(WithoutPlacement(t))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}
