package scorecard

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

func csvWithExamples(examples string) *operatorsv1alpha1.ClusterServiceVersion {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	csv.Name = "etcd-operator.v0.0.1"
	csv.Annotations = map[string]string{ALMExamplesAnnotation: examples}
	return csv
}

func TestParseExamples(t *testing.T) {
	x, err := ParseExamples(csvWithExamples(`[
	  {"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster", "metadata": {"name": "a", "labels": {"x": "y"}},
	   "spec": {"version": "3.5.9", "replicas": 3, "storageSize": "10Gi", "backupSchedule": "0 2 * * *"}},
	  {"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdBackup", "metadata": {"name": "a-backup"}, "spec": {"clusterName": "a"}},
	  {"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdRestore", "metadata": {"name": "other-kind"}, "spec": {}},
	  {"apiVersion": "other.example.com/v1", "kind": "EtcdCluster", "metadata": {"name": "other-group"}},
	  {"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster", "metadata": {"name": "b"},
	   "spec": {"version": "3.6.16", "replicas": 5, "backup": {"s3": {"endpoint": "https://s3", "bucket": "x", "credentialsSecretName": "c"}}}},
	  {"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster", "metadata": {"name": "r"},
	   "spec": {"version": "3.5.9", "bootstrap": {"fromBackup": {"backupName": "a-backup"}}}}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Backups) != 1 || x.Backups[0].Name != "a-backup" || x.Backups[0].Spec.ClusterName != "a" {
		t.Errorf("backups %+v, want a-backup of a", x.Backups)
	}
	if len(x.Clusters) != 3 || RestoresFrom(&x.Clusters[2]) != "a-backup" || RestoresFrom(&x.Clusters[0]) != "" {
		t.Fatalf("clusters %+v, want a, b and r restoring a-backup", x.Clusters)
	}
	if p, ok := x.Plain(); !ok || p.Name != "a" {
		t.Errorf("Plain = %s, %t; want a", p.Name, ok)
	}
	if _, ok := (Examples{Clusters: x.Clusters[2:]}).Plain(); ok {
		t.Error("Plain found a cluster among restoring ones")
	}
	got := x.Clusters[:2]
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("got %d examples %v, want a and b", len(got), got)
	}
	if got[0].Spec.Version != "3.5.9" || got[0].Spec.Replicas != 3 || got[0].Spec.StorageSize.Cmp(resource.MustParse("10Gi")) != 0 ||
		got[0].Labels["x"] != "y" {
		t.Errorf("first example decoded as %+v", got[0])
	}
	if got[1].Spec.Backup.S3 == nil || got[1].Spec.Backup.S3.CredentialsSecretName != "c" {
		t.Errorf("second example's backup decoded as %+v", got[1].Spec.Backup)
	}
}

func TestEtcdClusterExamplesErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]string
		want        string
	}{
		"no annotation":  {nil, "has no alm-examples annotation"},
		"empty":          {map[string]string{ALMExamplesAnnotation: ""}, "has no alm-examples annotation"},
		"not an array":   {map[string]string{ALMExamplesAnnotation: `{"kind": "EtcdCluster"}`}, "not a JSON array"},
		"no EtcdCluster": {map[string]string{ALMExamplesAnnotation: `[]`}, "has no etcd.seedops.io/v1beta1, Kind=EtcdCluster"},
		// A misspelt field would be dropped by the API server: the example would not do what it shows.
		"unknown field": {map[string]string{ALMExamplesAnnotation: `[{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster",
		  "metadata": {"name": "a"}, "spec": {"version": "3.5.9", "replica": 3}}]`}, `unknown field "replica"`},
		"no name": {map[string]string{ALMExamplesAnnotation: `[{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdCluster",
		  "spec": {"version": "3.5.9"}}]`}, "has no metadata.name"},
		"unknown backup field": {map[string]string{ALMExamplesAnnotation: `[{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdBackup",
		  "metadata": {"name": "b"}, "spec": {"cluster": "a"}}]`}, `unknown field "cluster"`},
		"only backups": {map[string]string{ALMExamplesAnnotation: `[{"apiVersion": "etcd.seedops.io/v1beta1", "kind": "EtcdBackup",
		  "metadata": {"name": "b"}, "spec": {"clusterName": "a"}}]`}, "has no etcd.seedops.io/v1beta1, Kind=EtcdCluster"},
		"bad apiVersion": {map[string]string{ALMExamplesAnnotation: `[{"apiVersion": "a/b/c", "kind": "EtcdCluster"}]`}, `apiVersion "a/b/c"`},
	} {
		t.Run(name, func(t *testing.T) {
			csv := &operatorsv1alpha1.ClusterServiceVersion{}
			csv.Annotations = tc.annotations
			_, err := ParseExamples(csv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The committed bundle is what the scorecard hands to the tests: its examples must parse, and they must be
// the samples config/samples holds.
func TestBundleExamples(t *testing.T) {
	csv, err := LoadCSV("../../bundle")
	if err != nil {
		t.Fatal(err)
	}
	x, err := ParseExamples(csv)
	if err != nil {
		t.Fatal(err)
	}
	examples := x.Clusters
	b, err := os.ReadFile("../../config/samples/etcd_v1beta1_etcdcluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sample etcdv1beta1.EtcdCluster
	if err := yaml.UnmarshalStrict(b, &sample); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(examples, func(c etcdv1beta1.EtcdCluster) bool { return c.Name == sample.Name })
	if i < 0 {
		t.Fatalf("the bundle's alm-examples lack the sample %s", sample.Name)
	}
	if examples[i].Spec.Version != sample.Spec.Version || examples[i].Spec.Replicas != sample.Spec.Replicas {
		t.Errorf("alm-example %s is %+v, the sample is %+v: run make bundle", sample.Name, examples[i].Spec, sample.Spec)
	}
}

func TestForTest(t *testing.T) {
	ex := etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: "elsewhere", Labels: map[string]string{"team": "a"},
			ResourceVersion: "12", UID: "u"},
		Spec:   etcdv1beta1.EtcdClusterSpec{Version: "3.5.9", Replicas: 3, StorageSize: resource.MustParse("10Gi")},
		Status: etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning},
	}
	c := ForTest(ex, "scorecard", "alm-example-available")
	if c.Name != "" || c.GenerateName != "prod-etcd-" || c.Namespace != "scorecard" || c.ResourceVersion != "" || c.UID != "" {
		t.Errorf("object meta %+v: want a generated name from prod-etcd- in scorecard, nothing server-set", c.ObjectMeta)
	}
	if c.Labels["team"] != "a" || c.Labels[TestLabel] != "alm-example-available" {
		t.Errorf("labels %v", c.Labels)
	}
	if c.Status.Phase != "" || c.Spec.Version != "3.5.9" || c.Spec.Replicas != 3 {
		t.Errorf("spec %+v status %+v: want the example's spec and no status", c.Spec, c.Status)
	}
	if c.APIVersion != "etcd.seedops.io/v1beta1" || c.Kind != "EtcdCluster" {
		t.Errorf("type %s %s", c.APIVersion, c.Kind)
	}
	c.Labels["team"] = "b"
	c.Spec.Replicas = 5
	if ex.Labels["team"] != "a" || ex.Spec.Replicas != 3 {
		t.Error("ForTest shares maps or spec with the example")
	}
}

func cluster(gen, observed int64, replicas, ready int32, available metav1.ConditionStatus, members ...etcdv1beta1.MemberStatus) *etcdv1beta1.EtcdCluster {
	c := &etcdv1beta1.EtcdCluster{}
	c.Name = "c"
	c.Generation = gen
	c.Spec.Replicas = replicas
	c.Status.ObservedGeneration = observed
	c.Status.ReadyReplicas = ready
	c.Status.Members = members
	if available != "" {
		c.Status.Conditions = []metav1.Condition{
			{Type: etcdv1beta1.ConditionAvailable, Status: available, Reason: "R", Message: "m"},
			{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Scaling", Message: "adding c-3"},
		}
	}
	return c
}

func voter(name string) etcdv1beta1.MemberStatus {
	return etcdv1beta1.MemberStatus{Name: name, ID: "id-" + name, Healthy: true}
}

func TestAvailable(t *testing.T) {
	for name, tc := range map[string]struct {
		c    *etcdv1beta1.EtcdCluster
		ok   bool
		want string
	}{
		"available":         {cluster(2, 2, 3, 3, metav1.ConditionTrue), true, ""},
		"old status":        {cluster(2, 1, 3, 3, metav1.ConditionTrue), false, "status is of generation 1, spec is generation 2"},
		"no condition":      {cluster(1, 1, 3, 3, ""), false, "no Available condition"},
		"not available":     {cluster(1, 1, 3, 3, metav1.ConditionFalse), false, "Available=False (R: m); Progressing=True (Scaling: adding c-3)"},
		"replicas not read": {cluster(1, 1, 3, 2, metav1.ConditionTrue), false, "readyReplicas 2, spec.replicas 3"},
	} {
		t.Run(name, func(t *testing.T) {
			ok, why := Available(tc.c)
			if ok != tc.ok || !strings.Contains(why, tc.want) {
				t.Errorf("Available = %t, %q; want %t, %q", ok, why, tc.ok, tc.want)
			}
		})
	}
}

func TestVotingMembers(t *testing.T) {
	learner := voter("c-4")
	learner.Learner = true
	sick := voter("c-4")
	sick.Healthy = false
	unknown := voter("c-4")
	unknown.Unknown = true
	five := []etcdv1beta1.MemberStatus{voter("c-0"), voter("c-1"), voter("c-2"), voter("c-3"), voter("c-4")}
	for name, tc := range map[string]struct {
		c    *etcdv1beta1.EtcdCluster
		n    int32
		ok   bool
		want string
	}{
		"five voters":      {cluster(2, 2, 5, 5, metav1.ConditionTrue, five...), 5, true, ""},
		"spec not changed": {cluster(1, 1, 3, 3, metav1.ConditionTrue, five[:3]...), 5, false, "spec.replicas is 3, want 5"},
		"not available":    {cluster(2, 2, 5, 5, metav1.ConditionFalse, five...), 5, false, "Available=False"},
		"member missing":   {cluster(2, 2, 5, 5, metav1.ConditionTrue, five[:4]...), 5, false, "4 members in status (c-0 c-1 c-2 c-3), want 5"},
		"learner": {cluster(2, 2, 5, 5, metav1.ConditionTrue, append(slices.Clone(five[:4]), learner)...), 5, false,
			"member c-4 is still a learner"},
		"unhealthy": {cluster(2, 2, 5, 5, metav1.ConditionTrue, append(slices.Clone(five[:4]), sick)...), 5, false,
			"member c-4 is not healthy"},
		"unknown": {cluster(2, 2, 5, 5, metav1.ConditionTrue, append(slices.Clone(five[:4]), unknown)...), 5, false,
			"was not added by the operator"},
		"duplicate": {cluster(2, 2, 5, 5, metav1.ConditionTrue, append(slices.Clone(five[:4]), voter("c-0"))...), 5, false,
			"member c-0 is listed twice"},
		// Scale-down: the pods are gone but etcd still lists a removed member.
		"removed member still listed": {cluster(3, 3, 3, 3, metav1.ConditionTrue, five[:4]...), 3, false, "4 members in status"},
		"three after scale-down":      {cluster(3, 3, 3, 3, metav1.ConditionTrue, five[:3]...), 3, true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			ok, why := VotingMembers(tc.n)(tc.c)
			if ok != tc.ok || !strings.Contains(why, tc.want) {
				t.Errorf("VotingMembers(%d) = %t, %q; want %t, %q", tc.n, ok, why, tc.ok, tc.want)
			}
		})
	}
}

func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(1500 * time.Millisecond); return t }
}

func TestResultStatus(t *testing.T) {
	r := newResult("scale-up-down", fakeClock())
	r.Logf("created %s", "c")
	r.Finish()
	st := r.Status()
	if len(st.Results) != 1 {
		t.Fatalf("%d results", len(st.Results))
	}
	got := st.Results[0]
	if got.Name != "scale-up-down" || got.State != v1alpha3.PassState || len(got.Errors) != 0 {
		t.Errorf("finished without errors: got %+v, want pass", got)
	}
	if want := "[   1.5s] created c\n[   3.0s] done"; got.Log != want {
		t.Errorf("log %q, want %q", got.Log, want)
	}

	r = newResult("alm-example-available", fakeClock())
	r.Errorf("c: not Available within %s", "5m0s")
	r.Suggest("check the operator's logs")
	r.Suggest("check the operator's logs")
	r.Finish()
	got = r.Status().Results[0]
	if got.State != v1alpha3.FailState || !slices.Equal(got.Errors, []string{"c: not Available within 5m0s"}) ||
		len(got.Suggestions) != 1 || !strings.Contains(got.Log, "ERROR: c: not Available") {
		t.Errorf("with an error: got %+v, want fail with the error in errors and log", got)
	}

	// Cut short (a signal): no error recorded, yet not a pass.
	r = newResult("scale-up-down", fakeClock())
	r.Logf("created c")
	got = r.Status().Results[0]
	if got.State != v1alpha3.FailState || !slices.Contains(got.Errors, "the test did not run to its end") {
		t.Errorf("unfinished: got %+v, want fail", got)
	}

	// The scorecard parses exactly this JSON from the pod's log.
	b, err := json.Marshal(r.Status())
	if err != nil {
		t.Fatal(err)
	}
	var back v1alpha3.TestStatus
	if err := json.Unmarshal(b, &back); err != nil || back.Results[0].State != v1alpha3.FailState {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

func TestSummary(t *testing.T) {
	test := func(suite, name string, results ...v1alpha3.TestResult) v1alpha3.Test {
		tt := v1alpha3.NewTest()
		tt.Spec.Labels = map[string]string{"suite": suite, "test": name}
		tt.Status.Results = results
		return tt
	}
	list := v1alpha3.NewTestList()
	list.Items = []v1alpha3.Test{
		test("olm", "olm-bundle-validation-test", v1alpha3.TestResult{Name: "olm-bundle-validation", State: v1alpha3.PassState}),
		test("custom", "scale-up-down", v1alpha3.TestResult{Name: "scale-up-down", State: v1alpha3.FailState,
			Errors: []string{"c: not 5 healthy voting members", "pods: c-4 ImagePullBackOff"}}),
		test("custom", "alm-example-available"),
	}
	lines, notPassed := Summary(list)
	want := []string{
		"fail  custom/alm-example-available (no result)",
		"fail  custom/scale-up-down scale-up-down: c: not 5 healthy voting members; pods: c-4 ImagePullBackOff",
		"pass  olm/olm-bundle-validation-test olm-bundle-validation",
	}
	if notPassed != 2 || !slices.Equal(lines, want) {
		t.Errorf("Summary = %q, %d; want %q, 2", lines, notPassed, want)
	}
	if lines, notPassed := Summary(v1alpha3.NewTestList()); notPassed != 1 || lines[0] != "no scorecard test ran" {
		t.Errorf("empty list: %q, %d; want a failure", lines, notPassed)
	}
}

func TestPodProblems(t *testing.T) {
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-1"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "gcr.io/etcd-development/etcd:v3.5.9"`}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-2"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-3"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/1 nodes are available"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-4"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", RestartCount: 3, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}}},
	}
	want := []string{
		`c-1/etcd waiting ImagePullBackOff Back-off pulling image "gcr.io/etcd-development/etcd:v3.5.9"`,
		"c-3 unschedulable: 0/1 nodes are available",
		"c-4/etcd restarted 3 times, last terminated Error exit 1",
	}
	if got := podProblems(pods); !slices.Equal(got, want) {
		t.Errorf("podProblems = %q, want %q", got, want)
	}
	if got := describePods(pods[:2]); len(got) != 2 || got[0] != "c-0 Running [etcd ready=true restarts=0 running]" {
		t.Errorf("describePods = %q", got)
	}
}

