package resources

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// etcdContainerOf builds c's StatefulSet and returns its etcd container's literal ETCD_* variables (the
// member's own name and URLs, which the kubelet expands from the pod, are left to the harness) and args.
func etcdContainerOf(t *testing.T, c *etcdv1beta1.EtcdCluster) (map[string]string, []string) {
	t.Helper()
	sts := StatefulSet(c, 1, DefaultOptions(), nil, MemberGate{})
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if *ctr.Name != "etcd" {
			continue
		}
		env := map[string]string{}
		for _, e := range ctr.Env {
			if e.Value != nil && strings.HasPrefix(*e.Name, "ETCD_") && !strings.Contains(*e.Value, "$(") {
				env[*e.Name] = *e.Value
			}
		}
		return env, ctr.Args
	}
	t.Fatal("no etcd container")
	return nil, nil
}

// settingsCluster is tunedCluster with TLS off (the harness starts members without certificates) and the
// given extra flags.
func settingsCluster(extra map[string]string) *etcdv1beta1.EtcdCluster {
	c := tunedCluster()
	c.Spec.TLS.Enabled = ptr.To(false)
	c.Spec.Etcd.ExtraFlags = extra
	return c
}

// TestEtcdAppliesEverySetting starts a real member with the variables and flags the operator puts in the
// pod template for spec.etcd and reads back, from etcd's own start-up record, that it runs with each of
// them: etcd only warns about a variable it does not know, so a misspelt name would otherwise pass.
func TestEtcdAppliesEverySetting(t *testing.T) {
	c := settingsCluster(map[string]string{"log-level": "info", "max-wals": "7"})
	m := startMember(t, "settings", c)
	cli := m.Client(t, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 1.8 MiB is over etcd's default request limit (1.5 MiB), under the 4Mi set and under the client's own
	// limit (2 MiB).
	if _, err := cli.Put(ctx, "/big", strings.Repeat("x", 1800<<10)); err != nil {
		t.Fatalf("1.8 MiB put with maxRequestSize 4Mi: %v", err)
	}
	log := m.FullLog(0)
	for _, want := range []string{
		`"heartbeat-interval":"250ms"`, `"election-timeout":"2.5s"`, `"snapshot-count":20000`,
		`"max-request-bytes":4194304`, `"quota-backend-bytes":3221225472`,
		// etcd logs a revision retention as a duration of that many nanoseconds.
		`"auto-compaction-mode":"revision"`, `"auto-compaction-retention":"10µs"`, `"max-wals":7`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("etcd's log lacks %s", want)
		}
	}
	for name := range m.Env {
		if strings.Contains(log, `"environment-variable":"`+name+`=`) {
			t.Errorf("etcd does not know the variable %s", name)
		}
	}
	if strings.Contains(log, "shadowed") {
		t.Errorf("a flag shadows one of the variables")
	}
	if t.Failed() {
		t.Logf("etcd's log:\n%s", m.Log(0))
	}
}

// TestEtcdRefusesAnUnknownExtraFlag: a misspelt flag stops the member at once instead of being ignored.
func TestEtcdRefusesAnUnknownExtraFlag(t *testing.T) {
	m := startMember(t, "misspelt", settingsCluster(map[string]string{"experimental-compaction-batch-limt": "500"}))
	deadline := time.Now().Add(20 * time.Second)
	for m.Running(0) {
		if time.Now().After(deadline) {
			t.Fatalf("etcd still runs with an unknown flag %v", m.Args)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if log := m.Log(0); !strings.Contains(log, "flag provided but not defined") {
		t.Fatalf("etcd exited, but not for the unknown flag:\n%s", log)
	}
}

// startMember starts one etcd member as c's pod template would configure it, and stops it when the test ends.
func startMember(t *testing.T, name string, c *etcdv1beta1.EtcdCluster) *etcdtest.Cluster {
	t.Helper()
	m := etcdtest.NewForTest(t, name)
	m.Env, m.Args = etcdContainerOf(t, c)
	m.StartNew(t, 1)
	return m
}
