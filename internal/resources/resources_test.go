package resources

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	alertrules "github.com/seedops/etcd-operator/config/prometheus"
	"github.com/seedops/etcd-operator/internal/membergate"
	"github.com/seedops/etcd-operator/internal/membership"
)

var update = flag.Bool("update", false, "rewrite golden files")

// designCluster is the README's sample cluster with the defaults the API server fills in.
func designCluster() *etcdv1beta1.EtcdCluster {
	return &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: "db", UID: "0b7e6f1c-0000-4000-8000-000000000001"},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Version:            "3.5.9",
			Replicas:           3,
			StorageSize:        resource.MustParse("10Gi"),
			BackupSchedule:     "0 2 * * *",
			Repository:         "gcr.io/etcd-development/etcd",
			Backup:             etcdv1beta1.BackupSpec{Retention: 7},
			PVCRetentionPolicy: etcdv1beta1.PVCRetentionPolicy{WhenDeleted: etcdv1beta1.RetainVolume, WhenScaled: etcdv1beta1.RetainVolume},
		},
	}
}

// customCluster sets every optional pod setting, so the golden file shows how each one lands.
func customCluster() *etcdv1beta1.EtcdCluster {
	c := designCluster()
	c.Name = "custom"
	class := "fast-ssd"
	c.Spec.Replicas = 5
	c.Spec.StorageClassName = &class
	c.Spec.Repository = "registry.example.com/etcd"
	c.Spec.PVCRetentionPolicy = etcdv1beta1.PVCRetentionPolicy{WhenDeleted: etcdv1beta1.DeleteVolume, WhenScaled: etcdv1beta1.DeleteVolume}
	c.Spec.Pod = etcdv1beta1.PodSpec{
		Labels:      map[string]string{"team": "storage"},
		Annotations: map[string]string{"prometheus.io/scrape": "true"},
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
		},
		NodeSelector:      map[string]string{"node-role.kubernetes.io/etcd": ""},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}},
		PriorityClassName: "system-cluster-critical",
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   corev1.LabelTopologyZone,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "custom"}},
		}}}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: "custom"}},
		}},
	}
	return c
}

// s3Cluster backs up to an S3 bucket with its own CA.
func s3Cluster() *etcdv1beta1.EtcdCluster {
	c := designCluster()
	c.Spec.Backup.S3 = &etcdv1beta1.S3BackupDestination{
		Endpoint: "https://minio.backup.svc:9000", Bucket: "etcd", Prefix: "prod", Region: "eu-west-1",
		CredentialsSecretName: "s3-credentials", CASecretName: "s3-ca",
	}
	return c
}

// plaintextCluster runs without TLS, as clusters created before TLS existed do: its objects must be exactly
// what the operator built before TLS (the plaintext-* golden files are those files, unchanged but for the
// default placement, which restarts no member: the controller counts a pod whose revision differs only in
// placement as up to date), so that upgrading the operator never restarts such a cluster's members.
func plaintextCluster() *etcdv1beta1.EtcdCluster {
	c := designCluster()
	c.Spec.TLS.Enabled = new(bool)
	return c
}

// tunedCluster sets every spec.etcd field: they land in the etcd container's env and args. Clusters that
// leave spec.etcd empty keep the design-* templates unchanged, so upgrading the operator restarts nobody.
func tunedCluster() *etcdv1beta1.EtcdCluster {
	c := designCluster()
	c.Name = "tuned"
	c.Spec.Etcd = etcdv1beta1.EtcdSettingsSpec{
		HeartbeatInterval: &metav1.Duration{Duration: 250 * time.Millisecond},
		ElectionTimeout:   &metav1.Duration{Duration: 2500 * time.Millisecond},
		SnapshotCount:     ptr.To[int64](20000),
		MaxRequestSize:    ptr.To(resource.MustParse("4Mi")),
		QuotaBackendSize:  ptr.To(resource.MustParse("3Gi")),
		AutoCompaction:    &etcdv1beta1.AutoCompactionSpec{Mode: etcdv1beta1.AutoCompactionRevision, Retention: "10000"},
		ExtraFlags:        map[string]string{"log-level": "warn", "experimental-compaction-batch-limit": "1000"},
	}
	return c
}

