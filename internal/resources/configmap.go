package resources

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
)

// MemberConfig is the cluster-wide part of etcd's configuration. etcd reads --initial-cluster* only when
// its data directory is empty, so changing it never disturbs a member that already has data.
type MemberConfig struct {
	// InitialCluster is "name=peerURL,..." for the members a new (empty) member must know.
	InitialCluster string
	// InitialClusterState is "new" while bootstrapping, "existing" once the cluster has formed.
	InitialClusterState string
	// ForceNewCluster, during a quorum-loss recovery, names the member to start alone on its data (etcd's
	// --force-new-cluster) and the pod of it that started before; the member gate holds every other member
	// with data back meanwhile. It is in the configuration for as long as that one start takes, and it must
	// be written before that pod is deleted: the new pod's gate reads it when it starts, and only that gate
	// hands the start to its own etcd (membergate.WriteForceTicket). --force-new-cluster itself is never
	// here: every container reads this configuration at every start.
	ForceNewCluster *membership.ForceNewCluster
	// Restore, during a quorum-loss recovery from a backup, has every member move its data aside and
	// restore the snapshot, as a new cluster whose initial cluster token names the recovery.
	Restore *membership.RestoreRecovery
	// LateBootstrap, with state "new" once the cluster formed, names the initial members that never
	// started: only they may still bootstrap (membergate.EnvLateBootstrap).
	LateBootstrap []string
}

// The record of a recovery from a backup in the members' configuration: its name, the snapshot and its
// revision, whether a continuous backup is replayed into that snapshot first, and why a full backup is
// restored in its place. Members do not act on it (their pods' restore step and gate carry the recovery's
// name).
const (
	restoreRecoveryID       = "RESTORE_RECOVERY"
	restoreRecoveryFrom     = "RESTORE_RECOVERY_FROM"
	restoreRecoveryRevision = "RESTORE_RECOVERY_REVISION"
	restoreRecoveryReplay   = "RESTORE_RECOVERY_REPLAY"
	restoreRecoveryFallback = "RESTORE_RECOVERY_FALLBACK"
)

// RestoreRecoveryOf reads a recovery from a backup back from the members' configuration (nil when there
// is none).
func RestoreRecoveryOf(data map[string]string) *membership.RestoreRecovery {
	id := data[restoreRecoveryID]
	if id == "" {
		return nil
	}
	rev, _ := strconv.ParseInt(data[restoreRecoveryRevision], 10, 64)
	return &membership.RestoreRecovery{ID: id, Location: data[restoreRecoveryFrom], Revision: rev,
		Replay: data[restoreRecoveryReplay] == "true", Fallback: data[restoreRecoveryFallback]}
}

// ForceNewClusterOf reads a quorum-loss recovery's instruction back from the members' configuration (nil
// when there is none). A configuration an older operator wrote has etcd's own setting beside it.
func ForceNewClusterOf(data map[string]string) *membership.ForceNewCluster {
	if data[membergate.EnvForceNewCluster] == "" && data[membergate.EnvForceNewClusterMember] == "" {
		return nil
	}
	return &membership.ForceNewCluster{Member: data[membergate.EnvForceNewClusterMember], OldPod: data[membergate.EnvForceNewClusterOldPod]}
}

// BootstrapConfig is the static initial configuration of a new cluster of n members.
func BootstrapConfig(c *etcdv1beta1.EtcdCluster, n int, o Options) MemberConfig {
	return MemberConfig{InitialCluster: InitialCluster(c, n, o), InitialClusterState: membership.StateNew}
}

// ConfigMap holds etcd's environment configuration shared by all members.
func ConfigMap(c *etcdv1beta1.EtcdCluster, mc MemberConfig) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(ConfigMapName(c), c.Namespace).
		WithLabels(Labels(c, ComponentEtcd)).
		WithOwnerReferences(OwnerReference(c)).
		WithData(configData(c, mc))
}

func configData(c *etcdv1beta1.EtcdCluster, mc MemberConfig) map[string]string {
	data := map[string]string{
		"ETCD_DATA_DIR":                  DataDir,
		"ETCD_LISTEN_PEER_URLS":          fmt.Sprintf("%s://0.0.0.0:%d", scheme(c), PeerPort),
		"ETCD_LISTEN_CLIENT_URLS":        fmt.Sprintf("%s://0.0.0.0:%d", scheme(c), ClientPort),
		"ETCD_LISTEN_METRICS_URLS":       fmt.Sprintf("http://0.0.0.0:%d", MetricsPort),
		"ETCD_INITIAL_CLUSTER":           mc.InitialCluster,
		"ETCD_INITIAL_CLUSTER_STATE":     mc.InitialClusterState,
		"ETCD_INITIAL_CLUSTER_TOKEN":     initialClusterToken(c, mc.Restore),
		"ETCD_AUTO_COMPACTION_MODE":      "periodic",
		"ETCD_AUTO_COMPACTION_RETENTION": "1h",
		"ETCD_QUOTA_BACKEND_BYTES":       strconv.FormatInt(QuotaBackendBytes(c), 10),
	}
	if f := mc.ForceNewCluster; f != nil {
		data[membergate.EnvForceNewClusterMember] = f.Member
		data[membergate.EnvForceNewClusterOldPod] = f.OldPod
	}
	if len(mc.LateBootstrap) > 0 {
		data[membergate.EnvLateBootstrap] = strings.Join(mc.LateBootstrap, ",")
	}
	if r := mc.Restore; r != nil {
		data[restoreRecoveryID] = r.ID
		data[restoreRecoveryFrom] = r.Location
		data[restoreRecoveryRevision] = strconv.FormatInt(r.Revision, 10)
		if r.Replay {
			data[restoreRecoveryReplay] = "true"
		}
		if r.Fallback != "" {
			data[restoreRecoveryFallback] = r.Fallback
		}
	}
	if TLSEnabled(c) {
		maps.Copy(data, tlsConfigEnv(c))
		// With the cluster's own CA, only its members hold a peer certificate, so etcd's extra check that
		// a peer's address reverse-resolves to a name in its certificate adds nothing; and a joining
		// member's address has no such record until its endpoint is published, so with the check every
		// learner is refused, exits ("discovery failed") and loses a crash-loop back-off (~20 s per scale
		// step). A CA the user brings, or a cert-manager issuer, may sign other clusters' certificates: the
		// check stays on.
		if c.Spec.TLS.CASecretName == "" && c.Spec.TLS.IssuerRef == nil {
			data[peerSkipSANEnv(c.Spec.Version)] = "true"
		}
	}
	if SplitsClientHTTP(c) {
		data[ClientHTTPURLsEnv] = fmt.Sprintf("https://0.0.0.0:%d", ClientHTTPPort)
	}
	return data
}

