package resources

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// placementOf is the member template's placement as the API server would store it.
func placementOf(t *testing.T, c *etcdv1beta1.EtcdCluster) (*corev1.Affinity, []corev1.TopologySpreadConstraint) {
	t.Helper()
	tpl := podTemplateOf(t, c)
	return tpl.Spec.Affinity, tpl.Spec.TopologySpreadConstraints
}

func podTemplateOf(t *testing.T, c *etcdv1beta1.EtcdCluster) *corev1.PodTemplateSpec {
	t.Helper()
	raw, err := json.Marshal(StatefulSet(c, 3, DefaultOptions(), nil, CurrentMemberGate(DefaultOptions())).Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(raw, tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestPlacement(t *testing.T) {
	c := designCluster()
	selector := &metav1.LabelSelector{MatchLabels: SelectorLabels(c)}
	spread := func(when corev1.UnsatisfiableConstraintAction) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: when, LabelSelector: selector},
			{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: when, LabelSelector: selector},
		}
	}
	preferOwnNode := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: selector}}}}}
	userAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "node-role.kubernetes.io/etcd", Operator: corev1.NodeSelectorOpExists}}}}}}}
	userSpread := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: selector}}

	for name, tc := range map[string]struct {
		pod          etcdv1beta1.PodSpec
		wantAffinity *corev1.Affinity
		wantSpread   []corev1.TopologySpreadConstraint
	}{
		"default: preferred spread over zones and nodes, and a node of its own preferred": {
			wantAffinity: preferOwnNode, wantSpread: spread(corev1.ScheduleAnyway)},
		"Preferred is the default": {pod: etcdv1beta1.PodSpec{Spread: etcdv1beta1.SpreadPreferred},
			wantAffinity: preferOwnNode, wantSpread: spread(corev1.ScheduleAnyway)},
		"Required: the scheduler keeps a member Pending rather than spread it unevenly": {pod: etcdv1beta1.PodSpec{Spread: etcdv1beta1.SpreadRequired},
			wantAffinity: preferOwnNode, wantSpread: spread(corev1.DoNotSchedule)},
		"the user's affinity alone: no default placement": {pod: etcdv1beta1.PodSpec{Affinity: userAffinity, Spread: etcdv1beta1.SpreadRequired},
			wantAffinity: userAffinity},
		"the user's constraints alone: no default placement": {pod: etcdv1beta1.PodSpec{TopologySpreadConstraints: userSpread},
			wantSpread: userSpread},
		"both the user's": {pod: etcdv1beta1.PodSpec{Affinity: userAffinity, TopologySpreadConstraints: userSpread},
			wantAffinity: userAffinity, wantSpread: userSpread},
	} {
		t.Run(name, func(t *testing.T) {
			c := designCluster()
			c.Spec.Pod = tc.pod
			affinity, constraints := placementOf(t, c)
			if diff := cmp.Diff(tc.wantAffinity, affinity); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSpread, constraints); diff != "" {
				t.Errorf("topology spread constraints (-want +got):\n%s", diff)
			}
		})
	}
}

// revisionOf is a StatefulSet ControllerRevision's data for template t, as the StatefulSet controller
// writes it.
func revisionOf(t *testing.T, tpl any) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tpl}})
	if err != nil {
		t.Fatal(err)
	}
	// The controller marks the template to replace the stored one; the digest must not trip over it.
	var m map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["spec"]["template"]["$patch"] = "replace"
	raw, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestRevisionDigest: two revisions have one digest exactly when their templates differ in placement at
// most, however each was written.
func TestRevisionDigest(t *testing.T) {
	base := podTemplateOf(t, designCluster())
	required := designCluster()
	required.Spec.Pod.Spread = etcdv1beta1.SpreadRequired
	noDefault := designCluster()
	noDefault.Spec.Pod.Affinity = &corev1.Affinity{}
	digest := func(data []byte) string {
		t.Helper()
		d, err := RevisionDigest(data)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := digest(revisionOf(t, base))

	// The template as an earlier release built it: only the anti-affinity, no spread constraints.
	earlier := base.DeepCopy()
	earlier.Spec.TopologySpreadConstraints = nil
	// A quantity written otherwise, and fields in another order (YAML round trip sorts keys).
	rewritten := base.DeepCopy()
	rewritten.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.1")
	y, err := yaml.Marshal(rewritten)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := yaml.Unmarshal(y, &generic); err != nil {
		t.Fatal(err)
	}
	otherImage := base.DeepCopy()
	otherImage.Spec.Containers[0].Image += "-other"
	otherLabel := base.DeepCopy()
	otherLabel.Labels["team"] = "storage"
	otherSelector := base.DeepCopy()
	otherSelector.Spec.NodeSelector = map[string]string{"disk": "ssd"}

	for name, tc := range map[string]struct {
		data []byte
		same bool
	}{
		"the same template":             {revisionOf(t, base), true},
		"the earlier default placement": {revisionOf(t, earlier), true},
		"required spread":               {revisionOf(t, podTemplateOf(t, required)), true},
		"the user's placement":          {revisionOf(t, podTemplateOf(t, noDefault)), true},
		"written otherwise":             {revisionOf(t, generic), true},
		"another image":                 {revisionOf(t, otherImage), false},
		"another pod label":             {revisionOf(t, otherLabel), false},
		"a node selector (only affinity and spread constraints are left out)": {revisionOf(t, otherSelector), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := digest(tc.data) == want; got != tc.same {
				t.Errorf("same digest: %v, want %v", got, tc.same)
			}
		})
	}
	for name, data := range map[string]string{"not JSON": "{", "no template": `{"spec":{}}`} {
		if _, err := RevisionDigest([]byte(data)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
