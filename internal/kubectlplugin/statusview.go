package kubectlplugin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// StatusView is everything `kubectl etcd status` shows: the cluster, the on-demand backups of its
// namespace, the time "now" ages are measured from, and whether to colour the output.
type StatusView struct {
	Cluster *etcdv1beta1.EtcdCluster
	// Backups are the EtcdBackups of the cluster's namespace; those of other clusters are ignored.
	Backups []etcdv1beta1.EtcdBackup
	Now     time.Time
	Color   bool
}

// RenderStatus writes one screen describing the cluster. It reads nothing but its argument, so golden
// files pin its output.
func RenderStatus(out io.Writer, v StatusView) error {
	var w strings.Builder
	renderStatus(&w, v)
	_, err := io.WriteString(out, w.String())
	return err
}

func renderStatus(w *strings.Builder, v StatusView) {
	c, p := v.Cluster, palette{enabled: v.Color}
	s := &c.Status
	fmt.Fprintf(w, "%s %s in namespace %s\n", p.paint(bold, "EtcdCluster"), c.Name, c.Namespace)
	if s.Phase == "" && s.ObservedGeneration == 0 && len(s.Conditions) == 0 {
		fmt.Fprintf(w, "\nNo status yet: the operator has not reconciled this cluster (is it running and watching namespace %s?).\n", c.Namespace)
		return
	}
	fmt.Fprintf(w, "  Phase:     %s\n", p.paint(phaseColor(s.Phase), orUnknown(string(s.Phase))))
	fmt.Fprintf(w, "  Version:   %s\n", versionLine(c))
	fmt.Fprintf(w, "  Members:   %d desired, %d ready, %d pods\n", c.Spec.Replicas, s.ReadyReplicas, s.Replicas)
	if s.ClientEndpoint != "" {
		fmt.Fprintf(w, "  Endpoint:  %s\n", s.ClientEndpoint)
	}
	fmt.Fprintf(w, "  Security:  %s\n", securityLine(c))
	if ft := s.FailureTolerance; ft != nil {
		fmt.Fprintf(w, "  Survives:  %s\n", p.paint(toleranceColor(ft), toleranceLine(ft)))
	}
	if c.Spec.Paused {
		fmt.Fprintf(w, "  %s\n", p.paint(yellow, "Paused: the operator changes nothing until spec.paused is false."))
	}
	if s.ObservedGeneration != 0 && s.ObservedGeneration < c.Generation {
		fmt.Fprintf(w, "  %s\n", p.paint(yellow, fmt.Sprintf("Status describes generation %d; the spec is at generation %d.", s.ObservedGeneration, c.Generation)))
	}

	writeConditions(w, p, s.Conditions, v.Now)
	writeMembers(w, p, s.Members)
	writeAlarms(w, p, s.Alarms)
	writeBackups(w, p, v)
	writeDefragmentation(w, p, c, v.Now)
	writeCertificates(w, p, s.TLS, v.Now)
}

// writeDefragmentation shows the sweeps that defragment every member in turn, when there is a schedule or
// status reports one.
func writeDefragmentation(w *strings.Builder, p palette, c *etcdv1beta1.EtcdCluster, now time.Time) {
	st, schedule := c.Status.Defragmentation, string(c.Spec.Defragmentation.Schedule)
	if st == nil && schedule == "" {
		return
	}
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Defragmentation:"))
	if st != nil && st.Current != nil {
		line := fmt.Sprintf("%s, started %s ago; done: %s", st.Current.Trigger, age(now, st.Current.StartTime.Time), orDash(strings.Join(st.Current.Defragmented, ", ")))
		fmt.Fprintf(w, "  Under way: %s\n", line)
		if st.Current.Waiting != "" {
			fmt.Fprintf(w, "  %s\n", p.paint(yellow, strings.ToUpper(st.Current.Waiting[:1])+st.Current.Waiting[1:]))
		}
	}
	if st != nil && st.LastCompletionTime != nil {
		fmt.Fprintf(w, "  Last:      %s ago (%s)\n", age(now, st.LastCompletionTime.Time), timestamp(st.LastCompletionTime.Time))
	} else {
		fmt.Fprintf(w, "  Last:      none yet\n")
	}
	if schedule != "" {
		fmt.Fprintf(w, "  Next:      %s\n", nextRun(schedule, now))
	}
}

func versionLine(c *etcdv1beta1.EtcdCluster) string {
	cur := c.Status.CurrentVersion
	switch {
	case cur == "":
		return c.Spec.Version + " (wanted; no member has reported its version yet)"
	case cur != c.Spec.Version:
		return fmt.Sprintf("%s running, %s wanted", cur, c.Spec.Version)
	}
	return cur
}

