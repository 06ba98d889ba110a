package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// printObject writes obj as JSON or YAML, with apiVersion and kind, as `kubectl get -o` would.
func printObject(w io.Writer, obj runtime.Object, kind, format string) error {
	obj = obj.DeepCopyObject()
	obj.GetObjectKind().SetGroupVersionKind(etcdv1beta1.GroupVersion.WithKind(kind))
	switch format {
	case "json":
		b, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q: use json or yaml", format)
}
