package maintenance

import (
	"strings"
	"testing"

	"github.com/seedops/etcd-operator/internal/etcd"
)

const mi = 1 << 20

func TestPlanSpace(t *testing.T) {
	noSpace := []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}}
	member := func(id uint64, name string, size, inUse int64, leader bool) Member {
		return Member{ID: id, Name: name, Answered: true, Leader: leader, DBSize: size * mi, DBSizeInUse: inUse * mi}
	}
	full := []Member{member(1, "a-0", 100, 100, true), member(2, "a-1", 100, 100, false), member(3, "a-2", 100, 100, false)}
	compacted := []Member{member(1, "a-0", 100, 5, true), member(2, "a-1", 100, 5, false), member(3, "a-2", 100, 5, false)}
	for _, tc := range []struct {
		name   string
		o      SpaceObserved
		want   SpaceStepKind
		member string // SpaceDefragment
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
		{name: "compacts first", o: SpaceObserved{Members: full, Alarms: noSpace, Revision: 9, QuotaBytes: 100 * mi},
			want: SpaceCompact},
		{name: "compacts again after deletes moved the revision",
			o:    SpaceObserved{Members: full, Alarms: noSpace, Revision: 12, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceCompact},
		{name: "defragments followers first, by name",
			o:    SpaceObserved{Members: compacted, Alarms: noSpace, Revision: 9, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceDefragment, member: "a-1"},
		{name: "the leader last",
			o: SpaceObserved{Members: []Member{compacted[0], member(2, "a-1", 5, 5, false), member(3, "a-2", 5, 5, false)},
				Alarms: noSpace, Revision: 9, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceDefragment, member: "a-0"},
		{name: "a file just above the limit whose data is below it is defragmented, though it has few free pages",
			o: SpaceObserved{Members: []Member{member(1, "a-0", 5, 5, true), member(2, "a-1", 92, 88, false), member(3, "a-2", 5, 5, false)},
				Alarms: noSpace, Revision: 9, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceDefragment, member: "a-1"},
		{name: "disarms once every file is small",
			o: SpaceObserved{Members: []Member{member(1, "a-0", 5, 5, true), member(2, "a-1", 5, 5, false), member(3, "a-2", 5, 5, false)},
				Alarms: noSpace, Revision: 9, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceDisarm},
		{name: "blocked when the data itself fills the quota",
			o:    SpaceObserved{Members: full, Alarms: noSpace, Revision: 9, CompactedRevision: 9, QuotaBytes: 100 * mi},
			want: SpaceBlocked, reason: "delete keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanSpace(tc.o)
			if got.Kind != tc.want {
				t.Fatalf("step %q (%s), want %q", got.Kind, got.Reason, tc.want)
			}
			if tc.member != "" && got.Member.Name != tc.member {
				t.Fatalf("defragments %s, want %s", got.Member.Name, tc.member)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Fatalf("reason %q does not say %q", got.Reason, tc.reason)
			}
			if got.Kind == SpaceCompact && got.Revision != tc.o.Revision {
				t.Fatalf("compacts at %d, want the current revision %d", got.Revision, tc.o.Revision)
			}
			if got.Kind == SpaceDisarm && len(got.Alarms) != 1 {
				t.Fatalf("disarms %v, want the NOSPACE alarm only", got.Alarms)
			}
		})
	}
}