// onDemandBackup overrides the cluster's destination with a bucket.
func onDemandBackup() *etcdv1beta1.EtcdBackup {
	b := &etcdv1beta1.EtcdBackup{Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: "etcd", Destination: &etcdv1beta1.BackupDestination{
		S3: &etcdv1beta1.S3BackupDestination{Endpoint: "http://minio.backup.svc:9000", Bucket: "etcd", CredentialsSecretName: "s3-credentials"},
	}}}
	b.Name, b.Namespace, b.UID = "before-upgrade", "prod", "22222222-2222-2222-2222-222222222222"
	return b
}

// clusterRuleGroups are the rule groups of the operator's alerting rules file that each cluster gets.
func clusterRuleGroups(t *testing.T) []RuleGroup {
	t.Helper()
	groups, err := ClusterRuleGroups(alertrules.AlertRules)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// TestGolden compares every builder's output with its golden file (make update-golden rewrites them).
// continuousCluster backs up to S3, continuously too, with a size bound.
func continuousCluster() *etcdv1beta1.EtcdCluster {
	c := s3Cluster()
	size := resource.MustParse("10Gi")
	c.Spec.Backup.Continuous = &etcdv1beta1.ContinuousBackupSpec{Enabled: true,
		SegmentInterval: &metav1.Duration{Duration: 5 * time.Second}, MaxSize: &size}
	return c
}

// issuedCluster takes its certificates from a cert-manager Issuer.
func issuedCluster() *etcdv1beta1.EtcdCluster {
	c := designCluster()
	c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "etcd-ca", Kind: "Issuer"}
	return c
}

func TestGolden(t *testing.T) {
	o := DefaultOptions()
	// New StatefulSets carry the member gate; custom-statefulset.yaml stands for a cluster created before
	// it, whose template keeps no gate until its next roll.
	cases := map[string]any{
		"design-statefulset.yaml":           StatefulSet(designCluster(), 3, o, nil, CurrentMemberGate(o)),
		"design-peer-service.yaml":          PeerService(designCluster()),
		"design-client-service.yaml":        ClientService(designCluster()),
		"design-configmap.yaml":             ConfigMap(designCluster(), BootstrapConfig(designCluster(), 3, o)),
		"design-pdb.yaml":                   PodDisruptionBudget(designCluster(), 3),
		"design-networkpolicy.yaml":         NetworkPolicy(designCluster(), Options{ClusterDomain: "cluster.local", OperatorNamespace: "etcd-operator-system"}),
		"design-cronjob.yaml":               BackupCronJob(designCluster(), o),
		"design-podmonitor.yaml":            PodMonitor(designCluster()),
		"continuous-backup-podmonitor.yaml": ContinuousBackupPodMonitor(continuousCluster()),
		"design-prometheusrule.yaml":        PrometheusRule(designCluster(), clusterRuleGroups(t)),
		"custom-statefulset.yaml":           StatefulSet(customCluster(), 5, o, nil, MemberGate{}),
		"tuned-statefulset.yaml":            StatefulSet(tunedCluster(), 3, o, nil, CurrentMemberGate(o)),
		"design-backup-pvc.yaml":            BackupPVC(designCluster(), BackupDestination(designCluster(), nil)),
		"s3-cronjob.yaml":                   BackupCronJob(s3Cluster(), o),
		"plaintext-statefulset.yaml":        StatefulSet(plaintextCluster(), 3, o, nil, CurrentMemberGate(o)),
		"plaintext-configmap.yaml":          ConfigMap(plaintextCluster(), BootstrapConfig(plaintextCluster(), 3, o)),
		"plaintext-cronjob.yaml":            BackupCronJob(plaintextCluster(), o),
		"s3-backup-job.yaml":                BackupJob(designCluster(), onDemandBackup(), o),
		"restored-statefulset.yaml":         StatefulSet(designCluster(), 3, o, &RestoreSource{Destination: BackupDestination(s3Cluster(), nil), Key: "prod/etcd/scheduled/etcd-20261122T020000Z-r42.db"}, CurrentMemberGate(o)),
		"pvc-restored-statefulset.yaml": StatefulSet(designCluster(), 3, o,
			ptr.To(claimRestore()), CurrentMemberGate(o)),
		"s3-continuous-backup-statefulset.yaml": ContinuousBackupStatefulSet(continuousCluster(), o),
		"snapshot-server-statefulset.yaml":      SnapshotServerStatefulSet(customCluster(), claimRestore(), o),
		"snapshot-server-service.yaml":          SnapshotServerService(designCluster()),
		"snapshot-server-networkpolicy.yaml":    SnapshotServerNetworkPolicy(designCluster()),
		"snapshot-server-secret.yaml":           SnapshotServerSecret(designCluster(), "not-a-real-token"),
		"s3-point-in-time-job.yaml": PointInTimeJob(designCluster(), etcdv1beta1.BackupSource{
			S3: s3Cluster().Spec.Backup.S3, Key: "backups/prod/old/continuous/",
			PointInTime: &etcdv1beta1.PointInTime{Revision: 4242, ClusterUID: "0b5e7c1e-old"}}, o),
		"pvc-point-in-time-recovery-job.yaml": PointInTimeRecoveryJob(designCluster(), "restore-20261122T120500Z", 97, o),
		"issued-peer-certificate.yaml":        Certificate(issuedCluster(), LeafCertificates(issuedCluster(), o)[1]),
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run make update-golden)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from golden file (-want +got):\n%s", name, diff)
			}
		})
	}
}

