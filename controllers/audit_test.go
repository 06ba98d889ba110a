package controllers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy records who deletes pods, and nothing else: a member restart a spec did not expect is then
// explained by the request that caused it (its user and client), not guessed at. The request's options are
// kept too: a pod deleted without waiting for its kubelet says so (grace period 0).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["pods"]}]
- level: None
`

// startAudit makes env's kube-apiserver write pod deletions to an audit log, and returns its path.
func startAudit(env *envtest.Environment) string {
	dir, err := os.MkdirTemp("", "envtest-audit-")
	Expect(err).NotTo(HaveOccurred())
	policy := filepath.Join(dir, "policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	path := filepath.Join(dir, "audit.log")
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", path)
	args.Set("audit-log-mode", "blocking")
	return path
}

// auditEvent is the part of an audit.k8s.io/v1 Event this suite reads.
type auditEvent struct {
	Verb           string `json:"verb"`
	UserAgent      string `json:"userAgent"`
	StageTimestamp string `json:"stageTimestamp"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestObject is the deletion's options: its grace period, and the UID of the pod it was meant for.
	RequestObject struct {
		GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
		Preconditions      struct {
			UID types.UID `json:"uid"`
		} `json:"preconditions"`
	} `json:"requestObject"`
}

// forced: the deletion asked for grace period 0 (the pod goes without its kubelet's confirmation).
func (e auditEvent) forced() bool {
	return e.RequestObject.GracePeriodSeconds != nil && *e.RequestObject.GracePeriodSeconds == 0
}

// podDeletionEvents reads the audit log's deletions of pods in namespace ns (of pod name, when not empty).
func podDeletionEvents(ns, name string) ([]auditEvent, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef.Namespace != ns || (name != "" && e.ObjectRef.Name != name) {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// podDeletions lists the audit log's deletions of pods in namespace ns (of pod name, when not empty), one
// line each: when, what, by whom, with which client, and the answer.
func podDeletions(ns, name string) []string {
	events, err := podDeletionEvents(ns, name)
	if err != nil {
		return []string{"audit log: " + err.Error()}
	}
	var out []string
	for _, e := range events {
		line := fmt.Sprintf("%s %s pod %s by %s (%s): %d", e.StageTimestamp, e.Verb, e.ObjectRef.Name,
			e.User.Username, e.UserAgent, e.ResponseStatus.Code)
		if e.forced() {
			line += " (grace period 0)"
		}
		out = append(out, line)
	}
	return out
}

// awaitPodDeletions is podDeletions once the log holds one: the API server writes a request's audit event
// after its response, so a client can see a pod gone before the log says who deleted it.
func awaitPodDeletions(ns, name string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines := podDeletions(ns, name)
		if len(lines) > 0 || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podDeletionsReport is podDeletions as a report entry's text.
func podDeletionsReport(ns string) string {
	lines := podDeletions(ns, "")
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}
