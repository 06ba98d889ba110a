package membership

import (
	"strings"
	"testing"
	"time"
)

// lostForBackup is lostMajority with recovery from the newest backup allowed, and a backup to read.
func lostForBackup(lostFor time.Duration) Observed {
	o := lostMajority(lostFor)
	o.Recovery.FromSurvivor, o.Recovery.FromBackup = false, true
	o.Recovery.Backup = &Backup{Location: "pvc://c-backups/ns/c/scheduled/c-r42.db", Revision: 42}
	return o
}

// restoringFor is lostForBackup once the recovery is recorded, with the given pods restoring for it.
func restoringFor(o Observed, restored ...int) (Observed, RestoreRecovery) {
	rec := RestoreRecovery{ID: RestoreRecoveryID(now.Add(-time.Minute)), Location: o.Recovery.Backup.Location, Revision: 42}
	o.Recovery.Restoring, o.Recovery.TemplateRestores = &rec, rec.ID
	for _, ord := range restored {
		p := o.Pods[ord]
		p.RestoreRecovery, p.UID = rec.ID, "restored-"+p.UID
		o.Pods[ord] = p
	}
	return o, rec
}

// restoredAndAnswering: every member restored and etcd answers with the restored members (new IDs 200+),
// their claims recording the IDs given.
func restoredAndAnswering(claimIDs ...uint64) Observed {
	o, _ := restoringFor(lostForBackup(time.Hour), 0, 1, 2)
	o.Reachable = true
	for i := range 3 {
		o.Members = append(o.Members, Member{ID: uint64(200 + i), Ordinal: i, Name: "c-" + string(rune('0'+i)), Started: true, Healthy: true,
			Version: "3.5.17", Leader: i == 0})
		o.Volumes[i] = Volume{MemberID: claimIDs[i]}
	}
	return o
}

