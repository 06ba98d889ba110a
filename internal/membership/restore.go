package membership

import (
	"fmt"
	"time"
)

// Backup is a stored snapshot of the cluster that a restore can read.
type Backup struct {
	// Location is the snapshot's address: pvc://<claim>/<key> or s3://<bucket>/<key>.
	Location string
	// Revision is the etcd revision the snapshot holds.
	Revision int64
}

// RestoreRecovery is the configuration's record of a quorum-loss recovery from a backup. Every member
// restarts, moves the data on its volume aside (never deleting it) and restores the snapshot at Location
// under an initial cluster token that names the recovery (ID): the restored members get new member IDs
// and a new cluster ID, so no member of the lost cluster can ever be taken for one of them.
type RestoreRecovery struct {
	ID       string
	Location string
	Revision int64
}

// RestoreRecoveryID names a recovery started at t; the configuration keeps it until the recovery ends.
func RestoreRecoveryID(t time.Time) string {
	return "restore-" + t.UTC().Format("20060102T150405Z")
}

// startRestore begins a recovery from the newest backup (recoverQuorum has established that the majority
// is lost for good): record it in the configuration, and restart the first member onto it.
func startRestore(o Observed, wait Decision) Decision {
	b := o.Recovery.Backup
	if b == nil {
		wait.Message = "etcd has no quorum for good, and no successful backup of this cluster is known to restore from; " +
			"restore it by hand, or set recovery.quorumLoss to FromSurvivor"
		return wait
	}
	d := continueRestore(o, RestoreRecovery{ID: RestoreRecoveryID(o.Now), Location: b.Location, Revision: b.Revision})
	d.Message = fmt.Sprintf("quorum lost for good: restoring every member from %s (revision %d); writes after that revision are lost, "+
		"and each member's data is moved aside on its volume, not deleted; %s", b.Location, b.Revision, d.Message)
	return d
}

// continueRestore restarts, one per step, every member pod that does not restore for this recovery (its
// etcd, on the lost cluster's data, must stop), once the pod template restores for it; otherwise it waits
// for the members to start restored.
func continueRestore(o Observed, rec RestoreRecovery) Decision {
	n := max(o.StatefulSetReplicas, 0)
	d := Decision{Replicas: n, Config: restoreConfig(n, rec), Phase: PhaseRecovering}
	if o.Recovery.TemplateRestores != rec.ID {
		// A pod restarted now would come back without the restore step, on the lost cluster's data.
		d.Message = fmt.Sprintf("waiting for the members' pod template to restore %s", rec.Location)
		return d
	}
	for _, ord := range sortedOrdinals(o.Pods) {
		if p := o.Pods[ord]; ord >= n || p.Terminating || p.RestoreRecovery == rec.ID {
			continue
		}
		d.Action = Action{Type: ActionDeletePod, Ordinal: ord}
		d.Message = fmt.Sprintf("restarting member %d to restore %s", ord, rec.Location)
		return d
	}
	d.Message = fmt.Sprintf("restoring every member from %s (revision %d): waiting for the %d members to start on it", rec.Location, rec.Revision, n)
	return d
}

// endRestore: etcd answers again during a recovery from a backup. The record stays in the configuration
// (a member that restarts meanwhile still restores) until every member pod restored for it, every member
// is healthy and its claim records the member's new ID; then the configuration returns to the ordinary
// one, and only then do the other rules look again (a claim recording a member of the lost cluster would
// look like lost data).
func endRestore(o Observed, v view) (Decision, bool) {
	rec := o.Recovery.Restoring
	if rec == nil {
		return Decision{}, false
	}
	d := continueRestore(o, *rec)
	if d.Action.Type != ActionNone {
		return d, true
	}
	d.Message = fmt.Sprintf("restored from %s (revision %d): ", rec.Location, rec.Revision)
	if len(v.ours) < d.Replicas {
		d.Message += fmt.Sprintf("%d of %d members in etcd; waiting for the others", len(v.ours), d.Replicas)
		return d, true
	}
	for _, m := range v.ours {
		switch vol, ok := o.Volumes[m.Ordinal]; {
		case !m.Healthy:
			d.Message += fmt.Sprintf("waiting for %s to be healthy", m.Name)
			return d, true
		case !ok || vol.MemberID != m.ID:
			d.Message += fmt.Sprintf("waiting for %s's claim to record the member's new ID", m.Name)
			return d, true
		}
	}
	return Decision{Replicas: v.replicas, Phase: PhaseRecovering,
		Message: fmt.Sprintf("restored from %s (revision %d): %d members, every one healthy", rec.Location, rec.Revision, len(v.ours))}, true
}

// restoreConfig lists members 0..n-1, the initial cluster every member's restore step writes into its data.
// The state stays "existing": nothing may bootstrap a new cluster during a recovery. A pod from before the
// recovery's template whose etcd starts empty meanwhile (its member gate found its member in the restored
// cluster, added and not started) joins that cluster and receives the restored data from its leader; with
// "new" it would bootstrap the same member ID with an empty database and could lead the restored members.
func restoreConfig(n int, rec RestoreRecovery) *Config {
	cfg := &Config{State: StateExisting, Restore: &rec}
	for _, ord := range seq(n) {
		cfg.Members = append(cfg.Members, ConfigMember{Ordinal: ord})
	}
	return cfg
}
