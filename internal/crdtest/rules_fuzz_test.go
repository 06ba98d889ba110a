package crdtest_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/crdtest"
)

// These fuzz targets check the EtcdCluster CRD's validation rules (OpenAPI and CEL, evaluated by the API
// server's own code) against what consumes the values afterwards: Kubernetes' cron parser, the version
// skew contract and the operator's Go types.

func clusters(t testing.TB) *crdtest.Admitter {
	t.Helper()
	a, err := crdtest.Load(filepath.Join("..", "..", "config", "crd", "bases", "etcd.seedops.io_etcdclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func object(name string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "etcd.seedops.io/v1beta1",
		"kind":       "EtcdCluster",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       spec,
	}
}

// errsOn keeps the errors about one field (path prefix), so a fuzzed field is judged on its own rules.
func errsOn(errs field.ErrorList, path string) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if strings.HasPrefix(e.Field, path) {
			out = append(out, e)
		}
	}
	return out
}

// FuzzBackupScheduleRule: every schedule the CRD accepts must be accepted by the cron parser Kubernetes
// validates CronJobs with (robfig/cron ParseStandard, the same module version kube-apiserver uses), or the
// operator's backup CronJob could never be created.
func FuzzBackupScheduleRule(f *testing.F) {
	for _, s := range []string{
		"0 2 * * *", "@daily", "@hourly", "*/15 0-6 1,15 JAN-MAR mon-fri", "0 2 * *", "0 0 2 * * *",
		"60 * * * *", "0 24 * * *", "0 0 32 * *", "0 0 1 13 *", "@every 1h", "every night", "? ? ? ? ?",
		"5-10/2 * * * sun-sat", "0 0 L * *", "0 0 * * 7", "TZ=UTC 0 2 * * *", "*/0 * * * *",
	} {
		f.Add(s)
	}
	a := clusters(f)
	f.Fuzz(func(t *testing.T, schedule string) {
		errs := errsOn(a.Create(object("c", map[string]any{"version": "3.5.9", "backupSchedule": schedule})), "spec.backupSchedule")
		if len(errs) > 0 {
			return // (robfig/cron itself panics on some inputs the CRD refuses, such as "TZ=")
		}
		if _, parseErr := cron.ParseStandard(schedule); parseErr != nil {
			t.Fatalf("the CRD accepts backupSchedule %q but Kubernetes' cron parser refuses it (%v): the backup CronJob cannot be created", schedule, parseErr)
		}
		if strings.Contains(schedule, "TZ") {
			t.Fatalf("the CRD accepts backupSchedule %q, which sets a time zone Kubernetes refuses in a schedule", schedule)
		}
	})
}

// semver is the reference reading of an X.Y.Z version without leading zeros.
func semver(v string) (maj, mnr, patch int, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || len(p) > 4 || (len(p) > 1 && p[0] == '0') {
			return 0, 0, 0, false
		}
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || strconv.Itoa(x) != p {
			return 0, 0, 0, false
		}
		n[i] = x
	}
	return n[0], n[1], n[2], true
}

// supported is the reference reading of the oldest etcd the operator runs: 3.5.3 (see the rule's comment
// in api/v1alpha1/etcdcluster_types.go).
func supported(maj, mnr, patch int) bool {
	return maj > 3 || maj == 3 && (mnr > 5 || mnr == 5 && patch >= 3)
}

