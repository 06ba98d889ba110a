package kubectlplugin

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// etcdContainerName is the member pods' etcd container (internal/resources.StatefulSet).
const etcdContainerName = "etcd"

// etcdctlPath is etcdctl in the official etcd image, next to the etcd binary the members run.
const etcdctlPath = "/usr/local/bin/etcdctl"

// memberTLS is the certificate etcdctl presents inside a member: the member's server certificate, which
// also carries client usage. The operator's client certificate (root) is not mounted in member pods.
type memberTLS struct {
	CACert, Cert, Key string
}

// tlsOfPod reads the member's certificate paths from the ETCDCTL_* variables the operator sets on TLS
// clusters' etcd containers; nil when the pod has none (a cluster without TLS).
func tlsOfPod(pod *corev1.Pod) *memberTLS {
	for _, c := range pod.Spec.Containers {
		if c.Name != etcdContainerName {
			continue
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["ETCDCTL_CACERT"] == "" || env["ETCDCTL_CERT"] == "" || env["ETCDCTL_KEY"] == "" {
			return nil
		}
		return &memberTLS{CACert: env["ETCDCTL_CACERT"], Cert: env["ETCDCTL_CERT"], Key: env["ETCDCTL_KEY"]}
	}
	return nil
}

// etcdctlCommand is the command run in the member's etcd container: etcdctl against the member itself
// (its server certificate names 127.0.0.1). On a TLS cluster the container's ETCDCTL_CACERT, ETCDCTL_CERT
// and ETCDCTL_KEY already hand etcdctl the member's certificate, and etcdctl exits when a flag and its
// variable are both set ("conflicting environment variable is shadowed by corresponding command-line
// flag"): so those flags are neither added nor accepted. --endpoints the user gives replaces the member's
// own (etcdctl appends repeated --endpoints instead of replacing them).
func etcdctlCommand(tls *memberTLS, userArgs []string) ([]string, error) {
	scheme := "http"
	if tls != nil {
		scheme = "https"
		for _, f := range []string{"cacert", "cert", "key"} {
			if hasFlag(userArgs, f) {
				return nil, fmt.Errorf("--%s cannot be given: the member's etcd container sets ETCDCTL_%s, which etcdctl refuses "+
					"to combine with the flag; to use another certificate, run etcdctl in a pod of your own", f, strings.ToUpper(f))
			}
		}
	}
	cmd := []string{etcdctlPath}
	if !hasFlag(userArgs, "endpoints") {
		cmd = append(cmd, fmt.Sprintf("--endpoints=%s://127.0.0.1:%d", scheme, resources.ClientPort))
	}
	return append(cmd, userArgs...), nil
}

// hasFlag reports whether args set --name (as "--name=v" or "--name v").
func hasFlag(args []string, name string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return a == "--"+name || strings.HasPrefix(a, "--"+name+"=")
	})
}

// chooseMemberPod picks the pod to run etcdctl in: the leader's when status names one and its pod is
// ready, else the first ready member pod by name. A ready pod passed its health probe, so its etcd answers.
func chooseMemberPod(c *etcdv1beta1.EtcdCluster, pods []corev1.Pod) (*corev1.Pod, error) {
	ready := map[string]*corev1.Pod{}
	var names []string
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready[p.Name] = p
			names = append(names, p.Name)
		}
	}
	for _, m := range c.Status.Members {
		if m.Leader && m.Healthy && ready[m.Name] != nil {
			return ready[m.Name], nil
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no member pod of EtcdCluster %q in namespace %q is ready (%d found): nothing to run etcdctl in", c.Name, c.Namespace, len(pods))
	}
	slices.Sort(names)
	return ready[names[0]], nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
