package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/backup"
)

// claimRestore is a restore from a backup claim of another cluster.
func claimRestore() RestoreSource {
	return RestoreSource{Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "old-backups"}},
		Key: "prod/old/on-demand/old-20261122T020000Z-r42.db"}
}

// restoreStep is the restore init container of a member template, and the template's volume names.
func restoreStep(t *testing.T, src *RestoreSource) (*corev1ac.ContainerApplyConfiguration, []string) {
	t.Helper()
	spec := StatefulSet(designCluster(), 3, DefaultOptions(), src, CurrentMemberGate(DefaultOptions())).Spec.Template.Spec
	var volumes []string
	for _, v := range spec.Volumes {
		volumes = append(volumes, *v.Name)
	}
	for i := range spec.InitContainers {
		if *spec.InitContainers[i].Name == RestoreContainerName {
			return &spec.InitContainers[i], volumes
		}
	}
	return nil, volumes
}

// TestRestoreStepReadsAClaimThroughTheSnapshotServer: members never mount a backup claim (a ReadWriteOnce
// claim would hold them all to its node); they download from the snapshot server, with its token from the
// Secret. S3 restores are as they were, and a template without a restore has no trace of either.
func TestRestoreStepReadsAClaimThroughTheSnapshotServer(t *testing.T) {
	s3 := RestoreSource{Destination: BackupDestination(s3Cluster(), nil), Key: "prod/etcd/scheduled/etcd-20261122T020000Z-r42.db"}
	recovery := claimRestore()
	recovery.Recovery = "restore-20261122T120500Z"
	url := "--snapshot-server=http://prod-etcd-snap.db.svc.cluster.local:8080"
	for _, tc := range []struct {
		name        string
		src         *RestoreSource
		wantArgs    []string
		notArgs     []string
		wantVolumes []string
		tokenEnv    bool
	}{
		{name: "no restore", src: nil},
		{name: "claim", src: ptr.To(claimRestore()),
			wantArgs: []string{"restore", "--key=" + claimRestore().Key, "--pvc-claim=old-backups", url},
			notArgs:  []string{"--dir=" + backupMountPath}, tokenEnv: true},
		{name: "claim, quorum-loss recovery", src: &recovery,
			wantArgs: []string{"--pvc-claim=old-backups", url, RestoreRecoveryFlag + recovery.Recovery}, tokenEnv: true},
		{name: "s3", src: &s3,
			wantArgs:    []string{"restore", "--s3-endpoint=https://minio.backup.svc:9000", "--s3-bucket=etcd", "--s3-ca-file=" + caMountPath + "/ca.crt"},
			notArgs:     []string{url},
			wantVolumes: []string{"s3-ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, volumes := restoreStep(t, tc.src)
			if slices.Contains(volumes, "backups") {
				t.Fatalf("member template mounts the backup claim: volumes %v", volumes)
			}
			for _, v := range tc.wantVolumes {
				if !slices.Contains(volumes, v) {
					t.Errorf("volumes %v lack %s", volumes, v)
				}
			}
			if tc.src == nil {
				if step != nil {
					t.Fatalf("a template without a restore has the restore step")
				}
				return
			}
			if step == nil {
				t.Fatal("no restore step")
			}
			for _, a := range tc.wantArgs {
				if !slices.Contains(step.Args, a) {
					t.Errorf("args %v lack %s", step.Args, a)
				}
			}
			for _, a := range tc.notArgs {
				if slices.Contains(step.Args, a) {
					t.Errorf("args %v have %s", step.Args, a)
				}
			}
			var token *corev1ac.EnvVarApplyConfiguration
			for i := range step.Env {
				if *step.Env[i].Name == backup.SnapshotTokenEnv {
					token = &step.Env[i]
				}
			}
			if (token != nil) != tc.tokenEnv {
				t.Fatalf("token variable %v, want %v", token != nil, tc.tokenEnv)
			}
			if token != nil && (token.Value != nil || token.ValueFrom.SecretKeyRef == nil ||
				*token.ValueFrom.SecretKeyRef.Name != SnapshotServerName(designCluster()) || *token.ValueFrom.SecretKeyRef.Key != SnapshotServerTokenKey) {
				t.Fatalf("token variable %+v, want a reference to Secret %s", token, SnapshotServerName(designCluster()))
			}
			for _, m := range step.VolumeMounts {
				if *m.Name == "backups" {
					t.Fatal("the restore step mounts the backup claim")
				}
			}
		})
	}
}

