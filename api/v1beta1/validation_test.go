package v1beta1_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// These tests send manifests to a real kube-apiserver with the generated CRD installed, so they prove
// the OpenAPI and CEL rules users actually hit, with the messages they actually see.

var cl client.Client

func TestMain(m *testing.M) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		panic(fmt.Sprintf("start envtest (run `make test` so KUBEBUILDER_ASSETS is set): %v", err))
	}
	cl, err = client.New(cfg, client.Options{})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	if code != 0 {
		panic(fmt.Sprintf("exit %d", code))
	}
}

var seq int

// cluster parses an EtcdCluster manifest whose spec is given as YAML, with a fresh name.
func cluster(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	seq++
	doc := fmt.Sprintf("apiVersion: etcd.seedops.io/v1beta1\nkind: EtcdCluster\nmetadata:\n  name: c%d\n  namespace: default\nspec:\n%s", seq, indent(spec))
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v\n%s", err, doc)
	}
	return u
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

const design = `
version: 3.5.9
replicas: 3
storageSize: 10Gi
backupSchedule: "0 2 * * *"`

func TestCreateRefusesBadManifests(t *testing.T) {
	const semver = "version must be a semantic version X.Y.Z"
	const odd = "replicas must be 1, 3, 5 or 7: etcd needs a majority"
	const cron = "spec.backupSchedule: Invalid value: \"string\": must be a 5-field cron expression"
	const positive = "storageSize must be a positive quantity"
	cases := []struct{ name, spec, want string }{
		{"missing version", "replicas: 3", "spec.version: Required value"},
		{"two-part version", "version: '3.5'", semver},
		{"v-prefixed version", "version: v3.5.9", semver},
		{"pre-release version", "version: 3.5.9-rc.1", semver},
		{"empty version", "version: ''", semver},
		{"leading-zero version", "version: 3.05.9", semver},
		{"etcd 3.4", "version: 3.4.22", "etcd 3.4.22 is older than 3.5.3, the oldest version the operator supports"},
		{"etcd 3.5 before the serializable health check", "version: 3.5.2", "etcd 3.5.2 is older than 3.5.3, the oldest version the operator supports"},
		{"replicas 2", "version: 3.5.9\nreplicas: 2", odd},
		{"replicas 4", "version: 3.5.9\nreplicas: 4", odd},
		{"replicas 6", "version: 3.5.9\nreplicas: 6", odd},
		{"replicas 0", "version: 3.5.9\nreplicas: 0", odd},
		{"replicas 9", "version: 3.5.9\nreplicas: 9", odd},
		{"negative replicas", "version: 3.5.9\nreplicas: -1", odd},
		{"zero storage", "version: 3.5.9\nstorageSize: '0'", positive},
		{"negative storage", "version: 3.5.9\nstorageSize: -1Gi", positive},
		{"storage not a quantity", "version: 3.5.9\nstorageSize: ten", "spec.storageSize"},
		{"storage beyond any volume (found by FuzzStorageSizeRule)", "version: 3.5.9\nstorageSize: '1000000000000000000000'", positive},
		{"storage with a huge exponent (hung CEL quantity arithmetic)", "version: 3.5.9\nstorageSize: '1e1233333333'", positive},
		{"defragmentation at no free space", "version: 3.5.9\ndefragmentation:\n  minFreeSize: '0'", "defragmentation.minFreeSize must be a positive quantity"},
		{"defragmentation at a negative free space", "version: 3.5.9\ndefragmentation:\n  minFreeSize: -1Mi", "defragmentation.minFreeSize must be a positive quantity"},
		{"defragmentation above 95% free", "version: 3.5.9\ndefragmentation:\n  freePercent: 96", "spec.defragmentation.freePercent"},
		{"defragmentation below 0% free", "version: 3.5.9\ndefragmentation:\n  freePercent: -1", "spec.defragmentation.freePercent"},
		{"heartbeat too short", "version: 3.5.9\netcd:\n  heartbeatInterval: 1ms", "etcd.heartbeatInterval must be between 10ms and 5s"},
		{"heartbeat not a duration", "version: 3.5.9\netcd:\n  heartbeatInterval: fast", "spec.etcd.heartbeatInterval"},
		{"election timeout under 5 heartbeats", "version: 3.5.9\netcd:\n  heartbeatInterval: 300ms\n  electionTimeout: 1s", "etcd.electionTimeout must be at least 5 times etcd.heartbeatInterval"},
		{"heartbeat alone beyond the default timeout", "version: 3.5.9\netcd:\n  heartbeatInterval: 250ms", "etcd.electionTimeout must be at least 5 times etcd.heartbeatInterval"},
		{"election timeout too long", "version: 3.5.9\netcd:\n  electionTimeout: 60s", "etcd.electionTimeout must be between 50ms and 50s"},
		{"snapshot count 0", "version: 3.5.9\netcd:\n  snapshotCount: 0", "spec.etcd.snapshotCount"},
		{"request size too big", "version: 3.5.9\netcd:\n  maxRequestSize: 100Mi", "etcd.maxRequestSize must be a quantity between 1Ki and 64Mi"},
		{"quota too small", "version: 3.5.9\netcd:\n  quotaBackendSize: 1Mi", "etcd.quotaBackendSize must be a quantity between 16Mi and 100Gi"},
		{"quota over half the volume", "version: 3.5.9\nstorageSize: 10Gi\netcd:\n  quotaBackendSize: 6Gi", "etcd.quotaBackendSize must be at most half of storageSize"},
		{"unknown compaction mode", "version: 3.5.9\netcd:\n  autoCompaction: {mode: Hourly, retention: '1'}", `supported values: "Periodic", "Revision"`},
		{"periodic retention without unit", "version: 3.5.9\netcd:\n  autoCompaction: {mode: Periodic, retention: '5'}", "retention for mode Periodic is a duration"},
		{"revision retention as duration", "version: 3.5.9\netcd:\n  autoCompaction: {mode: Revision, retention: 1h}", "retention for mode Revision is a number of revisions"},
		{"extra flag with dashes", "version: 3.5.9\netcd:\n  extraFlags: {--log-level: debug}", "etcd.extraFlags keys are flag names without leading dashes"},
		{"extra flag the operator owns", "version: 3.5.9\netcd:\n  extraFlags: {initial-cluster-state: new}", "etcd.extraFlags must not set a flag the operator owns"},
		{"extra flag forcing a new cluster", "version: 3.5.9\netcd:\n  extraFlags: {force-new-cluster: 'true'}", "etcd.extraFlags must not set a flag the operator owns"},
		{"unknown quorum-loss recovery", "version: 3.5.9\nrecovery: {quorumLoss: Always}", `supported values: "Report", "FromSurvivor", "FromBackup"`},
		{"quorum-loss recovery too soon", "version: 3.5.9\nrecovery: {quorumLoss: FromSurvivor, after: 10s}", "recovery.after must be between 30s and 168h"},
		{"quorum-loss recovery after a week and more", "version: 3.5.9\nrecovery: {after: 200h}", "recovery.after must be between 30s and 168h"},
		{"extra flag with its own field", "version: 3.5.9\netcd:\n  extraFlags: {quota-backend-bytes: '1'}", "etcd.extraFlags must not set a flag the operator owns"},
		{"extra flag raising or lowering the learners etcd accepts", "version: 3.6.16\netcd:\n  extraFlags: {max-learners: '1'}", "etcd.extraFlags must not set a flag the operator owns"},
		{"cron with 4 fields", "version: 3.5.9\nbackupSchedule: '0 2 * *'", cron},
		{"cron with 6 fields", "version: 3.5.9\nbackupSchedule: '0 0 2 * * *'", cron},
		{"cron minute 60", "version: 3.5.9\nbackupSchedule: '60 * * * *'", cron},
		{"cron hour 24", "version: 3.5.9\nbackupSchedule: '0 24 * * *'", cron},
		{"cron day 32", "version: 3.5.9\nbackupSchedule: '0 0 32 * *'", cron},
		{"cron month 13", "version: 3.5.9\nbackupSchedule: '0 0 1 13 *'", cron},
		{"cron @every", "version: 3.5.9\nbackupSchedule: '@every 1h'", cron},
		{"cron words", "version: 3.5.9\nbackupSchedule: 'every night'", cron},
		{"cron backwards range", "version: 3.5.9\nbackupSchedule: '0 23-22 * * *'", "spec.backupSchedule: Invalid value: \"string\": cron ranges must go from low to high"},
		{"cron backwards day names", "version: 3.5.9\nbackupSchedule: '0 2 * * fri-mon'", "cron ranges must go from low to high"},
		{"defragmentation schedule with 4 fields", "version: 3.5.9\ndefragmentation: {schedule: '0 3 * *'}",
			"spec.defragmentation.schedule: Invalid value: \"string\": must be a 5-field cron expression"},
		{"defragmentation schedule backwards", "version: 3.5.9\ndefragmentation: {schedule: '0 3 * * sat-sun'}",
			"spec.defragmentation.schedule: Invalid value: \"string\": cron ranges must go from low to high"},
		{"repository with tag", "version: 3.5.9\nrepository: quay.io/coreos/etcd:v3.5.9", "repository must not carry a tag or digest"},
		{"repository with digest", "version: 3.5.9\nrepository: quay.io/coreos/etcd@sha256:abc", "repository must not carry a tag or digest"},
		{"reserved pod label", "version: 3.5.9\npod:\n  labels:\n    app.kubernetes.io/instance: x", "reserved for the operator"},
		{"two backup destinations", "version: 3.5.9\nbackup:\n  pvc: {}\n  s3: {endpoint: 'https://s3.example.com', bucket: etcd, credentialsSecretName: creds}", "choose one backup destination: pvc or s3"},
		{"s3 endpoint not http", "version: 3.5.9\nbackup:\n  s3: {endpoint: 'ftp://s3.example.com', bucket: etcd, credentialsSecretName: creds}", "endpoint must be an http or https URL"},
		{"s3 without bucket", "version: 3.5.9\nbackup:\n  s3: {endpoint: 'https://s3.example.com', credentialsSecretName: creds}", "spec.backup.s3.bucket: Required value"},
		{"retention 0", "version: 3.5.9\nbackup:\n  retention: 0", "spec.backup.retention"},
		{"unknown retention policy", "version: 3.5.9\npvcRetentionPolicy:\n  whenDeleted: Keep", `supported values: "Retain", "Delete"`},
		{"empty storage class", "version: 3.5.9\nstorageClassName: ''", "spec.storageClassName"},
		{"issuer without a name", "version: 3.5.9\ntls:\n  issuerRef: {kind: Issuer}", "spec.tls.issuerRef.name: Required value"},
		{"issuer of an unknown kind", "version: 3.5.9\ntls:\n  issuerRef: {name: ca, kind: Vault}", `supported values: "Issuer", "ClusterIssuer"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := cl.Create(context.Background(), cluster(t, tc.spec))
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(anyInvalidValue(err.Error()), anyInvalidValue(tc.want)) {
				t.Fatalf("refused with %v; want an Invalid error containing %q", err, tc.want)
			}
		})
	}
}

// invalidValue is how a field error quotes what was refused: for a CEL rule's error, Kubernetes 1.33 quotes the
// value's type ("string"), 1.37 the value itself.
var invalidValue = regexp.MustCompile(`Invalid value: "[^"]*": `)

// anyInvalidValue makes a field error's message independent of how the API server quotes the refused value.
func anyInvalidValue(msg string) string {
	return invalidValue.ReplaceAllString(msg, `Invalid value: …: `)
}

func TestCreateAcceptsGoodManifests(t *testing.T) {
	cases := map[string]string{
		"the README's sample":      design,
		"version only (defaults)":  "version: 3.6.5",
		"oldest supported version": "version: 3.5.3",
		"macro schedule":           "version: 3.5.9\nbackupSchedule: '@daily'",
		"rich cron":                "version: 3.5.9\nbackupSchedule: '*/15 0-6 1,15 JAN-MAR mon-fri'",
		"weekly defragmentation":   "version: 3.5.9\ndefragmentation: {schedule: '30 3 * * sun'}",
		"recovery from a survivor": "version: 3.5.9\nrecovery: {quorumLoss: FromSurvivor, after: 2m}",
		"recovery from a backup":   "version: 3.5.9\nrecovery: {quorumLoss: FromBackup}",
		"etcd settings": `
version: 3.5.17
storageSize: 10Gi
etcd:
  heartbeatInterval: 200ms
  electionTimeout: 2s
  snapshotCount: 20000
  maxRequestSize: 4Mi
  quotaBackendSize: 5Gi
  autoCompaction: {mode: Revision, retention: '10000'}
  extraFlags: {experimental-compaction-batch-limit: '1000', log-level: warn}`,
		"periodic compaction in minutes": "version: 3.5.9\netcd:\n  autoCompaction: {mode: Periodic, retention: 30m}",
		"every option": `
version: 3.5.17
replicas: 5
storageSize: 20Gi
storageClassName: fast
repository: localhost:5000/etcd
paused: true
pvcRetentionPolicy: {whenDeleted: Delete, whenScaled: Delete}
backup:
  retention: 30
  s3: {endpoint: 'https://s3.example.com', bucket: etcd-backups, prefix: prod/, credentialsSecretName: creds}
pod:
  labels: {team: storage}
  annotations: {a: b}
  priorityClassName: high
  nodeSelector: {disk: ssd}
  resources: {requests: {cpu: 500m, memory: 1Gi}}`,
		"certificates from a cert-manager issuer": "version: 3.5.9\ntls:\n  issuerRef: {name: ca}",
		// Refused by the operator (condition Degraded, reason IssuerRefRefused), not by the API server: no rule on
		// spec.tls relates issuerRef to its other fields, as OLM v1 refuses a new rule on an existing field.
		"issuerRef with caSecretName (the operator refuses it)": "version: 3.5.9\ntls:\n  caSecretName: my-ca\n  issuerRef: {name: ca}",
		"issuerRef without TLS (the operator refuses it)":       "version: 3.5.9\ntls:\n  enabled: false\n  issuerRef: {name: ca}",
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			if err := cl.Create(context.Background(), cluster(t, spec)); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestCreateFillsDefaults checks the production-sane defaults the API server fills in.
func TestCreateFillsDefaults(t *testing.T) {
	u := cluster(t, "version: 3.5.9")
	if err := cl.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"replicas": int64(3), "storageSize": "8Gi", "repository": "gcr.io/etcd-development/etcd",
		"backup.retention": int64(7), "pvcRetentionPolicy.whenDeleted": "Retain", "pvcRetentionPolicy.whenScaled": "Retain",
		"defragmentation.freePercent": int64(50), "defragmentation.minFreeSize": "64Mi",
		"recovery.quorumLoss": "Report", "recovery.after": "5m0s",
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"spec"}, strings.Split(path, ".")...)...)
		if got != want {
			t.Errorf("spec.%s defaulted to %v, want %v", path, got, want)
		}
	}
}

