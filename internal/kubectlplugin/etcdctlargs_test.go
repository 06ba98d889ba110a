package kubectlplugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var serverTLS = &memberTLS{CACert: "/etc/etcd/tls/server/ca.crt", Cert: "/etc/etcd/tls/server/tls.crt", Key: "/etc/etcd/tls/server/tls.key"}

func TestEtcdctlCommand(t *testing.T) {
	cases := map[string]struct {
		tls  *memberTLS
		args []string
		want []string
	}{
		// The certificate comes from the container's ETCDCTL_* variables, never as flags as well.
		"tls": {serverTLS, []string{"member", "list", "-w", "table"}, []string{"/usr/local/bin/etcdctl",
			"--endpoints=https://127.0.0.1:2379", "member", "list", "-w", "table"}},
		"no tls": {nil, []string{"endpoint", "status"}, []string{"/usr/local/bin/etcdctl",
			"--endpoints=http://127.0.0.1:2379", "endpoint", "status"}},
		"user endpoints win": {serverTLS, []string{"--endpoints", "https://prod-etcd-1.prod-etcd:2379", "endpoint", "health"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints", "https://prod-etcd-1.prod-etcd:2379", "endpoint", "health"}},
		"a certificate without tls": {nil, []string{"--cert=/tmp/c", "get", "a"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints=http://127.0.0.1:2379", "--cert=/tmp/c", "get", "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := etcdctlCommand(tc.tls, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, flag := range []string{"--cert=/tmp/c", "--key", "--cacert=/tmp/ca"} {
		if _, err := etcdctlCommand(serverTLS, []string{flag, "/tmp/x", "get", "a"}); err == nil || !strings.Contains(err.Error(), "ETCDCTL_") {
			t.Errorf("%s on a TLS member: got %v, want an error naming the variable etcdctl would conflict with", flag, err)
		}
	}
}

func TestTLSOfPod(t *testing.T) {
	pod := func(env ...corev1.EnvVar) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Env: env}}}}
	}
	withTLS := pod(corev1.EnvVar{Name: "POD_NAME"}, corev1.EnvVar{Name: "ETCDCTL_CACERT", Value: serverTLS.CACert},
		corev1.EnvVar{Name: "ETCDCTL_CERT", Value: serverTLS.Cert}, corev1.EnvVar{Name: "ETCDCTL_KEY", Value: serverTLS.Key})
	if diff := cmp.Diff(serverTLS, tlsOfPod(withTLS)); diff != "" {
		t.Errorf("TLS pod (-want +got):\n%s", diff)
	}
	if got := tlsOfPod(pod(corev1.EnvVar{Name: "POD_NAME"})); got != nil {
		t.Errorf("pod without certificates: got %+v, want nil", got)
	}
}

func TestChooseMemberPod(t *testing.T) {
	pod := func(name string, ready bool) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	c := healthyCluster() // prod-etcd-0 leads
	if p, err := chooseMemberPod(c, []corev1.Pod{pod("prod-etcd-2", true), pod("prod-etcd-0", true), pod("prod-etcd-1", true)}); err != nil || p.Name != "prod-etcd-0" {
		t.Errorf("with a ready leader: got %v, %v; want prod-etcd-0", p, err)
	}
	if p, err := chooseMemberPod(c, []corev1.Pod{pod("prod-etcd-2", true), pod("prod-etcd-0", false), pod("prod-etcd-1", true)}); err != nil || p.Name != "prod-etcd-1" {
		t.Errorf("leader not ready: got %v, %v; want the first ready pod prod-etcd-1", p, err)
	}
	if _, err := chooseMemberPod(c, []corev1.Pod{pod("prod-etcd-0", false)}); err == nil {
		t.Error("no ready pod: want an error")
	}
}
