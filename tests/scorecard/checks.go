package scorecard

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// A Check tells whether a cluster reached a state, and if not, why not (the reason ends up in the test's
// errors when the wait times out).
type Check func(c *etcdv1beta1.EtcdCluster) (ok bool, why string)

// Available: the operator has seen the current spec, reports Available=True, and every replica is ready.
func Available(c *etcdv1beta1.EtcdCluster) (bool, string) {
	if c.Status.ObservedGeneration != c.Generation {
		return false, fmt.Sprintf("status is of generation %d, spec is generation %d",
			c.Status.ObservedGeneration, c.Generation)
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable)
	if cond == nil {
		return false, "no Available condition yet" + describeConditions(c)
	}
	if cond.Status != metav1.ConditionTrue {
		return false, fmt.Sprintf("Available=%s (%s: %s)", cond.Status, cond.Reason, cond.Message) + describeConditions(c)
	}
	if c.Status.ReadyReplicas != c.Spec.Replicas {
		return false, fmt.Sprintf("readyReplicas %d, spec.replicas %d", c.Status.ReadyReplicas, c.Spec.Replicas)
	}
	return true, ""
}

// VotingMembers: Available with exactly n replicas, and etcd (through status.members) reports n members,
// every one healthy, known to the operator and a voter (not a learner).
func VotingMembers(n int32) Check {
	return func(c *etcdv1beta1.EtcdCluster) (bool, string) {
		if c.Spec.Replicas != n {
			return false, fmt.Sprintf("spec.replicas is %d, want %d", c.Spec.Replicas, n)
		}
		if ok, why := Available(c); !ok {
			return false, why
		}
		if len(c.Status.Members) != int(n) {
			return false, fmt.Sprintf("%d members in status (%s), want %d",
				len(c.Status.Members), describeMembers(c.Status.Members), n)
		}
		seen := map[string]bool{}
		for _, m := range c.Status.Members {
			switch {
			case seen[m.Name]:
				return false, fmt.Sprintf("member %s is listed twice (%s)", m.Name, describeMembers(c.Status.Members))
			case m.Unknown:
				return false, fmt.Sprintf("member %s (%s) was not added by the operator", m.Name, m.ID)
			case m.Learner:
				return false, fmt.Sprintf("member %s is still a learner", m.Name)
			case !m.Healthy:
				return false, fmt.Sprintf("member %s is not healthy", m.Name)
			}
			seen[m.Name] = true
		}
		return true, ""
	}
}

func describeConditions(c *etcdv1beta1.EtcdCluster) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		if cond.Type == etcdv1beta1.ConditionAvailable {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func describeMembers(ms []etcdv1beta1.MemberStatus) string {
	if len(ms) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		var flags []string
		if m.Leader {
			flags = append(flags, "leader")
		}
		if m.Learner {
			flags = append(flags, "learner")
		}
		if !m.Healthy {
			flags = append(flags, "unhealthy")
		}
		if m.Unknown {
			flags = append(flags, "unknown")
		}
		if len(flags) > 0 {
			parts = append(parts, m.Name+"("+strings.Join(flags, ",")+")")
		} else {
			parts = append(parts, m.Name)
		}
	}
	return strings.Join(parts, " ")
}

// BackupSucceeded: the backup reports Succeeded with where the snapshot went and its size. Failed is final,
// and so is Succeeded without those: both end the wait with an error. The revision is not checked here: a
// snapshot of a cluster nobody wrote to holds revision 0 (etcd's snapshot status); backup-taken writes first
// and checks that the snapshot covers the write.
func BackupSucceeded(b *etcdv1beta1.EtcdBackup) (bool, string, error) {
	switch b.Status.Phase {
	case etcdv1beta1.BackupFailed:
		return false, "", fmt.Errorf("backup Failed: %s", b.Status.Error)
	case etcdv1beta1.BackupSucceeded:
		var missing []string
		if b.Status.Location == "" {
			missing = append(missing, "no status.location")
		}
		if b.Status.SizeBytes <= 0 {
			missing = append(missing, fmt.Sprintf("status.sizeBytes %d", b.Status.SizeBytes))
		}
		if len(missing) > 0 {
			return false, "", fmt.Errorf("backup Succeeded but %s", strings.Join(missing, ", "))
		}
		return true, "", nil
	}
	phase := string(b.Status.Phase)
	if phase == "" {
		phase = "no phase yet"
	}
	if b.Status.Error != "" {
		phase += " (" + b.Status.Error + ")"
	}
	return false, phase, nil
}
