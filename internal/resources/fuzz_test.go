package resources

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/crdtest"
)

// FuzzBuilders builds every object of a fuzzed EtcdCluster (and an on-demand EtcdBackup of it) and checks
// what the API server and the kubelet will insist on. Only specs the CRDs accept are built: the cluster and
// the backup pass the API server's own validation (name, defaults, OpenAPI schema, CEL rules) first, so a
// failure is a spec users can really create whose objects Kubernetes would refuse (or run unsafely).
//
// mode bits: 1 storageClassName, 2 S3 destination, 4 a PVC destination claim, 8 restore from a backup,
// 16 S3 CA secret, 32 the backup overrides the destination, 64 related images for the version, 128 the
// member gate.
func FuzzBuilders(f *testing.F) {
	custom, _ := json.Marshal(customCluster().Spec.Pod)
	for _, s := range []struct {
		name, ns, version string
		replicas          uint8
		size, schedule    string
		repo              string
		labelK, labelV    string
		pod               string
		s3Endpoint        string
		s3Bucket, prefix  string
		claim, backup     string
		key               string
		mode              uint8
	}{
		{"prod-etcd", "db", "3.5.9", 3, "10Gi", "0 2 * * *", "gcr.io/etcd-development/etcd", "team", "storage", "", "https://minio.backup.svc:9000", "etcd", "prod", "", "before-upgrade", "prod/etcd/scheduled/etcd-20261122T020000Z-r42.db", 2 | 8 | 16 | 128},
		{"custom", "db", "3.5.9", 5, "10Gi", "", "registry.example.com/etcd", "team", "storage", string(custom), "", "", "", "old-backups", "b", "prod/old/on-demand/old-20261122T020000Z-r42.db", 1 | 4 | 8},
		{"e", "x", "3.6.5", 1, "1", "@daily", "gcr.io/etcd-development/etcd", "", "", "{}", "http://minio:9000", "bkt", "", "", "etcd", "k", 2 | 32 | 64},
		{"a-cluster-name-of-forty-five-characters-xxxxx", "a-namespace-name-that-is-sixty-three-characters-long-xxxxxxxxxx", "9999.9999.9999", 7, "1e3", "*/15 0-6 1,15 JAN-MAR mon-fri", "localhost:5000/etcd", "example.com/l", strings.Repeat("v", 63), "", "", "", "", "", strings.Repeat("b", 63), "k", 4 | 32},
		{"1etcd", "db", "3.5.9", 3, "8Gi", "", "gcr.io/etcd-development/etcd", "", "", "", "", "", "", "", "x.y", "", 0},
		{"gated", "db", "3.6.5", 3, "8Gi", "", "gcr.io/etcd-development/etcd", "", "", "", "", "", "", "", "b", "", 128},
	} {
		f.Add(s.name, s.ns, s.version, s.replicas, s.size, s.schedule, s.repo, s.labelK, s.labelV, s.pod, s.s3Endpoint, s.s3Bucket, s.prefix, s.claim, s.backup, s.key, s.mode)
	}
	clusters, err := crdtest.Load(filepath.Join("..", "..", "config", "crd", "bases", "etcd.seedops.io_etcdclusters.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	backups, err := crdtest.Load(filepath.Join("..", "..", "config", "crd", "bases", "etcd.seedops.io_etcdbackups.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name, ns, version string, replicas uint8, size, schedule, repo, labelK, labelV, pod,
		s3Endpoint, s3Bucket, prefix, claim, backupName, key string, mode uint8) {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			return // the API server only has namespaces with DNS label names
		}
		spec := map[string]any{"version": version, "replicas": int64(replicas), "storageSize": size, "repository": repo}
		if schedule != "" {
			spec["backupSchedule"] = schedule
		}
		if mode&1 != 0 {
			spec["storageClassName"] = "fast"
		}
		podSpec := map[string]any{}
		if pod != "" && utiljson.Unmarshal([]byte(pod), &podSpec) != nil {
			return
		}
		// Known gap, left for a decision: the CRD does not check pod label keys and values (a CEL rule with
		// format.qualifiedName() over an unbounded map is far over the CRD cost budget), so an invalid one is
		// refused only when the StatefulSet is applied (the cluster reports the API error as Degraded).
		if labelK != "" && len(validation.IsQualifiedName(labelK))+len(validation.IsValidLabelValue(labelV)) > 0 {
			return
		}
		if labelK != "" {
			labels, _ := podSpec["labels"].(map[string]any)
			if labels == nil {
				labels = map[string]any{}
			}
			labels[labelK] = labelV
			podSpec["labels"] = labels
		}
		spec["pod"] = podSpec
		dest := map[string]any{}
		switch {
		case mode&2 != 0:
			s3 := map[string]any{"endpoint": s3Endpoint, "bucket": s3Bucket, "prefix": prefix, "credentialsSecretName": "creds"}
			if mode&16 != 0 {
				s3["caSecretName"] = "ca"
			}
			dest["s3"] = s3
		case mode&4 != 0:
			dest["pvc"] = map[string]any{"claimName": claim}
		}
		if mode&32 == 0 {
			spec["backup"] = dest
		}
		obj := map[string]any{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}
		if errs := clusters.Create(obj); len(errs) > 0 {
			if debugAdmission {
				t.Logf("refused: %v", errs)
			}
			return
		}
		if debugAdmission {
			t.Logf("admitted %s", name)
		}
		c := &etcdv1beta1.EtcdCluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, c); err != nil {
			t.Fatalf("the CRD accepts %v but the operator cannot decode it: %v", obj, err)
		}
		c.UID = "0b7e6f1c-0000-4000-8000-000000000001"

		bspec := map[string]any{"clusterName": name}
		if mode&32 != 0 {
			bspec["destination"] = dest
		}
		bobj := map[string]any{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdBackup",
			"metadata": map[string]any{"name": backupName, "namespace": ns}, "spec": bspec}
		var b *etcdv1beta1.EtcdBackup
		if errs := backups.Create(bobj); len(errs) == 0 {
			b = &etcdv1beta1.EtcdBackup{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(bobj, b); err != nil {
				t.Fatalf("the CRD accepts %v but the operator cannot decode it: %v", bobj, err)
			}
			b.UID = "22222222-2222-2222-2222-222222222222"
		}

		o := DefaultOptions()
		if mode&64 != 0 {
			o.RelatedImages = RelatedImagesFromEnv([]string{"RELATED_IMAGE_ETCD_X=mirror.example.com/etcd:v" + c.Spec.Version + "@sha256:0123"})
		}
		var restore *RestoreSource
		if mode&8 != 0 && key != "" {
			restore = &RestoreSource{Destination: BackupDestination(c, nil), Key: key}
		}
		checkCluster(t, c, b, o, restore, mode&128 != 0)
	})
}