// ClientHTTPURLsEnv is etcd's --listen-client-http-urls (etcd 3.5.8 and later).
const ClientHTTPURLsEnv = "ETCD_LISTEN_CLIENT_HTTP_URLS"

// SplitsClientHTTP reports whether c's members serve etcd's HTTP endpoints of the client side on
// ClientHTTPPort instead of ClientPort. With TLS on the client port and no HTTP listener of its own, etcd
// serves gRPC through net/http's HTTP/2 server (grpc.Server.ServeHTTP), which on etcd 3.5 costs 20-40 %
// of the write throughput (tests/bench/notes.md); with the split, ClientPort is gRPC's own server. Without
// TLS, etcd already hands gRPC to its own server. etcd before 3.5.8 does not know the setting (it would
// only warn and keep everything on ClientPort).
//
// The setting lives in the ConfigMap, not the pod template, so an operator upgrade restarts no member:
// a member takes it up at its next start (a new member, a version upgrade, a spec.etcd change, a pod
// deleted or evicted). Certificate renewal restarts nobody, so it does not bring the split either.
func SplitsClientHTTP(c *etcdv1beta1.EtcdCluster) bool {
	return TLSEnabled(c) && versionAtLeast(c.Spec.Version, 3, 5, 8)
}

// initialClusterToken names the cluster object (its UID: a cluster deleted and created again under the same
// name is another cluster) and, while members restore in a quorum-loss recovery, the recovery: etcd derives
// member and cluster IDs from it, so the restored cluster shares no ID with the one that was lost. etcd
// reads it only when it bootstraps a member, so the token going back afterwards changes nothing.
func initialClusterToken(c *etcdv1beta1.EtcdCluster, r *membership.RestoreRecovery) string {
	if r != nil {
		return RestoreRecoveryToken(c, r.ID)
	}
	return c.Namespace + "/" + c.Name + "/" + string(c.UID)
}

// InitialClusterToken is the initial cluster token c's members bootstrap under (outside a recovery).
func InitialClusterToken(c *etcdv1beta1.EtcdCluster) string { return initialClusterToken(c, nil) }

// RestoreRecoveryToken is the initial cluster token of c's members restored by recovery id.
func RestoreRecoveryToken(c *etcdv1beta1.EtcdCluster, id string) string {
	return initialClusterToken(c, nil) + "/" + id
}

// peerSkipSANEnv names the setting that skips the peer address check: experimental before etcd 3.6.
func peerSkipSANEnv(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) == 3 {
		major, errMajor := strconv.Atoi(parts[0])
		minor, errMinor := strconv.Atoi(parts[1])
		if errMajor == nil && errMinor == nil && (major < 3 || major == 3 && minor < 6) {
			return "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
		}
	}
	return "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
}

// Space quota bounds. etcd's own default is 2 GiB; its documentation suggests at most 8 GiB, beyond which
// snapshots and defragmentation take too long for a healthy cluster.
const (
	EtcdDefaultQuotaBytes int64 = 2 << 30
	maxQuotaBytes         int64 = 8 << 30
	// quotaPercentOfVolume: a defragmentation writes a second copy of the database beside the first, and
	// the volume also holds the write-ahead log (etcd keeps 5 files of 64 MiB) and the snapshot a member
	// receives when it falls behind. Two copies of the quota at 40% each leave a fifth of the volume.
	quotaPercentOfVolume = 40
)

// QuotaBackendBytes is the database space quota of c's members: spec.etcd.quotaBackendSize, or else 40% of
// storageSize, at most 8 GiB. Once a member's database reaches it, etcd raises the NOSPACE alarm and refuses
// writes until the operator has compacted, defragmented and disarmed (internal/maintenance). Members read it
// when they start: the derived quota reaches a running member at its next restart; a quotaBackendSize
// change restarts the members (settingsEnv).
func QuotaBackendBytes(c *etcdv1beta1.EtcdCluster) int64 {
	if q := c.Spec.Etcd.QuotaBackendSize; q != nil {
		return q.Value()
	}
	return min(maxQuotaBytes, c.Spec.StorageSize.Value()*quotaPercentOfVolume/100)
}