func TestWarningEvents(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC)) }
	ev := func(kind, name, typ, reason string, s int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Type: typ, Reason: reason,
			Message: reason + " happened", LastTimestamp: at(s)}
	}
	events := []corev1.Event{
		ev("Pod", "c-0", corev1.EventTypeWarning, "Failed", 3),
		ev("EtcdCluster", "c", corev1.EventTypeWarning, "MemberAddFailed", 2),
		ev("PersistentVolumeClaim", "data-c-1", corev1.EventTypeWarning, "ProvisioningFailed", 1),
		ev("Pod", "c-0", corev1.EventTypeNormal, "Pulled", 4),
		ev("Pod", "cc-0", corev1.EventTypeWarning, "Failed", 5), // another cluster whose name starts alike
	}
	got := warningEvents(events, "c", 2)
	want := []string{
		"00:00:02 EtcdCluster/c MemberAddFailed (x1): MemberAddFailed happened",
		"00:00:03 Pod/c-0 Failed (x1): Failed happened",
	}
	if !slices.Equal(got, want) {
		t.Errorf("warningEvents = %q, want %q", got, want)
	}
}

func TestLocalConfig(t *testing.T) {
	cfg := v1alpha3.Configuration{Stages: []v1alpha3.StageConfiguration{
		{Parallel: true, Tests: []v1alpha3.TestConfiguration{
			{Image: "quay.io/operator-framework/scorecard-test:v1.42.3", Entrypoint: []string{"scorecard-test", "basic-check-spec"}},
		}},
		{Tests: []v1alpha3.TestConfiguration{
			{Image: "ghcr.io/seedops/etcd-operator-scorecard-tests:v0.2.0", Labels: map[string]string{"suite": "custom", "test": "scale-up-down"}},
		}},
	}}
	images := map[string]string{
		"quay.io/operator-framework/scorecard-test:v1.42.3":    "localhost:5000/scorecard-test:v1.42.3-abc",
		"ghcr.io/seedops/etcd-operator-scorecard-tests:v0.2.0": "localhost:5000/etcd-operator-scorecard-tests:v0.2.0-def",
	}
	got, err := LocalConfig(cfg, images)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stages[0].Tests[0].Image != "localhost:5000/scorecard-test:v1.42.3-abc" ||
		got.Stages[1].Tests[0].Image != "localhost:5000/etcd-operator-scorecard-tests:v0.2.0-def" ||
		!got.Stages[0].Parallel || got.Stages[0].Tests[0].Entrypoint[1] != "basic-check-spec" {
		t.Errorf("rewritten config %+v", got)
	}
	if cfg.Stages[0].Tests[0].Image != "quay.io/operator-framework/scorecard-test:v1.42.3" {
		t.Error("LocalConfig changed its input")
	}
	// A tag that did not follow VERSION has no local build.
	delete(images, "ghcr.io/seedops/etcd-operator-scorecard-tests:v0.2.0")
	images["ghcr.io/seedops/etcd-operator-scorecard-tests:v0.3.0"] = "localhost:5000/etcd-operator-scorecard-tests:v0.3.0-def"
	if _, err := LocalConfig(cfg, images); err == nil || !strings.Contains(err.Error(),
		"test custom/scale-up-down: no local build of image ghcr.io/seedops/etcd-operator-scorecard-tests:v0.2.0") {
		t.Errorf("error %v, want the unmapped image named", err)
	}
}