// debugAdmission logs what the CRDs refuse (FUZZ_DEBUG_ADMISSION=1 go test -run FuzzBuilders -v).
var debugAdmission = os.Getenv("FUZZ_DEBUG_ADMISSION") != ""

func checkCluster(t *testing.T, c *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup, o Options, restore *RestoreSource, gate bool) {
	t.Helper()
	n := c.Spec.Replicas
	d := BackupDestination(c, nil)
	sts := StatefulSet(c, n, o, restore, memberGate(o, gate))
	cm := ConfigMap(c, BootstrapConfig(c, int(n), o))
	objects := map[string]any{
		"StatefulSet": sts, "ConfigMap": cm, "peer Service": PeerService(c), "client Service": ClientService(c),
		"PodDisruptionBudget": PodDisruptionBudget(c, n),
	}
	if UsesDefaultBackupPVC(c, d) {
		objects["backup PVC"] = BackupPVC(c, d)
	}
	if c.Spec.BackupSchedule != "" {
		objects["CronJob"] = BackupCronJob(c, o)
	}
	if b != nil {
		objects["Job"] = BackupJob(c, b, o)
	}

	// Pure: the same input builds the same objects.
	for kind, obj := range objects {
		if _, err := yaml.Marshal(obj); err != nil {
			t.Fatalf("%s does not marshal: %v", kind, err)
		}
		checkMeta(t, kind, obj)
	}
	again, _ := yaml.Marshal(StatefulSet(c, n, o, restore, memberGate(o, gate)))
	first, _ := yaml.Marshal(sts)
	if string(again) != string(first) {
		t.Fatal("StatefulSet is not a pure function of its inputs")
	}

	// Names Kubernetes derives from ours.
	for kind, name := range map[string]string{"peer Service": PeerServiceName(c), "client Service": ClientServiceName(c)} {
		nameOK(t, kind, name, validation.IsDNS1035Label(name))
	}
	// The StatefulSet controller labels pods with controller-revision-hash=<name>-<hash of up to 10 chars>.
	nameOK(t, "StatefulSet", StatefulSetName(c), validation.IsDNS1123Label(StatefulSetName(c)+"-0123456789"))
	nameOK(t, "continuous backup StatefulSet", ContinuousBackupName(c), validation.IsDNS1123Label(ContinuousBackupName(c)+"-0123456789"))
	nameOK(t, "point-in-time Job", PointInTimeJobName(c), append(validation.IsDNS1123Label(PointInTimeJobName(c)), validation.IsValidLabelValue(PointInTimeJobName(c))...))
	recoveryJob := PointInTimeRecoveryJobName(c, "restore-20261122T120500Z")
	nameOK(t, "point-in-time recovery Job", recoveryJob, append(validation.IsDNS1123Label(recoveryJob), validation.IsValidLabelValue(recoveryJob)...))
	for i := range int(n) {
		nameOK(t, "member pod (its hostname)", MemberName(c, i), validation.IsDNS1123Label(MemberName(c, i)))
		nameOK(t, "member host", MemberHost(c, i, o), validation.IsDNS1123Subdomain(MemberHost(c, i, o)))
		nameOK(t, "member data claim", DataVolumeName+"-"+MemberName(c, i), validation.IsDNS1123Subdomain(DataVolumeName+"-"+MemberName(c, i)))
	}
	if cj, ok := objects["CronJob"]; ok {
		name := *cj.(*batchv1ac.CronJobApplyConfiguration).GetName()
		if len(name) > 52 {
			t.Fatalf("CronJob name %q is longer than the 52 characters Kubernetes allows", name)
		}
		// Jobs of a CronJob are <cronjob>-<minutes since epoch> and labelled with their name.
		nameOK(t, "scheduled Job", name+"-29000000", validation.IsValidLabelValue(name+"-29000000"))
	}
	if b != nil {
		job := BackupJobName(b)
		nameOK(t, "backup Job", job, append(validation.IsDNS1123Subdomain(job), validation.IsValidLabelValue(job)...))
	}

	// Replicas and quorum.
	if *sts.Spec.Replicas != n {
		t.Fatalf("StatefulSet replicas %d, spec %d", *sts.Spec.Replicas, n)
	}
	pdb := PodDisruptionBudget(c, n)
	if got := int32(pdb.Spec.MinAvailable.IntValue()); got != n/2+1 || got > n {
		t.Fatalf("PDB minAvailable %d for %d members", got, n)
	}
	if got := strings.Count(cm.Data["ETCD_INITIAL_CLUSTER"], "="+scheme(c)+"://"); got != int(n) {
		t.Fatalf("ETCD_INITIAL_CLUSTER has %d members, want %d: %s", got, n, cm.Data["ETCD_INITIAL_CLUSTER"])
	}
	for i, part := range strings.Split(cm.Data["ETCD_INITIAL_CLUSTER"], ",") {
		member, peer, _ := strings.Cut(part, "=")
		if member != MemberName(c, i) {
			t.Fatalf("initial cluster entry %d is %q", i, part)
		}
		urlOK(t, scheme(c), "peer URL", peer, MemberHost(c, i, o))
	}
	urlOK(t, scheme(c), "client endpoint", ClientEndpoint(c, o), "")

	// The pod selector selects the pods the template makes, and user labels cannot change that.
	for k, v := range SelectorLabels(c) {
		if sts.Spec.Selector.MatchLabels[k] != v || sts.Spec.Template.Labels[k] != v {
			t.Fatalf("selector label %s=%s missing from the selector or the pod template %v", k, v, sts.Spec.Template.Labels)
		}
	}

	// Environment: the ConfigMap only holds etcd settings, none of which the container also sets, and the
	// container's $(VAR) references resolve to variables defined before them.
	for k := range cm.Data {
		if len(validation.IsEnvVarName(k)) > 0 || !strings.HasPrefix(k, "ETCD_") {
			t.Fatalf("ConfigMap key %q is not an ETCD_* variable", k)
		}
	}
	etcd := sts.Spec.Template.Spec.Containers[0]
	if *etcd.Name != "etcd" || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("member pod containers %v", sts.Spec.Template.Spec.Containers)
	}
	if !strings.HasSuffix(*etcd.Image, ":v"+c.Spec.Version) && !strings.Contains(*etcd.Image, ":v"+c.Spec.Version+"@") {
		t.Fatalf("image %s does not run version %s", *etcd.Image, c.Spec.Version)
	}
	defined := map[string]bool{}
	for _, e := range etcd.Env {
		if defined[*e.Name] {
			t.Fatalf("env %s set twice", *e.Name)
		}
		if _, inCM := cm.Data[*e.Name]; inCM {
			t.Fatalf("env %s is set both in the container and in the ConfigMap", *e.Name)
		}
		if e.Value != nil {
			for _, ref := range refs(*e.Value) {
				if !defined[ref] {
					t.Fatalf("env %s refers to $(%s) before it is defined", *e.Name, ref)
				}
			}
		}
		defined[*e.Name] = true
	}
	for _, e := range etcd.Env {
		if e.Value != nil && strings.HasSuffix(*e.Name, "_URLS") {
			v := strings.NewReplacer("$(POD_NAME)", MemberName(c, 0), "$(POD_NAMESPACE)", c.Namespace).Replace(*e.Value)
			urlOK(t, scheme(c), *e.Name, v, MemberHost(c, 0, o))
		}
	}

	// Every pod the operator creates meets the restricted Pod Security Standard.
	pods := map[string]*corev1ac.PodSpecApplyConfiguration{"member": sts.Spec.Template.Spec}
	if cj, ok := objects["CronJob"]; ok {
		pods["scheduled backup"] = cj.(*batchv1ac.CronJobApplyConfiguration).Spec.JobTemplate.Spec.Template.Spec
	}
	if b != nil {
		pods["on-demand backup"] = BackupJob(c, b, o).Spec.Template.Spec
	}
	for kind, p := range pods {
		restricted(t, kind, p)
	}
	// Init containers: the gate first, then the restore, each reading etcd's own configuration (the same
	// variables and the same ConfigMap).
	init := sts.Spec.Template.Spec.InitContainers
	var want []string
	if gate {
		want = append(want, MemberGateContainerName)
	}
	if restore != nil {
		want = append(want, RestoreContainerName)
	}
	var got []string
	for _, ic := range init {
		got = append(got, *ic.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("member init containers %v, want %v", got, want)
	}
	for _, ic := range init {
		for i := range etcd.Env {
			if !reflect.DeepEqual(ic.Env[i], etcd.Env[i]) {
				t.Fatalf("%s env %d differs from etcd's: %v vs %v", *ic.Name, i, ic.Env[i], etcd.Env[i])
			}
		}
		if !reflect.DeepEqual(ic.EnvFrom, etcd.EnvFrom) {
			t.Fatalf("%s envFrom differs from etcd's", *ic.Name)
		}
	}
	if gate {
		// The gate sees the data directory and the peer certificate where etcd does.
		mounts := map[string]string{}
		for _, m := range init[0].VolumeMounts {
			mounts[*m.Name] = *m.MountPath
		}
		for _, m := range etcd.VolumeMounts {
			if *m.Name != DataVolumeName && *m.Name != peerTLSVolume && *m.Name != MemberStartVolume {
				continue
			}
			if mounts[*m.Name] != *m.MountPath {
				t.Fatalf("member gate mounts %v, etcd mounts %s at %s", mounts, *m.Name, *m.MountPath)
			}
		}
		if !reflect.DeepEqual(init[0].Args, []string{"member-gate", MemberGateTicketFlag + MemberStartMountPath}) || *init[0].Image != o.OperatorImage {
			t.Fatalf("member gate runs %s %v", *init[0].Image, init[0].Args)
		}
	}
	if restore != nil && !contains(init[len(init)-1].Args, "--key="+restore.Key) {
		t.Fatalf("restore args %v lack the key", init[len(init)-1].Args)
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// refs lists the $(VAR) references the kubelet expands in an env value.
func refs(v string) []string {
	var out []string
	for {
		i := strings.Index(v, "$(")
		if i < 0 {
			return out
		}
		j := strings.Index(v[i:], ")")
		if j < 0 {
			return out
		}
		out = append(out, v[i+2:i+j])
		v = v[i+j+1:]
	}
}

func nameOK(t *testing.T, kind, name string, errs []string) {
	t.Helper()
	if len(errs) > 0 {
		t.Fatalf("%s name %q is invalid: %s", kind, name, strings.Join(errs, "; "))
	}
}

func urlOK(t *testing.T, wantScheme, what, raw, host string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != wantScheme || u.Port() == "" {
		t.Fatalf("%s %q is not an %s URL with a port: %v", what, raw, wantScheme, err)
	}
	if len(validation.IsDNS1123Subdomain(u.Hostname())) > 0 || (host != "" && u.Hostname() != host) {
		t.Fatalf("%s %q: host %q is not a valid DNS name (want %q)", what, raw, u.Hostname(), host)
	}
}

// checkMeta checks an object's name, namespace and labels as the API server would.
func checkMeta(t *testing.T, kind string, obj any) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	var m struct {
		Metadata struct {
			Name            string                                      `json:"name"`
			Namespace       string                                      `json:"namespace"`
			Labels          map[string]string                           `json:"labels"`
			OwnerReferences []metav1ac.OwnerReferenceApplyConfiguration `json:"ownerReferences"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	nameOK(t, kind, m.Metadata.Name, validation.IsDNS1123Subdomain(m.Metadata.Name))
	labelsOK(t, kind, m.Metadata.Labels)
	// Every label map nested in the object (pod templates, selectors, claim templates) is valid too.
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				if k == "labels" || k == "matchLabels" || k == "nodeSelector" {
					if lm, ok := child.(map[string]any); ok {
						s := map[string]string{}
						for lk, lv := range lm {
							s[lk], _ = lv.(string)
						}
						if k != "nodeSelector" {
							labelsOK(t, kind+" "+path+"."+k, s)
						}
						continue
					}
				}
				walk(path+"."+k, child)
			}
		case []any:
			for i, child := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), child)
			}
		}
	}
	var spec any
	_ = json.Unmarshal(m.Spec, &spec)
	walk("spec", spec)
}

func labelsOK(t *testing.T, where string, labels map[string]string) {
	t.Helper()
	for k, v := range labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			t.Fatalf("%s: label %s=%q is invalid: %s", where, k, v, strings.Join(errs, "; "))
		}
	}
}

// restricted checks the restricted Pod Security Standard's rules that the builders control.
func restricted(t *testing.T, kind string, p *corev1ac.PodSpecApplyConfiguration) {
	t.Helper()
	sc := p.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || *sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("%s pod: security context must run as non-root with the RuntimeDefault seccomp profile", kind)
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Fatalf("%s pod runs as root", kind)
	}
	if p.HostNetwork != nil && *p.HostNetwork || p.HostPID != nil && *p.HostPID || p.HostIPC != nil && *p.HostIPC {
		t.Fatalf("%s pod uses host namespaces", kind)
	}
	if p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken {
		t.Fatalf("%s pod mounts a service account token it does not need", kind)
	}
	volumes := map[string]bool{}
	for _, v := range p.Volumes {
		if v.HostPath != nil {
			t.Fatalf("%s pod: volume %s is a hostPath", kind, *v.Name)
		}
		if volumes[*v.Name] {
			t.Fatalf("%s pod: volume %s twice", kind, *v.Name)
		}
		volumes[*v.Name] = true
	}
	if kind == "member" {
		volumes[DataVolumeName] = true // the claim template
	}
	for _, c := range append(append([]corev1ac.ContainerApplyConfiguration{}, p.InitContainers...), p.Containers...) {
		s := c.SecurityContext
		if s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.Capabilities == nil ||
			!reflect.DeepEqual(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) > 0 ||
			(s.Privileged != nil && *s.Privileged) || s.RunAsNonRoot == nil || !*s.RunAsNonRoot {
			t.Fatalf("%s pod: container %s must drop ALL capabilities, add none, run as non-root and disallow privilege escalation", kind, *c.Name)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[*m.Name] {
				t.Fatalf("%s pod: container %s mounts unknown volume %s", kind, *c.Name, *m.Name)
			}
		}
	}
}

// FuzzBackupJobName: for every EtcdBackup name the API server accepts (a DNS subdomain, at most 63
// characters by the CRD), the Job name is a valid Job name and job-name label value, and distinct backups
// get distinct Jobs.
func FuzzBackupJobName(f *testing.F) {
	for _, s := range []string{"before-upgrade", strings.Repeat("b", 63), strings.Repeat("a", 42) + ".b" + strings.Repeat("c", 19), "a.b.c"} {
		f.Add(s, s+"x")
		f.Add(s, strings.TrimSuffix(s, "c")+"d")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		valid := func(n string) bool { return len(validation.IsDNS1123Subdomain(n)) == 0 && len(n) <= 63 }
		if !valid(a) {
			return
		}
		ja := BackupJobName(&etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: a}})
		nameOK(t, "backup Job", ja, append(validation.IsDNS1123Subdomain(ja), validation.IsValidLabelValue(ja)...))
		if !valid(b) {
			return
		}
		jb := BackupJobName(&etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: b}})
		if a != b && ja == jb {
			t.Fatalf("backups %q and %q share the Job %q", a, b, ja)
		}
	})
}

// FuzzRelatedImagesFromEnv: any environment parses without panic into version -> image entries whose image
// is the variable's whole value and whose version is the tag the value carries.
func FuzzRelatedImagesFromEnv(f *testing.F) {
	f.Add("RELATED_IMAGE_ETCD_3_5=mirror.example.com/etcd:v3.5.9", "RELATED_IMAGE_ETCD_3_6=mirror.example.com/etcd:v3.6.5@sha256:0123")
	f.Add("RELATED_IMAGE_ETCD_X=localhost:5000/etcd:v3.5.9", "RELATED_IMAGE_ETCD_Y=host:5000/v2/etcd")
	f.Fuzz(func(t *testing.T, a, b string) {
		for version, img := range RelatedImagesFromEnv([]string{a, b, "PATH=/bin"}) {
			if !strings.Contains(a, "="+img) && !strings.Contains(b, "="+img) {
				t.Fatalf("image %q for %q is no variable's value", img, version)
			}
			if !strings.Contains(img, ":v"+version) {
				t.Fatalf("image %q is not tagged v%s", img, version)
			}
		}
	})
}

// memberGate is this operator's gate for a template with the gate, none for one without.
func memberGate(o Options, gate bool) MemberGate {
	if gate {
		return CurrentMemberGate(o)
	}
	return MemberGate{}
}

// FuzzMemberOrdinal: the ordinal of a member name reads back exactly what MemberName wrote, and any other
// name (a pod or claim of another cluster sharing the prefix, "01", "-1", "+1") is not a member (-1).
func FuzzMemberOrdinal(f *testing.F) {
	for _, s := range []string{"prod-etcd-0", "prod-etcd-10", "prod-etcd-01", "prod-etcd--1", "prod-etcd-+1", "prod-etcd-x-1", "prod-etcd-9223372036854775808", "prod-etcd"} {
		f.Add("prod-etcd", s, 3)
	}
	f.Fuzz(func(t *testing.T, cluster, name string, i int) {
		c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
		got := MemberOrdinal(c, name)
		if got < -1 {
			t.Fatalf("MemberOrdinal(%q) = %d", name, got)
		}
		if got >= 0 && MemberName(c, got) != name {
			t.Fatalf("MemberOrdinal(%q) = %d, but member %d is named %q", name, got, got, MemberName(c, got))
		}
		if i >= 0 {
			if got := MemberOrdinal(c, MemberName(c, i)); got != i {
				t.Fatalf("MemberOrdinal(MemberName(%d)) = %d", i, got)
			}
		}
	})
}

// FuzzRestoreFailure: whatever a failed restore container wrote as its termination message (JSON result or
// a log tail), the cluster's message names the member and carries the error.
func FuzzRestoreFailure(f *testing.F) {
	for _, s := range []string{`{"error":"snapshot missing"}`, "panic: boom", "", `{"error":""}`, `{"error":1}`, "{"} {
		f.Add(s, int32(1))
	}
	f.Fuzz(func(t *testing.T, msg string, code int32) {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd-1"}, Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: RestoreContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
		got := RestoreFailure([]corev1.Pod{pod})
		if code == 0 {
			if got != "" {
				t.Fatalf("a restore that exited 0 reported %q", got)
			}
			return
		}
		if !strings.Contains(got, "prod-etcd-1") {
			t.Fatalf("restore failure %q does not name the member", got)
		}
	})
}