func TestUpdateRules(t *testing.T) {
	cases := []struct {
		name, from, to, want string // want "" means the update is accepted
	}{
		{"patch upgrade", "version: 3.5.9", "version: 3.5.17", ""},
		{"patch downgrade", "version: 3.5.17", "version: 3.5.9", ""},
		{"minor upgrade", "version: 3.5.26", "version: 3.6.0", ""},
		{"minor upgrade from before 3.5.26", "version: 3.5.17", "version: 3.6.0", "upgrade to 3.5.26 or later first"},
		{"minor upgrade from 3.5.25", "version: 3.5.25", "version: 3.6.16", "upgrading etcd from 3.5.25 to 3.6.16 is not safe"},
		{"patch downgrade below the supported floor", "version: 3.5.9", "version: 3.5.2", "etcd 3.5.2 is older than 3.5.3"},
		{"minor downgrade", "version: 3.6.0", "version: 3.5.17", "downgrading etcd from 3.6.0 to 3.5.17 is not supported"},
		{"skipped minor", "version: 3.5.26", "version: 3.7.0", "upgrading etcd from 3.5.26 to 3.7.0 skips a minor version"},
		{"major change", "version: 3.5.9", "version: 4.0.0", "changing etcd's major version is not supported"},
		{"storage grows", "version: 3.5.9\nstorageSize: 10Gi", "version: 3.5.9\nstorageSize: 20Gi", ""},
		{"storage shrinks", "version: 3.5.9\nstorageSize: 10Gi", "version: 3.5.9\nstorageSize: 9Gi", "storageSize can only grow"},
		{"storage class changes", "version: 3.5.9\nstorageClassName: a", "version: 3.5.9\nstorageClassName: b", "storageClassName is immutable"},
		{"storage class added", "version: 3.5.9", "version: 3.5.9\nstorageClassName: b", "storageClassName is immutable"},
		{"storage class removed", "version: 3.5.9\nstorageClassName: a", "version: 3.5.9", "storageClassName is immutable"},
		{"scale 3 to 5", "version: 3.5.9\nreplicas: 3", "version: 3.5.9\nreplicas: 5", ""},
		{"scale 3 to 4", "version: 3.5.9\nreplicas: 3", "version: 3.5.9\nreplicas: 4", "replicas must be 1, 3, 5 or 7"},
		{"schedule removed", design, "version: 3.5.9\nreplicas: 3\nstorageSize: 10Gi", ""},
		{"issuer changes name", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", "version: 3.5.9\ntls:\n  issuerRef: {name: b}", "tls.issuerRef cannot be changed"},
		{"issuer changes kind", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", "version: 3.5.9\ntls:\n  issuerRef: {name: a, kind: ClusterIssuer}", "tls.issuerRef cannot be changed"},
		{"issuer changes group", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", "version: 3.5.9\ntls:\n  issuerRef: {name: a, group: example.com}", "tls.issuerRef cannot be changed"},
		{"issuer unchanged", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", "version: 3.5.17\ntls:\n  issuerRef: {name: a}", ""},
		// Adding or removing issuerRef is the operator's to refuse (it knows where the certificates come from).
		{"issuer added (the operator refuses it)", "version: 3.5.9", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", ""},
		{"issuer removed (the operator refuses it)", "version: 3.5.9\ntls:\n  issuerRef: {name: a}", "version: 3.5.9", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			obj := cluster(t, tc.from)
			if err := cl.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			next := cluster(t, tc.to)
			obj.Object["spec"] = next.Object["spec"]
			err := cl.Update(ctx, obj)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("update refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("update accepted; want refusal with %q", tc.want)
			case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("refused with %v; want an Invalid error containing %q", err, tc.want)
			}
		})
	}
}

// TestRoundTripThroughBothVersions: on a real API server, an object written through one served version reads
// the same through the other, spec and status, both ways: the CRD converts with None, and the schemas are
// one (TestServedVersionsHaveOneSchema), so nothing is pruned or defaulted differently. Specs: the samples
// and the validation cases' design; statuses: filled at random (FuzzVersionRoundTrip's filler), made
// acceptable where the schema constrains a value.
func TestRoundTripThroughBothVersions(t *testing.T) {
	ctx := context.Background()
	specs := []string{design}
	for _, name := range []string{"etcd_v1beta1_etcdcluster.yaml", "etcd_v1beta1_etcdcluster_backup.yaml", "etcd_v1beta1_etcdcluster_restore.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", name))
		if err != nil {
			t.Fatal(err)
		}
		u := map[string]any{}
		if err := yaml.Unmarshal(b, &u); err != nil {
			t.Fatal(err)
		}
		spec, err := yaml.Marshal(u["spec"])
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, string(spec))
	}
	for i, spec := range specs {
		for _, way := range [][2]string{{"v1alpha1", "v1beta1"}, {"v1beta1", "v1alpha1"}} {
			written, read := way[0], way[1]
			obj := cluster(t, spec)
			obj.SetAPIVersion("etcd.seedops.io/" + written)
			if err := cl.Create(ctx, obj); err != nil {
				t.Fatalf("create through %s: %v", written, err)
			}
			status := &etcdv1beta1.EtcdClusterStatus{}
			randfill.New().RandSource(rand.NewSource(int64(i))).NilChance(0.1).NumElements(1, 2).Fill(status)
			acceptableStatus(status)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
			if err != nil {
				t.Fatal(err)
			}
			obj.Object["status"] = m
			if err := cl.Status().Update(ctx, obj); err != nil {
				t.Fatalf("status through %s: %v", written, err)
			}
			got := &unstructured.Unstructured{}
			got.SetAPIVersion("etcd.seedops.io/" + read)
			got.SetKind("EtcdCluster")
			if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("get through %s: %v", read, err)
			}
			if got.GetAPIVersion() != "etcd.seedops.io/"+read {
				t.Errorf("read as %s", got.GetAPIVersion())
			}
			for _, part := range []string{"spec", "status"} {
				if !equality.Semantic.DeepEqual(obj.Object[part], got.Object[part]) {
					t.Errorf("sample %d: %s written through %s reads differently through %s:\n%v\n%v", i, part, written, read, obj.Object[part], got.Object[part])
				}
			}
			_ = cl.Delete(ctx, obj)
		}
	}
}

// acceptableStatus makes a randomly filled status one the schema accepts: enums, condition fields and the
// bounds the API server checks.
func acceptableStatus(s *etcdv1beta1.EtcdClusterStatus) {
	s.Phase = etcdv1beta1.PhaseRunning
	s.Replicas, s.ReadyReplicas = abs(s.Replicas), abs(s.ReadyReplicas)
	if s.LastRecovery != nil {
		s.LastRecovery.Strategy = etcdv1beta1.QuorumLossFromSurvivor
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status, c.Reason = fmt.Sprintf("Type%d", i), metav1.ConditionTrue, fmt.Sprintf("Reason%d", i)
		c.ObservedGeneration = max(c.ObservedGeneration, 0)
		c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.UTC().Truncate(time.Second))
	}
}

func abs(n int32) int32 { return max(n, -n, 0) }