// TestPointInTimeRecoveryNames: a recovery replays the continuous backup where the agent stores it (the
// destination's prefix, then <namespace>/<cluster>/continuous/), into a key and by a Job of its own.
func TestPointInTimeRecoveryNames(t *testing.T) {
	for _, tc := range []struct {
		c            *etcdv1beta1.EtcdCluster
		key, loc     string
		recoveryKeys string
	}{
		{designCluster(), "db/prod-etcd/continuous/", "pvc://prod-etcd-backups/db/prod-etcd/continuous/",
			"db/prod-etcd/point-in-time/prod-etcd-0b7e6f1c-0000-4000-8000-000000000001-restore-1.db"},
		{continuousCluster(), "prod/db/prod-etcd/continuous/", "s3://etcd/prod/db/prod-etcd/continuous/",
			"prod/db/prod-etcd/point-in-time/prod-etcd-0b7e6f1c-0000-4000-8000-000000000001-restore-1.db"},
	} {
		d := BackupDestination(tc.c, nil)
		if got := ContinuousBackupKey(tc.c); got != tc.key {
			t.Errorf("continuous backup key %q, want %q", got, tc.key)
		}
		if got := Location(d, ContinuousBackupKey(tc.c)); got != tc.loc {
			t.Errorf("continuous backup location %q, want %q", got, tc.loc)
		}
		if got := PointInTimeRecoveryKey(tc.c, d, "restore-1"); got != tc.recoveryKeys {
			t.Errorf("recovery key %q, want %q", got, tc.recoveryKeys)
		}
		if PointInTimeRecoveryKey(tc.c, d, "restore-1") == PointInTimeRecoveryKey(tc.c, d, "restore-2") || PointInTimeRecoveryKey(tc.c, d, "restore-1") == PointInTimeKey(tc.c, d) {
			t.Errorf("recovery keys must differ per recovery and from the bootstrap's")
		}
	}
	c := designCluster()
	if a, b := PointInTimeRecoveryJobName(c, "restore-1"), PointInTimeRecoveryJobName(c, "restore-2"); a == b || a == PointInTimeJobName(c) {
		t.Errorf("recovery Jobs %s and %s: want one per recovery, apart from the bootstrap's", a, b)
	}
}

func TestQuorum(t *testing.T) {
	for members, want := range map[int32]int32{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Quorum(members); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", members, got, want)
		}
	}
}

func TestPDBKeepsQuorum(t *testing.T) {
	for _, n := range []int32{1, 3, 5, 7} {
		pdb := PodDisruptionBudget(designCluster(), n)
		if got := pdb.Spec.MinAvailable.IntValue(); int32(got) != n/2+1 {
			t.Errorf("replicas %d: minAvailable %d, want a majority %d", n, got, n/2+1)
		}
	}
}

func TestInitialCluster(t *testing.T) {
	got := InitialCluster(designCluster(), 3, DefaultOptions())
	want := "prod-etcd-0=https://prod-etcd-0.prod-etcd.db.svc.cluster.local:2380," +
		"prod-etcd-1=https://prod-etcd-1.prod-etcd.db.svc.cluster.local:2380," +
		"prod-etcd-2=https://prod-etcd-2.prod-etcd.db.svc.cluster.local:2380"
	if got != want {
		t.Errorf("InitialCluster:\n got %s\nwant %s", got, want)
	}
}