func TestDefaultRepositoryVersions(t *testing.T) {
	ex := func(repo, version string) etcdv1beta1.EtcdCluster {
		return etcdv1beta1.EtcdCluster{Spec: etcdv1beta1.EtcdClusterSpec{Repository: repo, Version: version}}
	}
	got := DefaultRepositoryVersions([]etcdv1beta1.EtcdCluster{
		ex("", "3.5.9"), ex("gcr.io/etcd-development/etcd", "3.5.9"), ex("gcr.io/etcd-development/etcd", "3.6.16"),
		ex("registry.example.com/etcd", "3.5.1"),
	})
	if want := []string{"3.5.9", "3.6.16"}; !slices.Equal(got, want) {
		t.Errorf("DefaultRepositoryVersions = %q, want %q", got, want)
	}
}

func TestBackupForTest(t *testing.T) {
	ex := etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd-before-upgrade", ResourceVersion: "3"},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: "prod-etcd"}}
	b := BackupForTest(ex, "scorecard", "backup-taken", "prod-etcd-x7k2p")
	if b.GenerateName != "prod-etcd-before-upgrade-" || b.Name != "" || b.Namespace != "scorecard" || b.ResourceVersion != "" ||
		b.Spec.ClusterName != "prod-etcd-x7k2p" || b.Labels[TestLabel] != "backup-taken" || b.Kind != "EtcdBackup" {
		t.Errorf("BackupForTest = %+v", b)
	}
	if ex.Spec.ClusterName != "prod-etcd" {
		t.Error("BackupForTest changed the example")
	}
}

