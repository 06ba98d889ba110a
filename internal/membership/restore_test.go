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

// continuousPoint is the newest point of the cluster's continuous backup, newer than lostForBackup's
// full backup.
var continuousPoint = Backup{Location: "pvc://c-backups/ns/c/continuous/", Revision: 97, Replay: true}

// TestRestoreChoice: a recovery restores the continuous backup's newest point when it is newer than the
// newest full backup, and says why it restores the full backup when the continuous backup cannot be used.
func TestRestoreChoice(t *testing.T) {
	full := &Backup{Location: "pvc://c-backups/ns/c/scheduled/c-r42.db", Revision: 42}
	older := continuousPoint
	older.Revision = 42
	for _, tc := range []struct {
		name         string
		rc           Recovery
		want         *Backup
		wantFallback string
	}{
		{"continuous newer", Recovery{Backup: full, Continuous: &continuousPoint}, &continuousPoint, ""},
		{"continuous only", Recovery{Continuous: &continuousPoint}, &continuousPoint, ""},
		{"full backup as new: no replay, no fallback", Recovery{Backup: full, Continuous: &older}, full, ""},
		{"continuous unusable: the full backup, saying why", Recovery{Backup: full, ContinuousProblem: "no coverage yet"}, full, "no coverage yet"},
		{"no continuous backup", Recovery{Backup: full}, full, ""},
		{"nothing", Recovery{ContinuousProblem: "no coverage yet"}, nil, ""},
	} {
		got, fallback := restoreChoice(tc.rc)
		if got != tc.want || fallback != tc.wantFallback {
			t.Errorf("%s: %+v, %q; want %+v, %q", tc.name, got, fallback, tc.want, tc.wantFallback)
		}
	}
}

// replaying is lostForBackup with its continuous backup's newest point recorded as the recovery, the
// members' template not restoring it yet.
func replaying(failed string) (Observed, RestoreRecovery) {
	o := lostForBackup(time.Hour)
	rec := RestoreRecovery{ID: RestoreRecoveryID(now.Add(-time.Minute)), Location: continuousPoint.Location, Revision: 97, Replay: true}
	o.Recovery.Continuous, o.Recovery.Restoring, o.Recovery.ReplayFailed = &continuousPoint, &rec, failed
	return o, rec
}

func TestQuorumLossRecoveryFromContinuousBackup(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "past the window: the replay is recorded, and nothing restarts",
			in: func() Observed {
				o := lostForBackup(5 * time.Minute)
				o.Recovery.Continuous = &continuousPoint
				return o
			}(),
			replicas: 3, phase: PhaseRecovering,
			message: "restoring every member from the continuous backup at pvc://c-backups/ns/c/continuous/ replayed to revision 97 (its newest)"},
		{name: "the continuous backup unusable: the full backup, saying why",
			in: func() Observed {
				o := lostForBackup(5 * time.Minute)
				o.Recovery.ContinuousProblem = "the continuous backup agent reports no coverage yet"
				return o
			}(),
			replicas: 3, phase: PhaseRecovering,
			message: "(revision 42), the newest full backup, not the continuous backup: the continuous backup agent reports no coverage yet"},
		{name: "no backup at all: says why the continuous backup cannot be replayed either",
			in: func() Observed {
				o := lostForBackup(5 * time.Minute)
				o.Recovery.Backup, o.Recovery.ContinuousProblem = nil, "the agent is not ready"
				return o
			}(),
			replicas: 3, phase: PhaseWaiting, message: "the continuous backup cannot be replayed: the agent is not ready"},
		{name: "replaying: no pod restarts before the snapshot is stored and verified",
			in:       func() Observed { o, _ := replaying(""); return o }(),
			replicas: 3, phase: PhaseRecovering, message: "no member restarts before it is stored and verified"},
		{name: "the replay failed: the full backup instead, saying why",
			in:       func() Observed { o, _ := replaying("chain damaged"); return o }(),
			replicas: 3, phase: PhaseRecovering,
			message: "the newest full backup, not the continuous backup: replaying the continuous backup at pvc://c-backups/ns/c/continuous/ to revision 97 failed: chain damaged"},
		{name: "the replay failed and there is no full backup: a human's turn",
			in: func() Observed {
				o, _ := replaying("chain damaged")
				o.Recovery.Backup = nil
				return o
			}(),
			replicas: 3, phase: PhaseRecovering, message: "failed (chain damaged), and no full backup of this cluster is known to restore instead"},
		{name: "the replay succeeded and the template restores it: members restart onto it",
			in: func() Observed {
				o, rec := replaying("")
				o.Recovery.TemplateRestores = rec.ID
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering, message: "restarting member 0 to restore pvc://c-backups/ns/c/continuous/"},
		{name: "a template that restores the replay is never switched to the full backup",
			in: func() Observed {
				o, rec := replaying("a later Job failed")
				o.Recovery.TemplateRestores = rec.ID
				return o
			}(),
			action: ActionDeletePod, ordinal: 0, replicas: 3, phase: PhaseRecovering, message: "restarting member 0 to restore pvc://c-backups/ns/c/continuous/"},
	})
}

// TestReplayRecoveryConfiguration: the configuration records the replay, then, when it failed, the full
// backup under the same recovery (no member restored for it), with why.
func TestReplayRecoveryConfiguration(t *testing.T) {
	o := lostForBackup(time.Hour)
	o.Recovery.Continuous = &continuousPoint
	d := Plan(o)
	want := RestoreRecovery{ID: RestoreRecoveryID(now), Location: continuousPoint.Location, Revision: 97, Replay: true}
	if d.Config == nil || d.Config.Restore == nil || *d.Config.Restore != want || d.Action.Type != ActionNone {
		t.Fatalf("config %+v, action %s: want the replay %+v recorded and no step", d.Config, d.Action.Type, want)
	}

	o, rec := replaying("")
	if again := Plan(o); again.Config == nil || again.Config.Restore == nil || *again.Config.Restore != rec {
		t.Fatalf("config %+v: a replay under way keeps its record", again.Config)
	}

	o, rec = replaying("chain damaged")
	fb := Plan(o)
	if fb.Config == nil || fb.Config.Restore == nil {
		t.Fatalf("config %+v: want the fallback recorded", fb.Config)
	}
	got := *fb.Config.Restore
	if got.ID != rec.ID || got.Replay || got.Location != "pvc://c-backups/ns/c/scheduled/c-r42.db" || got.Revision != 42 ||
		!strings.Contains(got.Fallback, "to revision 97 failed: chain damaged") || fb.Action.Type != ActionNone {
		t.Fatalf("fallback %+v, action %s: want the full backup under %s, saying why, no step yet", got, fb.Action.Type, rec.ID)
	}
	// Recorded: the next look continues it (the template restores the full backup, then pods restart).
	o.Recovery.Restoring, o.Recovery.TemplateRestores = &got, got.ID
	if next := Plan(o); next.Config.Restore == nil || *next.Config.Restore != got || next.Action.Type != ActionDeletePod {
		t.Fatalf("after the fallback: %+v, %s; want the fallback kept and member 0 restarted", next.Config.Restore, next.Action.Type)
	}
}
