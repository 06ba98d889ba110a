// Package resources builds the Kubernetes objects of an EtcdCluster as server-side apply configurations.
// Every function here is pure: same cluster and options in, same objects out. The controller applies them;
// tests compare them with golden files.
package resources

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membership"
)

// Ports etcd listens on.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
	// ClientHTTPPort serves etcd's HTTP endpoints of the client side (the JSON gateway /v3/*, /health,
	// /version) over TLS when they are split off the client port (SplitsClientHTTP); ClientPort then
	// serves gRPC alone.
	ClientHTTPPort = 2382
)

// Label keys and values shared by every managed object.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	AppName         = "etcd"
	ManagedBy       = "etcd-operator"
	ComponentEtcd   = "member"
	ComponentBackup = "backup"
	ComponentTLS    = "tls"
	ComponentAuth   = "auth"
)

// Paths inside the etcd container.
const (
	DataVolumeName = "data"
	DataMountPath  = "/var/lib/etcd"
	DataDir        = DataMountPath + "/data"
)

// Options are the operator-wide settings the builders need.
type Options struct {
	// ClusterDomain is the cluster's DNS domain, used in members' stable peer and client URLs.
	ClusterDomain string
	// OperatorImage runs backup jobs.
	OperatorImage string
	// RelatedImages maps etcd versions ("3.5.35") to the image to run for clusters that use the default
	// repository: OLM rewrites these (RELATED_IMAGE_ETCD_*) to digests or a mirror in disconnected installs.
	RelatedImages map[string]string
	// OperatorNamespace is where the operator runs (its NetworkPolicy peer); empty allows any namespace.
	OperatorNamespace string
	// Probes are the etcd container's probe settings (zero: DefaultProbeSettings).
	Probes ProbeSettings
}

// ProbeSettings are the etcd container's probe periods, timeouts (seconds) and failure thresholds, and the
// paths of its startup and liveness probes. A running cluster keeps the settings its template has until it
// rolls anyway: new settings alone would restart every member of every cluster on an operator upgrade.
type ProbeSettings struct {
	StartupPeriod, StartupTimeout, StartupFailures       int32
	ReadinessPeriod, ReadinessTimeout, ReadinessFailures int32
	StartupPath, LivenessPath                            string
}

// DefaultProbeSettings probe every second, so a started member is seen within a second (scaling, healing and
// rolling wait for it), with the budgets kept in time: 10 min to start (a large database loads), and 15 s
// of failed readiness before a member leaves the client Service. A timeout longer than the period would
// stretch them: a member that lost quorum does not answer /readyz at all, so each failure takes the
// whole timeout.
func DefaultProbeSettings() ProbeSettings {
	return ProbeSettings{StartupPeriod: 1, StartupTimeout: 1, StartupFailures: 600,
		ReadinessPeriod: 1, ReadinessTimeout: 1, ReadinessFailures: 15,
		StartupPath: StartupProbePath, LivenessPath: LivenessProbePath}
}

// The startup and liveness probes' paths. etcd fails /health on every member for an alarm raised against any
// one: CORRUPT is excluded where a failure restarts the member, which would restart them all and cure
// nothing; liveness uses a serializable check so that losing quorum does not make the kubelet kill healthy
// members.
const (
	StartupProbePath  = "/health?exclude=CORRUPT&serializable=true"
	LivenessProbePath = "/health?exclude=NOSPACE&exclude=CORRUPT&serializable=true"
)

func (o Options) probes() ProbeSettings {
	if o.Probes == (ProbeSettings{}) {
		return DefaultProbeSettings()
	}
	return o.Probes
}

// DefaultRepository is the official etcd image repository.
const DefaultRepository = "gcr.io/etcd-development/etcd"

// DefaultOptions returns the options used when the operator is not told otherwise.
func DefaultOptions() Options {
	return Options{ClusterDomain: "cluster.local", OperatorImage: "ghcr.io/seedops/etcd-operator:v0.1.0"}
}

// Names of the objects of a cluster.
func PeerServiceName(c *etcdv1beta1.EtcdCluster) string    { return c.Name }
func ClientServiceName(c *etcdv1beta1.EtcdCluster) string  { return c.Name + "-client" }
func ConfigMapName(c *etcdv1beta1.EtcdCluster) string      { return c.Name + "-config" }
func StatefulSetName(c *etcdv1beta1.EtcdCluster) string    { return c.Name }
func PDBName(c *etcdv1beta1.EtcdCluster) string            { return c.Name }
func BackupCronJobName(c *etcdv1beta1.EtcdCluster) string  { return c.Name + "-backup" }
func PodMonitorName(c *etcdv1beta1.EtcdCluster) string     { return c.Name }
func PrometheusRuleName(c *etcdv1beta1.EtcdCluster) string { return c.Name }