func TestQuorumLossRecoveryFromBackup(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "within the window: waits, saying until when",
			in: lostForBackup(time.Minute), replicas: 3, phase: PhaseWaiting,
			message: "recovering from the newest backup at 2026-11-22T12:04:00Z unless the majority comes back"},
		{name: "a majority still holds its data: no restore",
			in: func() Observed {
				o := lostForBackup(time.Hour)
				o.Recovery.Voters[1].HasData = true
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "so the majority may come back"},
		{name: "no backup: says what a human can do",
			in: func() Observed {
				o := lostForBackup(time.Hour)
				o.Recovery.Backup = nil
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "no successful backup of this cluster is known"},
		{name: "past the window: the recovery is recorded, and the template changed before any pod restarts",
			in: lostForBackup(5 * time.Minute), replicas: 3, phase: PhaseRecovering,
			message: "restoring every member from pvc://c-backups/ns/c/scheduled/c-r42.db (revision 42); writes after that revision are lost"},
		{name: "no member answers: a backup still restores",
			in: func() Observed {
				o, _ := restoringFor(lostForBackup(time.Hour))
				o.Recovery.Survivors = map[int]Survivor{}
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering, message: "restarting member 0 to restore"},
		{name: "recorded, but the template does not restore yet: no pod restarts",
			in: func() Observed {
				o, _ := restoringFor(lostForBackup(time.Hour))
				o.Recovery.TemplateRestores = ""
				return o
			}(),
			replicas: 3, phase: PhaseRecovering, message: "waiting for the members' pod template to restore pvc://"},
		{name: "a restore under way restarts the next member still on the lost cluster",
			in:     func() Observed { o, _ := restoringFor(lostForBackup(time.Hour), 0); return o }(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseRecovering, message: "restarting member 1 to restore"},
		{name: "a pod already going away is not restarted again",
			in: func() Observed {
				o, _ := restoringFor(lostForBackup(time.Hour), 0)
				o.Pods[1] = Pod{Terminating: true}
				return o
			}(),
			action: ActionDeletePod, ordinal: 2, replicas: 3, phase: PhaseRecovering, message: "restarting member 2"},
		{name: "every pod restores: waits for them",
			in:       func() Observed { o, _ := restoringFor(lostForBackup(time.Hour), 0, 1, 2); return o }(),
			replicas: 3, phase: PhaseRecovering, message: "waiting for the 3 members to start on it"},
		{name: "the spec's strategy changed meanwhile: the recorded restore still finishes",
			in: func() Observed {
				o, _ := restoringFor(lostForBackup(time.Hour), 0)
				o.Recovery.FromBackup = false
				return o
			}(),
			action: ActionDeletePod, ordinal: 1, replicas: 3, phase: PhaseRecovering, message: "restarting member 1"},
	})
}

// TestRestoreRecoveryConfiguration: every member restores under the recovery's record (state existing:
// nothing bootstraps), keeps that record until the restored members are healthy and their claims record
// their new IDs, and only then returns to the ordinary configuration, with no step.
func TestRestoreRecoveryConfiguration(t *testing.T) {
	d := Plan(lostForBackup(time.Hour))
	want := RestoreRecovery{ID: RestoreRecoveryID(now), Location: "pvc://c-backups/ns/c/scheduled/c-r42.db", Revision: 42}
	if d.Config == nil || d.Config.Restore == nil || *d.Config.Restore != want {
		t.Fatalf("config %+v: want the recovery %+v recorded", d.Config, want)
	}
	if got := d.Config.Ordinals(); len(got) != 3 || d.Config.State != StateExisting || d.Config.ForceNewCluster != nil {
		t.Fatalf("initial cluster %v (%s): want members 0-2, existing (nothing bootstraps an empty member meanwhile)", got, d.Config.State)
	}

	o, rec := restoringFor(lostForBackup(time.Hour), 0, 1, 2)
	if again := Plan(o); again.Config == nil || again.Config.Restore == nil || *again.Config.Restore != rec {
		t.Fatalf("config %+v: a recorded recovery keeps its own record (not a new one at every look)", again.Config)
	}

	// etcd answers, but the claims still record the lost cluster's members: the record stays, and no
	// other rule (a heal for "lost" data) looks.
	waiting := Plan(restoredAndAnswering(100, 101, 102))
	if waiting.Action.Type != ActionNone || waiting.Config == nil || waiting.Config.Restore == nil || waiting.Phase != PhaseRecovering ||
		!strings.Contains(waiting.Message, "waiting for c-0's claim to record the member's new ID") {
		t.Fatalf("answering with old claims: %+v %+v (%q); want the record kept, no step", waiting.Action, waiting.Config, waiting.Message)
	}
	unhealthy := restoredAndAnswering(200, 201, 202)
	unhealthy.Members[2].Healthy = false
	if d := Plan(unhealthy); d.Action.Type != ActionNone || d.Config.Restore == nil || !strings.Contains(d.Message, "waiting for c-2 to be healthy") {
		t.Fatalf("a restored member unhealthy: %+v %+v (%q); want the record kept", d.Action, d.Config, d.Message)
	}
	old := restoredAndAnswering(200, 201, 202)
	old.Pods[1] = Pod{UID: "old-pod-1"}
	if d := Plan(old); d.Action.Type != ActionDeletePod || d.Action.Ordinal != 1 {
		t.Fatalf("a pod not restored while etcd answers: %+v (%q); want it restarted", d.Action, d.Message)
	}

	done := Plan(restoredAndAnswering(200, 201, 202))
	if done.Action.Type != ActionNone || done.Config == nil || done.Config.Restore != nil || done.Config.State != StateExisting ||
		done.Phase != PhaseRecovering || !strings.Contains(done.Message, "restored from pvc://c-backups/ns/c/scheduled/c-r42.db (revision 42): 3 members") {
		t.Fatalf("restored: %+v %+v (%q); want the ordinary configuration back and no step", done.Action, done.Config, done.Message)
	}
}
