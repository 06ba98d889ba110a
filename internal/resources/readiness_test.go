package resources

import "testing"

// TestReadinessExcludesLearners: on the current member template a learner is not Ready where etcd's /readyz
// can tell (3.5.19 and later); a template kept from before (memberGate off) keeps its /health readiness.
func TestReadinessExcludesLearners(t *testing.T) {
	for _, tc := range []struct {
		version     string
		memberGate  bool
		wantReadyz  bool
		description string
	}{
		{"3.5.9", true, false, "no learner check in /readyz before 3.5.19"},
		{"3.5.18", true, false, "no learner check in /readyz before 3.5.19"},
		{"3.5.19", true, true, "learner check backported"},
		{"3.5.35", true, true, "learner check"},
		{"3.6.0", true, true, "learner check"},
		{"4.0.0", true, true, "learner check"},
		{"3.5.35", false, false, "template kept until the next roll"},
	} {
		c := designCluster()
		c.Spec.Version = tc.version
		gate := MemberGate{}
		if tc.memberGate {
			gate = CurrentMemberGate(DefaultOptions())
		}
		sts := StatefulSet(c, 3, DefaultOptions(), nil, gate)
		path := *sts.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path
		if got := path == "/readyz"; got != tc.wantReadyz {
			t.Errorf("%s, member gate %v: readiness %s (%s)", tc.version, tc.memberGate, path, tc.description)
		}
	}
}
