package membership

import (
	"fmt"
	"time"
)

// Backup is a stored snapshot of the cluster that a restore can read, or a point of its continuous backup
// that a replay turns into one.
type Backup struct {
	// Location is the snapshot's address: pvc://<claim>/<key> or s3://<bucket>/<key>; with Replay, the
	// continuous backup's (its key prefix).
	Location string
	// Revision is the etcd revision the snapshot holds, or that the replay restores.
	Revision int64
	// Replay: no snapshot exists yet. The controller replays the continuous backup at Location to Revision
	// into one, and verifies it, before the members' template restores it (Recovery.ReplayFailed says when
	// that failed).
	Replay bool
}

// RestoreRecovery is the configuration's record of a quorum-loss recovery from a backup. Every member
// restarts, moves the data on its volume aside (never deleting it) and restores the snapshot at Location
// under an initial cluster token that names the recovery (ID): the restored members get new member IDs
// and a new cluster ID, so no member of the lost cluster can ever be taken for one of them.
type RestoreRecovery struct {
	ID       string
	Location string
	Revision int64
	// Replay: Location is the cluster's continuous backup, replayed to Revision before any member restores
	// (Backup.Replay).
	Replay bool
	// Fallback says why the newest full backup is restored although the cluster has a continuous backup
	// ("" when it is not a fallback).
	Fallback string
}

// RestoreRecoveryID names a recovery started at t; the configuration keeps it until the recovery ends.
func RestoreRecoveryID(t time.Time) string {
	return "restore-" + t.UTC().Format("20060102T150405Z")
}

// startRestore begins a recovery from the newest backup (recoverQuorum has established that the majority
// is lost for good): record it in the configuration, and restart the first member onto it.
func startRestore(o Observed, wait Decision) Decision {
	b, fallback := restoreChoice(o.Recovery)
	if b == nil {
		wait.Message = "etcd has no quorum for good, and no successful backup of this cluster is known to restore from; " +
			"restore it by hand, or set recovery.quorumLoss to FromSurvivor"
		if p := o.Recovery.ContinuousProblem; p != "" {
			wait.Message += "; the continuous backup cannot be replayed: " + p
		}
		return wait
	}
	rec := RestoreRecovery{ID: RestoreRecoveryID(o.Now), Location: b.Location, Revision: b.Revision, Replay: b.Replay, Fallback: fallback}
	d := continueRestore(o, rec)
	d.Message = fmt.Sprintf("quorum lost for good: restoring every member from %s; writes after that revision are lost, "+
		"and each member's data is moved aside on its volume, not deleted; %s", restoreSubject(rec), d.Message)
	return d
}

// restoreChoice is what a recovery restores: the newest point of the continuous backup when it is newer
// than the newest full backup (fewer writes lost), else that backup; fallback says why a cluster with a
// continuous backup restores the full backup ("" when it has none, or the full backup is as new).
func restoreChoice(rc Recovery) (b *Backup, fallback string) {
	switch c := rc.Continuous; {
	case c != nil && (rc.Backup == nil || c.Revision > rc.Backup.Revision):
		return c, ""
	case c == nil && rc.Backup != nil && rc.ContinuousProblem != "":
		return rc.Backup, rc.ContinuousProblem
	}
	return rc.Backup, ""
}

// restoreSubject names what a recovery restores, for messages.
func restoreSubject(rec RestoreRecovery) string {
	if rec.Replay {
		return fmt.Sprintf("the continuous backup at %s replayed to revision %d (its newest)", rec.Location, rec.Revision)
	}
	s := fmt.Sprintf("%s (revision %d)", rec.Location, rec.Revision)
	if rec.Fallback != "" {
		s += ", the newest full backup, not the continuous backup: " + rec.Fallback
	}
	return s
}

// replayFallback turns a recovery whose replay failed into one from the newest full backup, under the same
// name: no member restored for it yet (its template restores only a replay that succeeded). ok is false
// when the replay did not fail, or already restores, or there is no full backup to fall back on.
func replayFallback(rc Recovery, rec RestoreRecovery) (RestoreRecovery, bool) {
	if !rec.Replay || rc.ReplayFailed == "" || rc.TemplateRestores == rec.ID || rc.Backup == nil {
		return rec, false
	}
	return RestoreRecovery{ID: rec.ID, Location: rc.Backup.Location, Revision: rc.Backup.Revision,
		Fallback: fmt.Sprintf("replaying the continuous backup at %s to revision %d failed: %s", rec.Location, rec.Revision, rc.ReplayFailed)}, true
}

// continueRestore restarts, one per step, every member pod that does not restore for this recovery (its
// etcd, on the lost cluster's data, must stop), once the pod template restores for it; otherwise it waits
// for the members to start restored.
func continueRestore(o Observed, rec RestoreRecovery) Decision {
	n := max(o.StatefulSetReplicas, 0)
	if fb, ok := replayFallback(o.Recovery, rec); ok {
		d := continueRestore(o, fb)
		d.Message = fmt.Sprintf("restoring every member from %s; %s", restoreSubject(fb), d.Message)
		return d
	}
	d := Decision{Replicas: n, Config: restoreConfig(n, rec), Phase: PhaseRecovering}
	if o.Recovery.TemplateRestores != rec.ID {
		// A pod restarted now would come back without the restore step, on the lost cluster's data.
		switch {
		case rec.Replay && o.Recovery.ReplayFailed != "":
			d.Message = fmt.Sprintf("replaying the continuous backup at %s to revision %d failed (%s), and no full backup of this cluster "+
				"is known to restore instead; restore it by hand", rec.Location, rec.Revision, o.Recovery.ReplayFailed)
		case rec.Replay:
			d.Message = fmt.Sprintf("replaying the continuous backup at %s to revision %d into a snapshot; no member restarts before it is stored and verified",
				rec.Location, rec.Revision)
		default:
			d.Message = fmt.Sprintf("waiting for the members' pod template to restore %s", rec.Location)
		}
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
	d.Message = fmt.Sprintf("restoring every member from %s: waiting for the %d members to start on it", restoreSubject(rec), n)
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
	d.Message = fmt.Sprintf("restored from %s: ", restoreSubject(*rec))
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
		Message: fmt.Sprintf("restored from %s: %d members, every one healthy", restoreSubject(*rec), len(v.ours))}, true
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