// TestSnapshotServerObjects: the server mounts only the claim, read-only; serves only the restore's key;
// takes its token from the Secret; meets the restricted Pod Security Standard; admits only the members; and
// everything goes with the cluster.
func TestSnapshotServerObjects(t *testing.T) {
	c, src := customCluster(), claimRestore()
	sts := SnapshotServerStatefulSet(c, src, DefaultOptions())
	pod := sts.Spec.Template.Spec
	ctr := pod.Containers[0]
	svc, np, secret := SnapshotServerService(c), SnapshotServerNetworkPolicy(c), SnapshotServerSecret(c, "t0k3n")
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"one replica", *sts.Spec.Replicas == 1},
		{"owned by the cluster", len(sts.OwnerReferences) == 1 && *sts.OwnerReferences[0].UID == c.UID &&
			len(svc.OwnerReferences) == 1 && len(np.OwnerReferences) == 1 && len(secret.OwnerReferences) == 1},
		{"serves exactly the restore's key", slices.Equal(slices.DeleteFunc(slices.Clone(ctr.Args), func(a string) bool {
			return !strings.HasPrefix(a, "--key=")
		}), []string{"--key=" + src.Key})},
		{"claim mounted read-only", len(pod.Volumes) == 1 && *pod.Volumes[0].PersistentVolumeClaim.ClaimName == "old-backups" &&
			*pod.Volumes[0].PersistentVolumeClaim.ReadOnly && *ctr.VolumeMounts[0].ReadOnly},
		{"token from the Secret, never a flag", len(ctr.Env) == 1 && *ctr.Env[0].Name == backup.SnapshotTokenEnv &&
			ctr.Env[0].Value == nil && *ctr.Env[0].ValueFrom.SecretKeyRef.Name == SnapshotServerName(c) &&
			!slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.Contains(a, "token") })},
		{"token in the Secret", string(secret.Data[SnapshotServerTokenKey]) == "t0k3n"},
		{"no API access", !*pod.AutomountServiceAccountToken},
		{"restricted pod security", *pod.SecurityContext.RunAsNonRoot && *pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault &&
			!*ctr.SecurityContext.AllowPrivilegeEscalation && *ctr.SecurityContext.ReadOnlyRootFilesystem &&
			*ctr.SecurityContext.RunAsNonRoot && slices.Equal(ctr.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"tolerates what the members tolerate", len(pod.Tolerations) == len(c.Spec.Pod.Tolerations) && len(pod.Tolerations) > 0},
		{"no node selector or affinity of the members: the claim places it", pod.NodeSelector == nil && pod.Affinity == nil},
		{"Service selects the server's pod", equalMaps(svc.Spec.Selector, sts.Spec.Template.Labels) &&
			*svc.Spec.Ports[0].Port == SnapshotServerPort},
		{"policy selects the server's pod", equalMaps(np.Spec.PodSelector.MatchLabels, sts.Spec.Template.Labels)},
		{"policy admits only the members, on the server's port", len(np.Spec.Ingress) == 1 && len(np.Spec.Ingress[0].From) == 1 &&
			equalMaps(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, SelectorLabels(c)) && np.Spec.Ingress[0].From[0].NamespaceSelector == nil &&
			len(np.Spec.Ingress[0].Ports) == 1 && np.Spec.Ingress[0].Ports[0].Port.IntValue() == SnapshotServerPort},
		{"policy lets the server open no connection", slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) && len(np.Spec.Egress) == 0},
	} {
		if !tc.ok {
			t.Errorf("%s: not so", tc.name)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSnapshotServerNameFitsItsPodsLabels: a StatefulSet's pods carry its name with a revision hash (up to
// 11 more characters) as a label value, which may have 63; cluster names have up to 45.
func TestSnapshotServerNameFitsItsPodsLabels(t *testing.T) {
	c := designCluster()
	c.Name = strings.Repeat("a", 45)
	if n := len(SnapshotServerName(c)) + 11; n > 63 {
		t.Fatalf("revision label of %s has %d characters", SnapshotServerName(c), n)
	}
}
