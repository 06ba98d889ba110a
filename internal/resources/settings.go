package resources

import (
	"slices"
	"strconv"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// settingsEnv turns spec.etcd's fields into ETCD_* variables in the pod template. They live in the
// template rather than the ConfigMap because a member reads them only when it starts: a change to the
// template is what makes the operator restart the members one at a time. A variable set here wins over the
// ConfigMap's of the same name (the kubelet lets env override envFrom), and a field left unset adds nothing,
// so clusters that do not use spec.etcd keep their template and are not restarted.
func settingsEnv(c *etcdv1beta1.EtcdCluster) []*corev1ac.EnvVarApplyConfiguration {
	s := c.Spec.Etcd
	var env []*corev1ac.EnvVarApplyConfiguration
	add := func(name, value string) {
		env = append(env, corev1ac.EnvVar().WithName(name).WithValue(value))
	}
	if s.HeartbeatInterval != nil {
		add("ETCD_HEARTBEAT_INTERVAL", strconv.FormatInt(s.HeartbeatInterval.Milliseconds(), 10))
	}
	if s.ElectionTimeout != nil {
		add("ETCD_ELECTION_TIMEOUT", strconv.FormatInt(s.ElectionTimeout.Milliseconds(), 10))
	}
	if s.SnapshotCount != nil {
		add("ETCD_SNAPSHOT_COUNT", strconv.FormatInt(*s.SnapshotCount, 10))
	}
	if s.MaxRequestSize != nil {
		add("ETCD_MAX_REQUEST_BYTES", strconv.FormatInt(s.MaxRequestSize.Value(), 10))
	}
	if s.QuotaBackendSize != nil {
		add("ETCD_QUOTA_BACKEND_BYTES", strconv.FormatInt(QuotaBackendBytes(c), 10))
	}
	if a := s.AutoCompaction; a != nil {
		add("ETCD_AUTO_COMPACTION_MODE", strings.ToLower(string(a.Mode)))
		add("ETCD_AUTO_COMPACTION_RETENTION", a.Retention)
	}
	return env
}

// extraFlagArgs turns spec.etcd.extraFlags into command-line flags, sorted by name so the template does not
// change with map order. Flags rather than variables: etcd only warns about an ETCD_* variable it does not
// know, but refuses an unknown flag, so a typo stops the first restarted member instead of being ignored.
func extraFlagArgs(c *etcdv1beta1.EtcdCluster) []string {
	names := make([]string, 0, len(c.Spec.Etcd.ExtraFlags))
	for name := range c.Spec.Etcd.ExtraFlags {
		names = append(names, name)
	}
	slices.Sort(names)
	args := make([]string, 0, len(names))
	for _, name := range names {
		args = append(args, "--"+name+"="+c.Spec.Etcd.ExtraFlags[name])
	}
	return args
}
