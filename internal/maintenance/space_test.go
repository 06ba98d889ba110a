package maintenance

import (
	"slices"
	"strings"
	"testing"

	"github.com/seedops/etcd-operator/internal/etcd"
)

const mi = 1 << 20

func TestPlanSpace(t *testing.T) {
	noSpace := []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}}
	member := func(id uint64, name string, size, inUse int64, leader bool) Member {
		return Member{ID: id, Name: name, Answered: true, Healthy: true, Leader: leader, DBSize: size * mi, DBSizeInUse: inUse * mi}
	}
	full := []Member{member(1, "a-0", 100, 100, true), member(2, "a-1", 100, 100, false), member(3, "a-2", 100, 100, false)}
	small := []Member{member(1, "a-0", 5, 5, true), member(2, "a-1", 5, 5, false), member(3, "a-2", 79, 79, false)}
	for _, tc := range []struct {
		name   string
		o      SpaceObserved
		want   SpaceStepKind
		reason string // a part of the reason
	}{
		{name: "no alarm", o: SpaceObserved{Members: full, Revision: 9, QuotaBytes: 100 * mi}, want: SpaceNone},
		{name: "a CORRUPT alarm is not this plan's",
			o:    SpaceObserved{Members: full, Alarms: []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmCorrupt}}, Revision: 9, QuotaBytes: 100 * mi},
			want: SpaceNone},
		{name: "a member that does not answer holds everything back",
			o: SpaceObserved{Members: []Member{full[0], {ID: 2, Name: "a-1"}, full[2]}, Alarms: noSpace, Revision: 9,
				QuotaBytes: 100 * mi},
			want: SpaceWait, reason: "a-1"},
		{name: "a learner holds recovery back until it is promoted",
			o: SpaceObserved{Members: []Member{full[0], full[1], {ID: 4, Name: "a-3", Answered: true, Learner: true}},
				Alarms: noSpace, Revision: 9, QuotaBytes: 100 * mi},
			want: SpaceWait, reason: "learner a-3"},
		{name: "recovers at the current revision", o: SpaceObserved{Members: full, Alarms: noSpace, Revision: 9, QuotaBytes: 100 * mi},
			want: SpaceRecover, reason: "revision 9"},
		{name: "recovers again after deletes moved the revision",
			o:    SpaceObserved{Members: full, Alarms: noSpace, Revision: 12, RecoveredRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceRecover, reason: "revision 12"},
		{name: "disarms after a recovery left every file below 80% of the quota",
			o:    SpaceObserved{Members: small, Alarms: noSpace, Revision: 9, RecoveredRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceDisarm},
		{name: "blocked when after a recovery the data itself fills the quota",
			o:    SpaceObserved{Members: full, Alarms: noSpace, Revision: 9, RecoveredRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceBlocked, reason: "delete keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanSpace(tc.o)
			if got.Kind != tc.want {
				t.Fatalf("step %q (%s), want %q", got.Kind, got.Reason, tc.want)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Fatalf("reason %q does not say %q", got.Reason, tc.reason)
			}
			if got.Kind == SpaceRecover && (got.Revision != tc.o.Revision || got.LimitBytes != 80*mi || len(got.Alarms) != 1) {
				t.Fatalf("recovers at %d below %d disarming %v, want the current revision %d, 80%% of the quota, the NOSPACE alarm",
					got.Revision, got.LimitBytes, got.Alarms, tc.o.Revision)
			}
			if got.Kind == SpaceDisarm && len(got.Alarms) != 1 {
				t.Fatalf("disarms %v, want the NOSPACE alarm only", got.Alarms)
			}
		})
	}
}

