package scorecard

import (
	"fmt"
	"maps"
	"slices"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// LocalConfig returns the scorecard configuration with every test image replaced by images[image]. An
// image without a replacement is an error: on a disconnected node it could not be pulled, and a public
// name that does not match any local build (a tag that did not follow VERSION) must not go unnoticed.
func LocalConfig(cfg v1alpha3.Configuration, images map[string]string) (v1alpha3.Configuration, error) {
	out := *cfg.DeepCopy()
	for i := range out.Stages {
		for j := range out.Stages[i].Tests {
			t := &out.Stages[i].Tests[j]
			local, ok := images[t.Image]
			if !ok {
				return cfg, fmt.Errorf("test %s/%s: no local build of image %s (have: %v)",
					t.Labels["suite"], t.Labels["test"], t.Image, slices.Sorted(maps.Keys(images)))
			}
			t.Image = local
		}
	}
	return out, nil
}

// DefaultRepositoryVersions are the etcd versions, sorted and once each, of the examples that use the
// default image repository (set, or left empty for the API server to default): the images a disconnected
// install has to mirror.
func DefaultRepositoryVersions(examples []etcdv1beta1.EtcdCluster) []string {
	var out []string
	for _, c := range examples {
		if c.Spec.Repository != "" && c.Spec.Repository != resources.DefaultRepository {
			continue
		}
		if !slices.Contains(out, c.Spec.Version) {
			out = append(out, c.Spec.Version)
		}
	}
	slices.Sort(out)
	return out
}