func TestPodPassesRestrictedBasics(t *testing.T) {
	sts := StatefulSet(customCluster(), 5, DefaultOptions(), nil, CurrentMemberGate(DefaultOptions()))
	restored := StatefulSet(designCluster(), 3, DefaultOptions(), &RestoreSource{Destination: BackupDestination(s3Cluster(), nil), Key: "k"}, CurrentMemberGate(DefaultOptions()))
	pods := map[string]*corev1ac.PodSpecApplyConfiguration{
		"member":           sts.Spec.Template.Spec,
		"restored member":  restored.Spec.Template.Spec,
		"scheduled backup": BackupCronJob(s3Cluster(), DefaultOptions()).Spec.JobTemplate.Spec.Template.Spec,
		"on-demand backup": BackupJob(designCluster(), onDemandBackup(), DefaultOptions()).Spec.Template.Spec,
	}
	for name, pod := range pods {
		if pod.SecurityContext == nil || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Fatalf("%s: pod security context must run as non-root with the RuntimeDefault seccomp profile", name)
		}
		for _, c := range append(append([]corev1ac.ContainerApplyConfiguration{}, pod.InitContainers...), pod.Containers...) {
			sc := c.SecurityContext
			if sc == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("%s: container %s must drop ALL capabilities and disallow privilege escalation", name, *c.Name)
			}
		}
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s: volume %s is a hostPath", name, *v.Name)
			}
		}
	}
	if init := restored.Spec.Template.Spec.InitContainers; len(init) != 2 || *init[0].Name != MemberGateContainerName || *init[1].Name != RestoreContainerName {
		t.Fatal("a restored cluster's members need the member gate, then the restore init container")
	}
	for k := range sts.Spec.Template.Labels {
		if _, ok := SelectorLabels(customCluster())[k]; ok && sts.Spec.Template.Labels[k] != SelectorLabels(customCluster())[k] {
			t.Errorf("user labels must not override selector label %s", k)
		}
	}
}

func TestRelatedImages(t *testing.T) {
	o := DefaultOptions()
	o.RelatedImages = RelatedImagesFromEnv([]string{
		"RELATED_IMAGE_ETCD_3_5=mirror.example.com/etcd:v3.5.9",
		"RELATED_IMAGE_ETCD_3_6=mirror.example.com/etcd:v3.6.5@sha256:0123",
		"RELATED_IMAGE_OPERATOR=ghcr.io/seedops/etcd-operator:v0.1.0",
		"PATH=/bin",
	})
	if len(o.RelatedImages) != 2 {
		t.Fatalf("related images %v", o.RelatedImages)
	}
	c := designCluster()
	if got := Image(c, o); got != "mirror.example.com/etcd:v3.5.9" {
		t.Errorf("default repository at a related version: %s", got)
	}
	c.Spec.Version = "3.6.5"
	if got := Image(c, o); got != "mirror.example.com/etcd:v3.6.5@sha256:0123" {
		t.Errorf("digest reference: %s", got)
	}
	c.Spec.Version = "3.5.17"
	if got := Image(c, o); got != "gcr.io/etcd-development/etcd:v3.5.17" {
		t.Errorf("version without a related image: %s", got)
	}
	c.Spec.Repository = "registry.example.com/etcd"
	c.Spec.Version = "3.5.9"
	if got := Image(c, o); got != "registry.example.com/etcd:v3.5.9" {
		t.Errorf("a user's own repository always wins: %s", got)
	}
}

// TestPeerSkipSANEnv: etcd before 3.6 knows the setting only under its experimental name; 3.6 renamed it
// (and 3.7 drops the old name), so the ConfigMap must carry the name the cluster's version reads.
func TestPeerSkipSANEnv(t *testing.T) {
	for version, want := range map[string]string{
		"3.4.37": "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"3.5.35": "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"3.6.8":  "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"3.7.0":  "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION",
		"4.0.0":  "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION",
	} {
		if got := peerSkipSANEnv(version); got != want {
			t.Errorf("peerSkipSANEnv(%q) = %s, want %s", version, got, want)
		}
	}
}

