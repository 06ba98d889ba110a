package resources

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// PodMonitorGVK is prometheus-operator's PodMonitor. The operator builds it as an unstructured object, so
// it needs neither prometheus-operator's Go module nor its CRD: it creates PodMonitors only where the API
// server serves the kind.
var PodMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}

// PodMonitor has Prometheus scrape every member's plain metrics listener (ETCD_LISTEN_METRICS_URLS, the
// container port "metrics"; it serves /metrics and /health only, never data, so it needs no client
// certificate). The series carry job "etcd" and the labels the operator's own metrics use: namespace
// (prometheus-operator adds it), cluster (the EtcdCluster) and member (the pod, which is the member's name),
// so rules and dashboards join etcd's metrics with the operator's on (namespace, cluster).
func PodMonitor(c *etcdv1beta1.EtcdCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": monitoringMetadata(c, PodMonitorName(c), ComponentEtcd),
		"spec": map[string]any{
			// job="etcd" (the pods' name label) for every cluster, so rules select the members' series by job.
			"jobLabel": LabelName,
			"selector": map[string]any{"matchLabels": stringMap(SelectorLabels(c))},
			"podMetricsEndpoints": []any{map[string]any{
				"port":   "metrics",
				"path":   "/metrics",
				"scheme": "http",
				"relabelings": []any{
					map[string]any{
						"sourceLabels": []any{"__meta_kubernetes_pod_label_" + sanitizeLabelName(LabelInstance)},
						"targetLabel":  "cluster",
						"action":       "replace",
					},
					map[string]any{
						"sourceLabels": []any{"__meta_kubernetes_pod_name"},
						"targetLabel":  "member",
						"action":       "replace",
					},
				},
			}},
		},
	}}
	u.SetGroupVersionKind(PodMonitorGVK)
	return u
}

// ContinuousBackupPodMonitorName is the PodMonitor of the cluster's continuous backup agent.
func ContinuousBackupPodMonitorName(c *etcdv1beta1.EtcdCluster) string {
	return ContinuousBackupName(c)
}

// ContinuousBackupPodMonitor has Prometheus scrape the continuous backup agent's /metrics
// (etcd_operator_continuous_backup_*) on its container port "status" (8080): plain HTTP without
// authentication, as the agent serves /status beside it; neither serves data. A PodMonitor of its own, not a
// second endpoint of the members': its series carry job="continuous-backup" (the agent pod's component
// label), so the members' job "etcd" (up, the rules on etcd's metrics) still counts members only. The agent
// labels its series with namespace and cluster itself: honorLabels keeps them (the scrape's own would
// rename them exported_*); the scrape's up series gets cluster from the pod's instance label, as the
// members' does.
func ContinuousBackupPodMonitor(c *etcdv1beta1.EtcdCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": monitoringMetadata(c, ContinuousBackupPodMonitorName(c), ComponentContinuousBackup),
		"spec": map[string]any{
			"jobLabel": LabelComponent,
			"selector": map[string]any{"matchLabels": stringMap(Labels(c, ComponentContinuousBackup))},
			"podMetricsEndpoints": []any{map[string]any{
				"port":        "status",
				"path":        "/metrics",
				"scheme":      "http",
				"honorLabels": true,
				"relabelings": []any{
					map[string]any{
						"sourceLabels": []any{"__meta_kubernetes_pod_label_" + sanitizeLabelName(LabelInstance)},
						"targetLabel":  "cluster",
						"action":       "replace",
					},
				},
			}},
		},
	}}
	u.SetGroupVersionKind(PodMonitorGVK)
	return u
}

// monitoringMetadata is the metadata of the cluster's prometheus-operator objects: in its namespace, with its
// labels (of the component they watch), owned by it.
func monitoringMetadata(c *etcdv1beta1.EtcdCluster, name, component string) map[string]any {
	return map[string]any{
		"name":            name,
		"namespace":       c.Namespace,
		"labels":          stringMap(Labels(c, component)),
		"ownerReferences": []any{ownerReferenceMap(c)},
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ownerReferenceMap is OwnerReference(c) as unstructured content.
func ownerReferenceMap(c *etcdv1beta1.EtcdCluster) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(OwnerReference(c))
	if err != nil {
		panic(err) // an apply configuration of strings and bools always converts
	}
	return m
}

// sanitizeLabelName is how Prometheus's Kubernetes discovery turns a label key into part of a meta label
// name: every character outside [a-zA-Z0-9_] becomes "_".
func sanitizeLabelName(key string) string {
	b := []byte(key)
	for i, ch := range b {
		if ch != '_' && (ch < 'a' || ch > 'z') && (ch < 'A' || ch > 'Z') && (ch < '0' || ch > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}
