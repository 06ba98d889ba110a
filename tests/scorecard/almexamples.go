// Package scorecard holds the project's custom scorecard tests: they run in a pod that operator-sdk's
// scorecard starts (the bundle untarred at /bundle, the pod's service account in its namespace), drive real
// EtcdClusters through the operator and report one v1alpha3.TestStatus on stdout.
package scorecard

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// ALMExamplesAnnotation is the CSV annotation holding the example custom resources OLM shows to users.
const ALMExamplesAnnotation = "alm-examples"

// EtcdClusterGVK is the kind the tests create.
var EtcdClusterGVK = etcdv1alpha1.GroupVersion.WithKind("EtcdCluster")

// LoadCSV reads the bundle directory (the scorecard untars the bundle at /bundle) and returns its CSV.
func LoadCSV(dir string) (*operatorsv1alpha1.ClusterServiceVersion, error) {
	b, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the bundle in %s: %w", dir, err)
	}
	if b.CSV == nil {
		return nil, fmt.Errorf("the bundle in %s has no ClusterServiceVersion", dir)
	}
	return b.CSV, nil
}

// EtcdClusterExamples returns the EtcdClusters of the CSV's alm-examples, in their order. Examples of other
// kinds are skipped; an EtcdCluster example with a field the API does not know is an error, because the
// API server would drop it silently and users would get something other than what the example shows.
func EtcdClusterExamples(csv *operatorsv1alpha1.ClusterServiceVersion) ([]etcdv1alpha1.EtcdCluster, error) {
	raw, ok := csv.GetAnnotations()[ALMExamplesAnnotation]
	if !ok || raw == "" {
		return nil, fmt.Errorf("CSV %s has no %s annotation", csv.GetName(), ALMExamplesAnnotation)
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		return nil, fmt.Errorf("CSV %s: %s is not a JSON array: %w", csv.GetName(), ALMExamplesAnnotation, err)
	}
	var out []etcdv1alpha1.EtcdCluster
	for i, item := range items {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(item, &tm); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", ALMExamplesAnnotation, i, err)
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: apiVersion %q: %w", ALMExamplesAnnotation, i, tm.APIVersion, err)
		}
		if gv.WithKind(tm.Kind) != EtcdClusterGVK {
			continue
		}
		var c etcdv1alpha1.EtcdCluster
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s[%d] (EtcdCluster): %w", ALMExamplesAnnotation, i, err)
		}
		if c.Name == "" {
			return nil, fmt.Errorf("%s[%d] (EtcdCluster) has no metadata.name", ALMExamplesAnnotation, i)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CSV %s: %s has no %s", csv.GetName(), ALMExamplesAnnotation, EtcdClusterGVK)
	}
	return out, nil
}

// ForTest turns an example into an object to create: in namespace ns, named by the API server from the
// example's name (so runs never collide), without status, and labelled as the scorecard's.
func ForTest(example etcdv1alpha1.EtcdCluster, ns, test string) *etcdv1alpha1.EtcdCluster {
	c := &etcdv1alpha1.EtcdCluster{}
	c.APIVersion, c.Kind = EtcdClusterGVK.ToAPIVersionAndKind()
	c.Namespace = ns
	c.GenerateName = example.Name + "-"
	c.Labels = map[string]string{}
	for k, v := range example.Labels {
		c.Labels[k] = v
	}
	c.Labels[TestLabel] = test
	c.Annotations = example.Annotations
	c.Spec = *example.Spec.DeepCopy()
	return c
}

// TestLabel marks every object the tests create with the test's name.
const TestLabel = "scorecard.etcd.seedops.io/test"