// TestPeerAddressCheckOnlyOffWithOwnCA: the peer address check is skipped only when the operator's own CA
// signs the cluster's certificates; a user's CA may sign other clusters' certificates too.
func TestPeerAddressCheckOnlyOffWithOwnCA(t *testing.T) {
	const key = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	userCA := designCluster()
	userCA.Spec.TLS.CASecretName = "my-ca"
	for name, tc := range map[string]struct {
		c    *etcdv1beta1.EtcdCluster
		skip bool
	}{
		"operator's CA": {designCluster(), true},
		"user's CA":     {userCA, false},
		"plaintext":     {plaintextCluster(), false},
	} {
		tc.c.Spec.Version = "3.5.35"
		if _, got := configData(tc.c, BootstrapConfig(tc.c, 3, Options{}))[key]; got != tc.skip {
			t.Errorf("%s: %s set = %v, want %v", name, key, got, tc.skip)
		}
	}
}

func TestQuotaBackendBytesLeavesRoomForDefragmentation(t *testing.T) {
	for size, want := range map[string]int64{
		"100Mi": 40 << 20,
		"1Gi":   1 << 30 * 40 / 100,
		"8Gi":   8 << 30 * 40 / 100,
		"20Gi":  8 << 30, // etcd's suggested maximum
		"1Pi":   8 << 30,
	} {
		c := &etcdv1beta1.EtcdCluster{Spec: etcdv1beta1.EtcdClusterSpec{StorageSize: resource.MustParse(size)}}
		if got := QuotaBackendBytes(c); got != want {
			t.Errorf("storageSize %s: quota %d, want %d", size, got, want)
		}
		if got := QuotaBackendBytes(c); 2*got > c.Spec.StorageSize.Value()*80/100 {
			t.Errorf("storageSize %s: two copies of a %d quota leave less than a fifth of the volume", size, got)
		}
	}
}

// TestForceNewClusterRoundTrips: a quorum-loss recovery's instruction is in the configuration the member
// gate reads (the member it is for and the pod that must not force), is read back as written, and is gone
// from a configuration without it. etcd's own --force-new-cluster is never in it: every member's etcd
// reads this configuration at every start of its container, gate or no gate.
func TestForceNewClusterRoundTrips(t *testing.T) {
	c := designCluster()
	f := &membership.ForceNewCluster{Member: "design-etcd-1", OldPod: "0c1e7d3a"}
	mc := BootstrapConfig(c, 3, Options{})
	mc.ForceNewCluster = f
	data := configData(c, mc)
	if data[membergate.EnvForceNewClusterMember] != f.Member || data[membergate.EnvForceNewClusterOldPod] != f.OldPod {
		t.Fatalf("configuration %v: want %s=%s and %s=%s", data, membergate.EnvForceNewClusterMember, f.Member, membergate.EnvForceNewClusterOldPod, f.OldPod)
	}
	for k := range data {
		if strings.EqualFold(k, membergate.EnvForceNewCluster) {
			t.Fatalf("configuration %v has %s: every member's etcd would force a cluster of its own", data, k)
		}
	}
	if got := ForceNewClusterOf(data); got == nil || *got != *f {
		t.Fatalf("read back %+v, want %+v", got, f)
	}
	plain := configData(c, BootstrapConfig(c, 3, Options{}))
	if got := ForceNewClusterOf(plain); got != nil {
		t.Fatalf("read back %+v from a configuration without the instruction", got)
	}
	for _, k := range []string{membergate.EnvForceNewCluster, membergate.EnvForceNewClusterMember, membergate.EnvForceNewClusterOldPod} {
		if _, ok := plain[k]; ok {
			t.Fatalf("configuration without the instruction has %s", k)
		}
	}
}