func securityLine(c *etcdv1beta1.EtcdCluster) string {
	tls := "off"
	if t := c.Status.TLS; t != nil && t.Enabled {
		tls = "on"
		if t.ClientSecretName != "" {
			tls += " (client certificate in Secret " + t.ClientSecretName + ")"
		}
	}
	auth := "unknown"
	if a := c.Status.AuthEnabled; a != nil {
		auth = map[bool]string{true: "on", false: "off"}[*a]
	}
	return "TLS " + tls + ", authentication " + auth
}

// toleranceLine says how many node and zone failures the cluster survives now (status.failureTolerance).
func toleranceLine(ft *etcdv1beta1.FailureTolerance) string {
	failures := func(n int32, what string) string {
		if n == 1 {
			return "1 " + what + " failure"
		}
		return fmt.Sprintf("%d %s failures", n, what)
	}
	return failures(ft.Nodes, "node") + " and " + failures(ft.Zones, "zone") + " without losing quorum"
}

// toleranceColor: a cluster one node failure away from losing quorum is worth a look.
func toleranceColor(ft *etcdv1beta1.FailureTolerance) color {
	if ft.Nodes == 0 {
		return yellow
	}
	return none
}

// conditionOrder puts the conditions users read first at the top; others follow by name.
var conditionOrder = []string{etcdv1beta1.ConditionAvailable, etcdv1beta1.ConditionDegraded,
	etcdv1beta1.ConditionProgressing, etcdv1beta1.ConditionBackupSucceeded}

func writeConditions(w *strings.Builder, p palette, conds []metav1.Condition, now time.Time) {
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Conditions:"))
	if len(conds) == 0 {
		fmt.Fprintf(w, "  none reported\n")
		return
	}
	sorted := slices.Clone(conds)
	rank := func(t string) int {
		if i := slices.Index(conditionOrder, t); i >= 0 {
			return i
		}
		return len(conditionOrder)
	}
	slices.SortStableFunc(sorted, func(a, b metav1.Condition) int {
		if d := rank(a.Type) - rank(b.Type); d != 0 {
			return d
		}
		return strings.Compare(a.Type, b.Type)
	})
	t := &table{header: []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}}
	for _, cond := range sorted {
		t.add(plain(cond.Type), cell{string(cond.Status), conditionColor(cond)}, plain(cond.Reason),
			plain(age(now, cond.LastTransitionTime.Time)), plain(cond.Message))
	}
	t.write(w, p, "  ")
}

func writeMembers(w *strings.Builder, p palette, members []etcdv1beta1.MemberStatus) {
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Members:"))
	if len(members) == 0 {
		fmt.Fprintf(w, "  none observed yet\n")
		return
	}
	t := &table{header: []string{"NAME", "ID", "ROLE", "LEADER", "HEALTHY", "VERSION", "DB SIZE", "IN USE", "FREE"}}
	for _, m := range members {
		role := "voter"
		switch {
		case m.Unknown:
			role = "unknown" // in etcd, not added by the operator
		case m.Learner:
			role = "learner"
		}
		leader := ""
		if m.Leader {
			leader = "*"
		}
		health := cell{yesNo(m.Healthy), green}
		if !m.Healthy {
			health = cell{"no", red}
		}
		size, inUse, free := "-", "-", "-"
		if m.DBSizeBytes > 0 {
			size, inUse = formatBytes(m.DBSizeBytes), formatBytes(m.DBSizeInUseBytes)
			free = fmt.Sprintf("%d%%", (m.DBSizeBytes-m.DBSizeInUseBytes)*100/m.DBSizeBytes)
		}
		t.add(plain(m.Name), plain(orDash(m.ID)), plain(role), plain(leader), health, plain(orDash(m.Version)),
			plain(size), plain(inUse), plain(free))
	}
	t.write(w, p, "  ")
	for _, m := range members {
		if !m.Healthy && m.UnhealthySince != nil {
			fmt.Fprintf(w, "  %s unhealthy since %s\n", m.Name, timestamp(m.UnhealthySince.Time))
		}
	}
}

func writeAlarms(w *strings.Builder, p palette, alarms []string) {
	if len(alarms) == 0 {
		fmt.Fprintf(w, "\n%s none\n", p.paint(bold, "Alarms:"))
		return
	}
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Alarms:"))
	for _, a := range alarms {
		fmt.Fprintf(w, "  %s\n", p.paint(red, a))
	}
}