func TestBackupSucceeded(t *testing.T) {
	backup := func(phase etcdv1beta1.BackupPhase, location string, size, rev int64, errMsg string) *etcdv1beta1.EtcdBackup {
		b := &etcdv1beta1.EtcdBackup{}
		b.Status = etcdv1beta1.EtcdBackupStatus{Phase: phase, Location: location, SizeBytes: size, Revision: rev, Error: errMsg}
		return b
	}
	for name, tc := range map[string]struct {
		b       *etcdv1beta1.EtcdBackup
		ok      bool
		why     string
		wantErr string
	}{
		"new":       {backup("", "", 0, 0, ""), false, "no phase yet", ""},
		"waiting":   {backup(etcdv1beta1.BackupPending, "", 0, 0, "EtcdCluster c not found in namespace n"), false, "Pending (EtcdCluster c not found", ""},
		"running":   {backup(etcdv1beta1.BackupRunning, "", 0, 0, ""), false, "Running", ""},
		"failed":    {backup(etcdv1beta1.BackupFailed, "", 0, 0, "context deadline exceeded"), false, "", "backup Failed: context deadline exceeded"},
		"succeeded": {backup(etcdv1beta1.BackupSucceeded, "pvc://c-backups/n/c/c.db", 20480, 7, ""), true, "", ""},
		// An empty cluster's snapshot holds revision 0.
		"succeeded, empty cluster": {backup(etcdv1beta1.BackupSucceeded, "pvc://c-backups/n/c/c.db", 20512, 0, ""), true, "", ""},
		"succeeded without results": {backup(etcdv1beta1.BackupSucceeded, "", 0, 0, ""), false, "",
			"backup Succeeded but no status.location, status.sizeBytes 0"},
	} {
		t.Run(name, func(t *testing.T) {
			ok, why, err := BackupSucceeded(tc.b)
			if ok != tc.ok || !strings.Contains(why, tc.why) || (err == nil) != (tc.wantErr == "") ||
				(err != nil && err.Error() != tc.wantErr) {
				t.Errorf("BackupSucceeded = %t, %q, %v; want %t, %q, %q", ok, why, err, tc.ok, tc.why, tc.wantErr)
			}
		})
	}
}