// TestForcedStartReachesOnlyItsPod: with the current gate, etcd starts through the entry that takes a forced
// start's ticket from a volume of its own pod (an emptyDir: it lives as long as the pod, so a ticket reaches
// no other pod), which the gate shares and is told of, with the pod's UID that a ticket names; and no
// container of the template has --force-new-cluster in its environment. A template without that gate
// keeps etcd's own command.
func TestForcedStartReachesOnlyItsPod(t *testing.T) {
	o := Options{OperatorImage: "operator:test"}
	for _, c := range []*etcdv1beta1.EtcdCluster{designCluster(), plaintextCluster()} {
		spec := StatefulSet(c, 3, o, nil, CurrentMemberGate(o)).Spec.Template.Spec
		var emptyDir bool
		for _, v := range spec.Volumes {
			if *v.Name == MemberStartVolume {
				emptyDir = v.EmptyDir != nil && v.PersistentVolumeClaim == nil && v.ConfigMap == nil && v.Secret == nil
			}
		}
		if !emptyDir {
			t.Fatalf("%s: volume %s is not an emptyDir of the pod: %+v", c.Name, MemberStartVolume, spec.Volumes)
		}
		mounts := func(ctr corev1ac.ContainerApplyConfiguration) bool {
			for _, m := range ctr.VolumeMounts {
				if *m.Name == MemberStartVolume && *m.MountPath == MemberStartMountPath && (m.ReadOnly == nil || !*m.ReadOnly) {
					return true
				}
			}
			return false
		}
		for _, ctr := range append(append([]corev1ac.ContainerApplyConfiguration{}, spec.Containers...), spec.InitContainers...) {
			for _, e := range ctr.Env {
				if strings.EqualFold(*e.Name, membergate.EnvForceNewCluster) {
					t.Fatalf("%s: container %s has %s in its environment", c.Name, *ctr.Name, *e.Name)
				}
			}
			switch *ctr.Name {
			case "etcd":
				if !slices.Equal(ctr.Command, EtcdStartCommand()) || !mounts(ctr) {
					t.Fatalf("%s: etcd command %q, mounts %+v: want %q with %s mounted", c.Name, ctr.Command, ctr.VolumeMounts, EtcdStartCommand(), MemberStartVolume)
				}
				var uid bool
				for _, e := range ctr.Env {
					uid = uid || *e.Name == membergate.EnvPodUID && e.ValueFrom != nil && *e.ValueFrom.FieldRef.FieldPath == "metadata.uid"
				}
				if !uid {
					t.Fatalf("%s: etcd has no %s from metadata.uid", c.Name, membergate.EnvPodUID)
				}
			case MemberGateContainerName:
				if !slices.Contains(ctr.Args, MemberGateTicketFlag+MemberStartMountPath) || !mounts(ctr) {
					t.Fatalf("%s: gate args %q, mounts %+v: want %s%s with it mounted", c.Name, ctr.Args, ctr.VolumeMounts, MemberGateTicketFlag, MemberStartMountPath)
				}
			}
		}
		kept := StatefulSet(c, 3, o, nil, MemberGate{Image: "operator:old", HoldsForcedStart: true}).Spec.Template.Spec
		if !slices.Equal(kept.Containers[0].Command, []string{"/usr/local/bin/etcd"}) {
			t.Fatalf("%s: a kept gate without tickets: etcd command %q, want etcd's own", c.Name, kept.Containers[0].Command)
		}
	}
}