// FuzzVersionRules: the CRD accepts exactly the X.Y.Z versions from 3.5.3 on, and an update exactly when
// the new version is one of those, keeps the major version and moves the minor version by 0 or +1 (etcd's
// upgrade contract; patches may go down), and does not move to 3.6 from a 3.5 release before 3.5.26 (the
// zombie-member fix). The Admitter does not ratchet unchanged values as the API server does, so an update
// that keeps an unsupported version is refused here too.
func FuzzVersionRules(f *testing.F) {
	for _, p := range [][2]string{
		{"3.5.9", "3.5.17"}, {"3.5.17", "3.5.9"}, {"3.5.9", "3.6.0"}, {"3.6.0", "3.5.9"}, {"3.4.0", "3.6.0"},
		{"3.5.9", "4.0.0"}, {"3.5.9", "v3.5.9"}, {"3.5", "3.5.9"}, {"3.5.9-rc.1", "3.5.9"}, {"03.5.9", "3.5.9"},
		{"9999.9999.9999", "9999.9999.9999"}, {"10000.0.0", "1.0.0"},
		{"3.5.25", "3.6.0"}, {"3.5.26", "3.6.0"}, {"3.5.2", "3.5.3"}, {"3.5.9", "3.5.2"}, {"3.4.22", "3.5.3"},
	} {
		f.Add(p[0], p[1])
	}
	a := clusters(f)
	f.Fuzz(func(t *testing.T, oldV, newV string) {
		createErrs := errsOn(a.Create(object("c", map[string]any{"version": newV})), "spec.version")
		nM, nm, np, valid := semver(newV)
		if want := valid && supported(nM, nm, np); (len(createErrs) == 0) != want {
			t.Fatalf("version %q: CRD accepts=%v, want %v (errors %v)", newV, len(createErrs) == 0, want, createErrs)
		}
		oM, om, op, oldValid := semver(oldV)
		if !oldValid || !valid {
			return
		}
		updErrs := errsOn(a.Update(object("c", map[string]any{"version": oldV}), object("c", map[string]any{"version": newV})), "spec.version")
		zombies := oM == 3 && om == 5 && op < 26 && nM == 3 && nm == 6
		want := supported(nM, nm, np) && nM == oM && nm >= om && nm <= om+1 && !zombies
		if (len(updErrs) == 0) != want {
			t.Fatalf("update %s -> %s: CRD accepts=%v, want %v (errors %v)", oldV, newV, len(updErrs) == 0, want, updErrs)
		}
	})
}

// FuzzStorageSizeRule: whatever storageSize the CRD accepts, the operator can decode (its Go type is a
// resource.Quantity) and it is positive; an update is accepted exactly when the size does not shrink.
func FuzzStorageSizeRule(f *testing.F) {
	for _, p := range [][2]string{
		{"8Gi", "10Gi"}, {"10Gi", "8Gi"}, {"1", "1000m"}, {"0", "1"}, {"-1Gi", "1Gi"}, {"1e3", "1k"},
		{".5Gi", "512Mi"}, {"1E", "1Ei"}, {"9223372036854775807", "9223372036854775808"}, {"1e100", "1e101"},
	} {
		f.Add(p[0], p[1])
	}
	a := clusters(f)
	f.Fuzz(func(t *testing.T, oldS, newS string) {
		obj := object("c", map[string]any{"version": "3.5.9", "storageSize": newS})
		errs := errsOn(a.Create(obj), "spec.storageSize")
		if len(errs) > 0 {
			return
		}
		spec, _ := json.Marshal(obj["spec"])
		var s etcdv1beta1.EtcdClusterSpec
		if err := json.Unmarshal(spec, &s); err != nil {
			t.Fatalf("the CRD accepts storageSize %q but the operator cannot decode it: %v", newS, err)
		}
		if s.StorageSize.Sign() <= 0 {
			t.Fatalf("the CRD accepts storageSize %q, which decodes to %s (not positive)", newS, s.StorageSize.String())
		}
		// The decoded quantity must survive the operator's own round trip (status, applied objects).
		again := resource.MustParse(s.StorageSize.String())
		if again.Cmp(s.StorageSize) != 0 {
			t.Fatalf("storageSize %q: %s re-parses to %s", newS, s.StorageSize.String(), again.String())
		}
		oldObj := object("c", map[string]any{"version": "3.5.9", "storageSize": oldS})
		if len(errsOn(a.Create(oldObj), "spec.storageSize")) > 0 {
			return
		}
		oldQ, newQ := resource.MustParse(oldS), resource.MustParse(newS)
		updErrs := errsOn(a.Update(object("c", map[string]any{"version": "3.5.9", "storageSize": oldS}), object("c", map[string]any{"version": "3.5.9", "storageSize": newS})), "spec.storageSize")
		if want := newQ.Cmp(oldQ) >= 0; (len(updErrs) == 0) != want {
			t.Fatalf("update storageSize %s -> %s: CRD accepts=%v, want %v (%v)", oldS, newS, len(updErrs) == 0, want, updErrs)
		}
	})
}

