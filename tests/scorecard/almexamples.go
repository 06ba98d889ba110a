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

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// ALMExamplesAnnotation is the CSV annotation holding the example custom resources OLM shows to users.
const ALMExamplesAnnotation = "alm-examples"

// The kinds the tests create.
var (
	EtcdClusterGVK = etcdv1beta1.GroupVersion.WithKind("EtcdCluster")
	EtcdBackupGVK  = etcdv1beta1.GroupVersion.WithKind("EtcdBackup")
)

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

// Examples are the CSV's alm-examples of the project's kinds, in their order.
type Examples struct {
	Clusters []etcdv1beta1.EtcdCluster
	Backups  []etcdv1beta1.EtcdBackup
}

// ParseExamples reads the CSV's alm-examples. Examples of other kinds are skipped; an example with a field
// the API does not know is an error, because the API server would drop it silently and users would get
// something other than what the example shows. At least one EtcdCluster is required.
func ParseExamples(csv *operatorsv1alpha1.ClusterServiceVersion) (Examples, error) {
	var out Examples
	raw, ok := csv.GetAnnotations()[ALMExamplesAnnotation]
	if !ok || raw == "" {
		return out, fmt.Errorf("CSV %s has no %s annotation", csv.GetName(), ALMExamplesAnnotation)
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		return out, fmt.Errorf("CSV %s: %s is not a JSON array: %w", csv.GetName(), ALMExamplesAnnotation, err)
	}
	for i, item := range items {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(item, &tm); err != nil {
			return out, fmt.Errorf("%s[%d]: %w", ALMExamplesAnnotation, i, err)
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			return out, fmt.Errorf("%s[%d]: apiVersion %q: %w", ALMExamplesAnnotation, i, tm.APIVersion, err)
		}
		var into any
		switch gv.WithKind(tm.Kind) {
		case EtcdClusterGVK:
			out.Clusters = append(out.Clusters, etcdv1beta1.EtcdCluster{})
			into = &out.Clusters[len(out.Clusters)-1]
		case EtcdBackupGVK:
			out.Backups = append(out.Backups, etcdv1beta1.EtcdBackup{})
			into = &out.Backups[len(out.Backups)-1]
		default:
			continue
		}
		if tm.Metadata.Name == "" {
			return out, fmt.Errorf("%s[%d] (%s) has no metadata.name", ALMExamplesAnnotation, i, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return out, fmt.Errorf("%s[%d] (%s %s): %w", ALMExamplesAnnotation, i, tm.Kind, tm.Metadata.Name, err)
		}
	}
	if len(out.Clusters) == 0 {
		return out, fmt.Errorf("CSV %s: %s has no %s", csv.GetName(), ALMExamplesAnnotation, EtcdClusterGVK)
	}
	return out, nil
}

// RestoresFrom is the EtcdBackup a cluster bootstraps from, if any.
func RestoresFrom(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.FromBackup == nil {
		return ""
	}
	return c.Spec.Bootstrap.FromBackup.BackupName
}

// Plain is the first cluster example that starts empty (restoring ones need a backup first).
func (x Examples) Plain() (etcdv1beta1.EtcdCluster, bool) {
	for _, c := range x.Clusters {
		if c.Spec.Bootstrap == nil {
			return c, true
		}
	}
	return etcdv1beta1.EtcdCluster{}, false
}

// ForTest turns an example into an object to create: in namespace ns, named by the API server from the
// example's name (so runs never collide), without status, and labelled as the scorecard's.
func ForTest(example etcdv1beta1.EtcdCluster, ns, test string) *etcdv1beta1.EtcdCluster {
	c := &etcdv1beta1.EtcdCluster{}
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

// BackupForTest is ForTest for an EtcdBackup example, backing up the (already created) cluster.
func BackupForTest(example etcdv1beta1.EtcdBackup, ns, test, cluster string) *etcdv1beta1.EtcdBackup {
	b := &etcdv1beta1.EtcdBackup{}
	b.APIVersion, b.Kind = EtcdBackupGVK.ToAPIVersionAndKind()
	b.Namespace = ns
	b.GenerateName = example.Name + "-"
	b.Labels = map[string]string{}
	for k, v := range example.Labels {
		b.Labels[k] = v
	}
	b.Labels[TestLabel] = test
	b.Annotations = example.Annotations
	b.Spec = *example.Spec.DeepCopy()
	b.Spec.ClusterName = cluster
	return b
}

// TestLabel marks every object the tests create with the test's name.
const TestLabel = "scorecard.etcd.seedops.io/test"