func TestPlanDefragmentation(t *testing.T) {
	policy := DefragPolicy{FreePercent: 50, MinFreeBytes: 64 * mi}
	member := func(name string, size, inUse int64, leader bool) Member {
		return Member{ID: uint64(len(name)), Name: name, Answered: true, Healthy: true, Leader: leader, DBSize: size * mi, DBSizeInUse: inUse * mi}
	}
	for _, tc := range []struct {
		name    string
		members []Member
		policy  DefragPolicy
		want    string // the member defragmented, "" for none
	}{
		{"nothing fragmented", []Member{member("a-0", 100, 90, true), member("a-1", 100, 90, false)}, policy, ""},
		{"a follower before the leader",
			[]Member{member("a-0", 400, 100, true), member("a-1", 300, 100, false), member("a-2", 400, 100, false)}, policy, "a-1"},
		{"the leader once the followers are done",
			[]Member{member("a-0", 400, 100, true), member("a-1", 110, 100, false), member("a-2", 110, 100, false)}, policy, "a-0"},
		{"a single member", []Member{member("a-0", 400, 100, true)}, policy, "a-0"},
		{"below the share", []Member{member("a-0", 400, 210, true)}, policy, ""},
		{"below the size", []Member{member("a-0", 100, 40, true)}, policy, ""},
		{"turned off", []Member{member("a-0", 400, 100, true)}, DefragPolicy{}, ""},
		{"not a learner", []Member{member("a-0", 110, 100, true), {Name: "a-1", Answered: true, Healthy: true, Learner: true, DBSize: 400 * mi, DBSizeInUse: 100 * mi}}, policy, ""},
		{"not while a member is unhealthy",
			[]Member{member("a-0", 400, 100, true), {Name: "a-1", Answered: true, DBSize: 400 * mi, DBSizeInUse: 100 * mi}}, policy, ""},
		{"not while a member does not answer", []Member{member("a-0", 400, 100, true), {Name: "a-1", Healthy: true}}, policy, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanDefragmentation(tc.members, tc.policy)
			if tc.want == "" {
				if got.Kind != SpaceNone {
					t.Fatalf("step %s %s (%s), want none", got.Kind, got.Member.Name, got.Reason)
				}
				return
			}
			if got.Kind != SpaceDefragment || got.Member.Name != tc.want {
				t.Fatalf("step %s %s, want Defragment %s", got.Kind, got.Member.Name, tc.want)
			}
		})
	}
}

// TestPlanSpaceTakesOneStepAtATime: a recovery is a compaction, then one voter's defragmentation per step
// (followers by name, the leader last), then the disarm, which says the recovery completed.
func TestPlanSpaceTakesOneStepAtATime(t *testing.T) {
	noSpace := []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}}
	members := []Member{
		{ID: 1, Name: "a-0", Answered: true, Healthy: true, DBSize: 5 * mi},
		{ID: 2, Name: "a-1", Answered: true, Healthy: true, Leader: true, DBSize: 5 * mi},
		{ID: 3, Name: "a-2", Answered: true, Healthy: true, DBSize: 5 * mi},
	}
	o := SpaceObserved{Members: members, Alarms: noSpace, Revision: 9, RecoveredRevision: 4, QuotaBytes: 100 * mi}
	var got []string
	for range 10 {
		step := PlanSpace(o)
		if step.Kind == SpaceDisarm {
			if step.Recovered != 9 {
				t.Fatalf("disarm after the recovery at revision 9 says it recovered %d", step.Recovered)
			}
			break
		}
		switch step.Kind {
		case SpaceRecover:
			got = append(got, "compact")
			o.Progress = RecoveryProgress{Revision: step.Revision}
		case SpaceRecoverDefragment:
			if step.Revision != 9 || step.LimitBytes != 80*mi {
				t.Fatalf("step %+v: want revision 9, below 80%% of the quota", step)
			}
			got = append(got, step.Member.Name)
			o.Progress.Defragmented = append(o.Progress.Defragmented, step.Member.ID)
		default:
			t.Fatalf("step %q (%s) in the middle of a recovery", step.Kind, step.Reason)
		}
	}
	if want := []string{"compact", "a-0", "a-2", "a-1"}; !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}

	// Progress of another revision (keys deleted since) counts for nothing: compact again.
	o.Revision = 12
	if step := PlanSpace(o); step.Kind != SpaceRecover || step.Revision != 12 {
		t.Fatalf("step %q at %d after the revision moved, want a compaction at 12", step.Kind, step.Revision)
	}
}