// TestVersionRuleMessages: each refused version gets the one message that explains it; a malformed
// version gets only the format message, never one of the version rules' messages as well.
func TestVersionRuleMessages(t *testing.T) {
	a := clusters(t)
	const format = "version must be a semantic version X.Y.Z"
	for _, tc := range []struct{ from, to, want string }{
		{"", "3.4.22", "etcd 3.4.22 is older than 3.5.3, the oldest version the operator supports"},
		{"", "3.5.2", "etcd 3.5.2 is older than 3.5.3, the oldest version the operator supports"},
		{"", "v3.5.2", format},
		{"", "3.5.02", format},
		{"", "99999999999999999999.5.2", format},
		{"3.5.9", "3.5.2", "etcd 3.5.2 is older than 3.5.3"},
		{"3.5.25", "3.6.0", "upgrading etcd from 3.5.25 to 3.6.0 is not safe"},
		{"3.5.25", "3.6.0", "upgrade to 3.5.26 or later first"},
		{"3.5.25", "v3.6.0", format},
		{"3.5.25", "3.6.00", format},
	} {
		var errs field.ErrorList
		if tc.from == "" {
			errs = a.Create(object("c", map[string]any{"version": tc.to}))
		} else {
			errs = a.Update(object("c", map[string]any{"version": tc.from}), object("c", map[string]any{"version": tc.to}))
		}
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%q -> %q: errors %v, want exactly one containing %q", tc.from, tc.to, errs, tc.want)
		}
	}
	for _, tc := range [][2]string{{"3.5.26", "3.6.0"}, {"3.5.35", "3.6.16"}, {"3.5.2", "3.5.3"}, {"3.6.0", "3.6.1"}} {
		if errs := a.Update(object("c", map[string]any{"version": tc[0]}), object("c", map[string]any{"version": tc[1]})); len(errs) > 0 {
			t.Errorf("%s -> %s refused: %v", tc[0], tc[1], errs)
		}
	}
}

// TestAdmitterMatchesKnownCases pins the in-process evaluation to a few verdicts the envtest suite proves
// against a real API server, so a broken Admitter cannot make the fuzz targets vacuous.
func TestAdmitterMatchesKnownCases(t *testing.T) {
	a := clusters(t)
	for spec, wantOK := range map[string]bool{
		`{"version":"3.5.9"}`: true,
		`{"version":"3.5.9","replicas":3,"storageSize":"10Gi"}`: true,
		`{"version":"v3.5.9"}`:                                             false,
		`{"version":"3.5.9","replicas":4}`:                                 false,
		`{"version":"3.5.9","backupSchedule":"60 * * * *"}`:                false,
		`{"version":"3.5.9","storageSize":"0"}`:                            false,
		`{"version":"3.5.9","pod":{"labels":{"app.kubernetes.io/x":"y"}}}`: false,
	} {
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(spec), &m); err != nil {
			t.Fatal(err)
		}
		errs := a.Create(object("c", m))
		if (len(errs) == 0) != wantOK {
			t.Errorf("%s: accepted=%v, want %v (%v)", spec, len(errs) == 0, wantOK, errs)
		}
	}
	for name, wantOK := range map[string]bool{"prod-etcd": true, "1etcd": false, "a.b": false, strings.Repeat("a", 45): true, strings.Repeat("a", 46): false} {
		if errs := a.Create(object(name, map[string]any{"version": "3.5.9"})); (len(errs) == 0) != wantOK {
			t.Errorf("name %q: accepted=%v, want %v (%v)", name, len(errs) == 0, wantOK, errs)
		}
	}
	obj := object("c", map[string]any{"version": "3.5.9"})
	_ = a.Create(obj)
	if got := fmt.Sprint(obj["spec"].(map[string]any)["replicas"]); got != "3" {
		t.Errorf("defaulting: replicas %s, want 3", got)
	}
	if errs := a.Update(object("c", map[string]any{"version": "3.5.9"}), object("c", map[string]any{"version": "3.7.0"})); len(errs) == 0 {
		t.Error("an update skipping a minor version must be refused")
	}
}