// TestRestoreRecoveryRoundTrips: a recovery from a backup is in the configuration the member gate and the
// restore step read, with an initial cluster token that names it (so the restored members' IDs are new),
// is read back as written, and leaves no trace in a configuration without it.
func TestRestoreRecoveryRoundTrips(t *testing.T) {
	c := designCluster()
	rec := &membership.RestoreRecovery{ID: "restore-20261122T120500Z", Location: "pvc://design-etcd-backup/etcd-prod/design-etcd/scheduled/x-r42.db", Revision: 42}
	mc := BootstrapConfig(c, 3, Options{})
	plain := configData(c, mc)
	mc.Restore = rec
	data := configData(c, mc)
	if got := RestoreRecoveryOf(data); got == nil || *got != *rec {
		t.Fatalf("read back %+v, want %+v", got, rec)
	}
	if want := plain["ETCD_INITIAL_CLUSTER_TOKEN"] + "/" + rec.ID; data["ETCD_INITIAL_CLUSTER_TOKEN"] != want {
		t.Fatalf("token %q during the recovery, want %q", data["ETCD_INITIAL_CLUSTER_TOKEN"], want)
	}
	if got := RestoreRecoveryOf(plain); got != nil {
		t.Fatalf("read back %+v from a configuration without a recovery", got)
	}
	for _, r := range []membership.RestoreRecovery{
		{ID: rec.ID, Location: "pvc://design-etcd-backup/etcd-prod/design-etcd/continuous/", Revision: 97, Replay: true},
		{ID: rec.ID, Location: rec.Location, Revision: 42, Fallback: "replaying the continuous backup to revision 97 failed: chain damaged"},
	} {
		mc.Restore = &r
		if got := RestoreRecoveryOf(configData(c, mc)); got == nil || *got != r {
			t.Fatalf("read back %+v, want %+v", got, r)
		}
	}
	for _, k := range []string{restoreRecoveryID, restoreRecoveryFrom, restoreRecoveryRevision, restoreRecoveryReplay, restoreRecoveryFallback} {
		if _, ok := plain[k]; ok {
			t.Fatalf("configuration without a recovery has %s", k)
		}
	}
	// The restore step names the recovery it is for: that is how a pod that restores for it is told
	// apart from one still running on the lost cluster's data.
	src := RestoreSource{Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "design-etcd-backup"}},
		Key: "etcd-prod/design-etcd/scheduled/x-r42.db", Recovery: rec.ID}
	sts := StatefulSet(c, 3, Options{OperatorImage: "operator:test"}, &src, CurrentMemberGate(Options{OperatorImage: "operator:test"}))
	var args []string
	gateEnv := map[string]string{}
	for _, ic := range sts.Spec.Template.Spec.InitContainers {
		switch *ic.Name {
		case RestoreContainerName:
			args = ic.Args
		case MemberGateContainerName:
			for _, e := range ic.Env {
				if e.Value != nil {
					gateEnv[*e.Name] = *e.Value
				}
			}
		}
	}
	token := data["ETCD_INITIAL_CLUSTER_TOKEN"]
	if !slices.Contains(args, RestoreRecoveryFlag+rec.ID) || !slices.Contains(args, RestoreTokenFlag+token) {
		t.Fatalf("restore step args %v lack %s%s and %s%s", args, RestoreRecoveryFlag, rec.ID, RestoreTokenFlag, token)
	}
	// The gate of a pod that restores knows it and the token (and only such a pod's gate: the template
	// sets them, so a configuration read before the recovery cannot mislead it).
	if gateEnv[membergate.EnvRestoreRecovery] != rec.ID || gateEnv[membergate.EnvRestoreToken] != token {
		t.Fatalf("gate env %v: want %s=%s and %s=%s", gateEnv, membergate.EnvRestoreRecovery, rec.ID, membergate.EnvRestoreToken, token)
	}
	src.Recovery = ""
	for _, ic := range StatefulSet(c, 3, Options{OperatorImage: "operator:test"}, &src, CurrentMemberGate(Options{OperatorImage: "operator:test"})).Spec.Template.Spec.InitContainers {
		for _, e := range ic.Env {
			if *e.Name == membergate.EnvRestoreRecovery {
				t.Fatalf("a bootstrap restore's gate has %s", membergate.EnvRestoreRecovery)
			}
		}
	}
}

// TestLateBootstrapInConfiguration: the members that may still bootstrap reach the gate's variable; a
// configuration without any leaves it out (every member of a bootstrapping cluster may).
func TestLateBootstrapInConfiguration(t *testing.T) {
	c := designCluster()
	mc := BootstrapConfig(c, 3, DefaultOptions())
	if v, ok := ConfigMap(c, mc).Data[membergate.EnvLateBootstrap]; ok {
		t.Fatalf("bootstrap configuration sets %s=%q", membergate.EnvLateBootstrap, v)
	}
	mc.LateBootstrap = []string{"design-2"}
	if got := ConfigMap(c, mc).Data[membergate.EnvLateBootstrap]; got != "design-2" {
		t.Fatalf("%s=%q, want design-2", membergate.EnvLateBootstrap, got)
	}
}