// MemberName is the pod (and etcd member) name of ordinal i.
func MemberName(c *etcdv1beta1.EtcdCluster, i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }

// MemberOrdinal is the ordinal of a member name "<cluster>-<n>" as MemberName writes it, or -1 for any other
// name (a pod or claim of another cluster sharing the prefix, "01", "-1", "+1").
func MemberOrdinal(c *etcdv1beta1.EtcdCluster, name string) int {
	rest, ok := strings.CutPrefix(name, c.Name+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// MemberHost is member i's stable DNS name through the headless peer Service.
func MemberHost(c *etcdv1beta1.EtcdCluster, i int, o Options) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", MemberName(c, i), PeerServiceName(c), c.Namespace, o.ClusterDomain)
}

// MemberPeerURL is the URL member i advertises to its peers.
func MemberPeerURL(c *etcdv1beta1.EtcdCluster, i int, o Options) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c), MemberHost(c, i, o), PeerPort)
}

// MemberClientURL is the URL member i advertises to clients.
func MemberClientURL(c *etcdv1beta1.EtcdCluster, i int, o Options) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c), MemberHost(c, i, o), ClientPort)
}

// ClientEndpoint is the load-balanced client URL of the cluster.
func ClientEndpoint(c *etcdv1beta1.EtcdCluster, o Options) string {
	return fmt.Sprintf("%s://%s.%s.svc.%s:%d", scheme(c), ClientServiceName(c), c.Namespace, o.ClusterDomain, ClientPort)
}

// InitialCluster is etcd's --initial-cluster for members 0..n-1.
func InitialCluster(c *etcdv1beta1.EtcdCluster, n int, o Options) string {
	parts := make([]string, 0, n)
	for i := range n {
		parts = append(parts, MemberName(c, i)+"="+MemberPeerURL(c, i, o))
	}
	return strings.Join(parts, ",")
}

// Image is the etcd image for the cluster's version: <repository>:v<version>, or the related image the
// operator was given for that version when the cluster uses the default repository.
func Image(c *etcdv1beta1.EtcdCluster, o Options) string {
	if img, ok := o.RelatedImages[c.Spec.Version]; ok && c.Spec.Repository == DefaultRepository {
		return img
	}
	return c.Spec.Repository + ":v" + c.Spec.Version
}

// RelatedImagesFromEnv reads RELATED_IMAGE_ETCD_* variables ("KEY=repo:vX.Y.Z" or a digest reference
// with the version in the variable's value tag) into a version-to-image map.
func RelatedImagesFromEnv(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(key, "RELATED_IMAGE_ETCD_") || value == "" {
			continue
		}
		ref := value
		if i := strings.Index(ref, "@"); i >= 0 {
			ref = ref[:i]
		}
		if i := strings.LastIndex(ref, ":v"); i >= 0 && !strings.Contains(ref[i:], "/") {
			out[ref[i+2:]] = value
		}
	}
	return out
}

// Quorum is the number of voting members that must agree: a strict majority.
func Quorum(members int32) int32 { return int32(membership.Quorum(int(members))) }

// SelectorLabels select a cluster's member pods. They never change, because selectors are immutable.
func SelectorLabels(c *etcdv1beta1.EtcdCluster) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: c.Name, LabelComponent: ComponentEtcd}
}

// Labels are put on every object of a cluster; the operator's cache only sees objects carrying ManagedBy.
func Labels(c *etcdv1beta1.EtcdCluster, component string) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: c.Name, LabelComponent: component, LabelManagedBy: ManagedBy}
}

// OwnerReference makes the cluster the controlling owner, so garbage collection removes the object with it.
func OwnerReference(c *etcdv1beta1.EtcdCluster) *metav1ac.OwnerReferenceApplyConfiguration {
	return ownerReferenceTo(c, "EtcdCluster")
}

func ownerReferenceTo(o metav1.Object, kind string) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(etcdv1beta1.GroupVersion.String()).
		WithKind(kind).
		WithName(o.GetName()).
		WithUID(o.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