func writeBackups(w *strings.Builder, p palette, v StatusView) {
	c, now := v.Cluster, v.Now
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Backups:"))
	if t := c.Status.LastBackupTime; t != nil {
		fmt.Fprintf(w, "  Last:      %s ago (%s), %s\n", age(now, t.Time), timestamp(t.Time), lastBackupSource(c, v.Backups))
		fmt.Fprintf(w, "             %s\n", c.Status.LastBackupLocation)
	} else {
		fmt.Fprintf(w, "  Last:      none yet\n")
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionBackupSucceeded); cond != nil && cond.Status != metav1.ConditionTrue {
		fmt.Fprintf(w, "  %s\n", p.paint(red, "Last scheduled backup failed: "+cond.Message))
	}
	next := "no schedule (spec.backupSchedule is empty)"
	if c.Spec.BackupSchedule != "" {
		next = nextRun(string(c.Spec.BackupSchedule), now)
	}
	fmt.Fprintf(w, "  Next:      %s\n", next)
	for _, b := range v.Backups {
		if b.Spec.ClusterName == c.Name && (b.Status.Phase == "" || b.Status.Phase == etcdv1beta1.BackupPending || b.Status.Phase == etcdv1beta1.BackupRunning) {
			fmt.Fprintf(w, "  Running:   EtcdBackup %s (%s, created %s ago)\n", b.Name, orUnknown(string(b.Status.Phase)), age(now, b.CreationTimestamp.Time))
		}
	}
}

// lastBackupSource names what took the last backup: the EtcdBackup whose snapshot it is, else the
// scheduled Job the operator last reported.
func lastBackupSource(c *etcdv1beta1.EtcdCluster, backups []etcdv1beta1.EtcdBackup) string {
	for _, b := range backups {
		if b.Spec.ClusterName == c.Name && b.Status.Location != "" && b.Status.Location == c.Status.LastBackupLocation {
			return "EtcdBackup " + b.Name
		}
	}
	if c.Status.LastScheduledBackupJob != "" {
		return "scheduled (last Job " + c.Status.LastScheduledBackupJob + ")"
	}
	return "source unknown"
}

// nextRun is the next time of a schedule. The backup CronJob sets no time zone, so it runs in
// kube-controller-manager's, which is UTC on almost every cluster; the operator's sweeps run in UTC: times
// are shown in UTC.
func nextRun(schedule string, now time.Time) string {
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return fmt.Sprintf("schedule %q does not parse: %v", schedule, err)
	}
	next := sched.Next(now.UTC())
	return fmt.Sprintf("in %s (%s, schedule %q)", until(now, next), timestamp(next), schedule)
}

func writeCertificates(w *strings.Builder, p palette, tls *etcdv1beta1.TLSStatus, now time.Time) {
	if tls == nil || len(tls.Certificates) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, "Certificates:"))
	t := &table{header: []string{"NAME", "SECRET", "EXPIRES", "RENEWAL"}}
	for _, cert := range tls.Certificates {
		expires := cell{fmt.Sprintf("%s (in %s)", timestamp(cert.NotAfter.Time), until(now, cert.NotAfter.Time)), green}
		renewal := "never (CAs are not rotated)"
		if cert.RenewalTime != nil {
			renewal = timestamp(cert.RenewalTime.Time)
			if now.After(cert.RenewalTime.Time) {
				renewal += " (overdue)"
				expires.color = yellow
			}
		}
		if !now.Before(cert.NotAfter.Time) {
			expires = cell{fmt.Sprintf("%s (expired %s ago)", timestamp(cert.NotAfter.Time), age(now, cert.NotAfter.Time)), red}
		}
		t.add(plain(cert.Name), plain(cert.SecretName), expires, plain(renewal))
	}
	t.write(w, p, "  ")
}

func phaseColor(ph etcdv1beta1.ClusterPhase) color {
	switch ph {
	case etcdv1beta1.PhaseRunning:
		return green
	case etcdv1beta1.PhaseUnavailable:
		return red
	case "":
		return none
	}
	return yellow
}

// conditionColor says whether a condition is good news: Degraded is the one whose True is bad.
func conditionColor(c metav1.Condition) color {
	switch {
	case c.Status == metav1.ConditionUnknown:
		return yellow
	case c.Type == etcdv1beta1.ConditionProgressing:
		if c.Status == metav1.ConditionTrue {
			return yellow
		}
		return none
	case (c.Type == etcdv1beta1.ConditionDegraded) == (c.Status == metav1.ConditionTrue):
		return red
	}
	return green
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