// TestMaxLearnersOnlyOnEtcd36: the template sets --max-learners where etcd has it (3.6 and later) and the
// gate asks for more than etcd's default; etcd 3.5 and a template kept without it get none.
func TestMaxLearnersOnlyOnEtcd36(t *testing.T) {
	o := DefaultOptions()
	cases := []struct {
		version string
		gate    MemberGate
		want    string
	}{
		{"3.6.16", CurrentMemberGate(o), "2"},
		{"3.7.0", CurrentMemberGate(o), "2"},
		{"4.0.0", CurrentMemberGate(o), "2"},
		{"3.5.35", CurrentMemberGate(o), ""},
		{"3.6.16", MemberGate{Image: o.OperatorImage, HoldsForcedStart: true}, ""},
		{"3.6.16", MemberGate{MaxLearners: 1}, ""},
		{"3.6", CurrentMemberGate(o), ""},
	}
	for _, tc := range cases {
		c := designCluster()
		c.Spec.Version = tc.version
		got := ""
		for _, e := range StatefulSet(c, 3, o, nil, tc.gate).Spec.Template.Spec.Containers[0].Env {
			if *e.Name == MaxLearnersEnv {
				got = *e.Value
			}
		}
		if got != tc.want {
			t.Errorf("etcd %s, gate %+v: %s=%q, want %q", tc.version, tc.gate, MaxLearnersEnv, got, tc.want)
		}
	}
}

// TestClientHTTPSplitByVersionAndTLS: etcd's HTTP endpoints leave the client port only where TLS is on (without
// it etcd already serves gRPC with its own server) and etcd knows --listen-client-http-urls (3.5.8 and later);
// the client Service and the NetworkPolicy carry the new port exactly then, and the pod template never
// changes with it (an operator upgrade must restart no member).
func TestClientHTTPSplitByVersionAndTLS(t *testing.T) {
	o := Options{ClusterDomain: "cluster.local"}
	for name, tc := range map[string]struct {
		version string
		tls     bool
		split   bool
	}{
		"3.5.3 TLS":             {"3.5.3", true, false},
		"3.5.7 TLS":             {"3.5.7", true, false},
		"3.5.8 TLS":             {"3.5.8", true, true},
		"3.5.35 TLS":            {"3.5.35", true, true},
		"3.6.0 TLS":             {"3.6.0", true, true},
		"3.6.16 TLS":            {"3.6.16", true, true},
		"3.7.0 TLS":             {"3.7.0", true, true},
		"3.5.35 plaintext":      {"3.5.35", false, false},
		"3.6.16 plaintext":      {"3.6.16", false, false},
		"unparsable TLS":        {"3.5", true, false},
		"pre-release 3.5.8 TLS": {"3.5.8-rc.0", true, false},
	} {
		t.Run(name, func(t *testing.T) {
			c := designCluster()
			c.Spec.Version = tc.version
			c.Spec.TLS.Enabled = ptr.To(tc.tls)
			if got := SplitsClientHTTP(c); got != tc.split {
				t.Fatalf("SplitsClientHTTP = %v, want %v", got, tc.split)
			}
			v, set := configData(c, BootstrapConfig(c, 3, o))[ClientHTTPURLsEnv]
			if set != tc.split || set && v != "https://0.0.0.0:2382" {
				t.Errorf("%s = %q (set %v), want set %v", ClientHTTPURLsEnv, v, set, tc.split)
			}
			servicePorts := ClientService(c).Spec.Ports
			if got := len(servicePorts) == 2 && *servicePorts[1].Port == ClientHTTPPort && servicePorts[1].TargetPort.IntValue() == ClientHTTPPort; got != tc.split {
				t.Errorf("client Service has port %d: %v, want %v (ports %d)", ClientHTTPPort, got, tc.split, len(servicePorts))
			}
			for _, rule := range NetworkPolicy(c, o).Spec.Ingress[:2] {
				has := false
				for _, p := range rule.Ports {
					has = has || p.Port.IntValue() == ClientHTTPPort
				}
				if has != tc.split {
					t.Errorf("NetworkPolicy admits port %d in a client rule: %v, want %v", ClientHTTPPort, has, tc.split)
				}
			}
			split, kept := StatefulSet(c, 3, o, nil, CurrentMemberGate(o)), c.DeepCopy()
			kept.Spec.Version = "3.5.7"
			if diff := cmp.Diff(StatefulSet(kept, 3, o, nil, CurrentMemberGate(o)).Spec.Template.Spec.Containers[0].Ports,
				split.Spec.Template.Spec.Containers[0].Ports); diff != "" {
				t.Errorf("the split changes the container's ports:\n%s", diff)
			}
			for _, e := range split.Spec.Template.Spec.Containers[0].Env {
				if *e.Name == ClientHTTPURLsEnv {
					t.Errorf("%s is in the pod template", ClientHTTPURLsEnv)
				}
			}
		})
	}
}
