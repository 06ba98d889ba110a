package maintenance

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func TestLatestScheduled(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, schedule, since, now string
		latest, next               string // "" for none
	}{
		{"not yet due", "0 3 * * *", "2026-11-24T03:00:00Z", "2026-11-24T12:00:00Z", "", "2026-11-25T03:00:00Z"},
		{"due once", "0 3 * * *", "2026-11-24T03:00:00Z", "2026-11-25T03:00:00Z", "2026-11-25T03:00:00Z", "2026-11-26T03:00:00Z"},
		{"missed several: the latest counts", "0 3 * * *", "2026-11-01T03:00:00Z", "2026-11-25T04:00:00Z", "2026-11-25T03:00:00Z", "2026-11-26T03:00:00Z"},
		{"every minute, long ago", "* * * * *", "2020-01-01T00:00:00Z", "2026-11-25T04:00:30Z", "2026-11-25T04:00:00Z", "2026-11-25T04:01:00Z"},
		{"yearly, missed", "@yearly", "2024-06-01T00:00:00Z", "2026-11-25T04:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"yearly, none since", "@yearly", "2026-01-01T00:00:00Z", "2026-11-25T04:00:00Z", "", "2027-01-01T00:00:00Z"},
		{"monthly in a window's gap", "0 0 1 * *", "2026-10-02T00:00:00Z", "2026-11-25T04:00:00Z", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"since in the future", "0 3 * * *", "2026-11-26T00:00:00Z", "2026-11-25T04:00:00Z", "", "2026-11-26T03:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			latest, next, err := LatestScheduled(tc.schedule, at(tc.since), at(tc.now))
			if err != nil {
				t.Fatal(err)
			}
			want := time.Time{}
			if tc.latest != "" {
				want = at(tc.latest)
			}
			if !latest.Equal(want) {
				t.Errorf("latest = %v, want %v", latest, want)
			}
			if !next.Equal(at(tc.next)) {
				t.Errorf("next = %v, want %s", next, tc.next)
			}
		})
	}
}

// TestLatestScheduledAgreesWithStepping checks the windowed search against stepping through every time of
// the schedule from since, for schedules of very different frequencies.
func TestLatestScheduledAgreesWithStepping(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, schedule := range []string{"*/7 * * * *", "0 */5 * * *", "15 3 * * sun", "0 0 1 */2 *", "0 0 29 2 *", "30 2 1,15 * mon-fri"} {
		for now := since; now.Before(since.AddDate(0, 3, 0)); now = now.Add(61*time.Hour + 13*time.Minute) {
			got, _, err := LatestScheduled(schedule, since, now)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := cron.ParseStandard(schedule)
			if err != nil {
				t.Fatal(err)
			}
			var want time.Time
			for tt := sched.Next(since); !tt.After(now); tt = sched.Next(tt) {
				want = tt
			}
			if !got.Equal(want) {
				t.Fatalf("%q since %v at %v: latest %v, stepping says %v", schedule, since, now, got, want)
			}
		}
	}
}

func TestLatestScheduledRefusesBadSchedules(t *testing.T) {
	for _, schedule := range []string{"every night", "0 0 30 2 *"} {
		if _, _, err := LatestScheduled(schedule, time.Now(), time.Now()); err == nil {
			t.Errorf("%q: no error", schedule)
		}
	}
}

func TestPlanSweep(t *testing.T) {
	healthy := func(name string, leader bool) Member {
		return Member{ID: uint64(len(name)), Name: name, Answered: true, Healthy: true, Leader: leader}
	}
	three := []Member{healthy("c-2", false), healthy("c-0", true), healthy("c-1", false)}
	cases := []struct {
		name     string
		members  []Member
		done     []string
		kind     SpaceStepKind
		member   string
		finished bool
		reason   string
	}{
		{"first follower by name", three, nil, SpaceSweepDefragment, "c-1", false, "in turn"},
		{"next follower", three, []string{"c-1"}, SpaceSweepDefragment, "c-2", false, "in turn"},
		{"leader last", three, []string{"c-1", "c-2"}, SpaceSweepDefragment, "c-0", false, "the leader, last"},
		{"finished", three, []string{"c-1", "c-2", "c-0"}, SpaceNone, "", true, ""},
		{"a member gone since it was done", three[1:], []string{"c-1", "c-2", "c-0"}, SpaceNone, "", true, ""},
		{"a learner is not a voter", append([]Member{{Name: "c-3", Answered: true, Healthy: true, Learner: true}}, three...),
			[]string{"c-1", "c-2", "c-0"}, SpaceNone, "", true, ""},
		{"waits for an unhealthy member", []Member{healthy("c-0", true), {Name: "c-1", Answered: true}, healthy("c-2", false)},
			nil, SpaceWait, "", false, "not: c-1"},
		{"waits for a member that does not answer", []Member{healthy("c-0", true), healthy("c-1", false), {Name: "c-2"}},
			[]string{"c-1"}, SpaceWait, "", false, "not: c-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step, finished := PlanSweep(tc.members, tc.done)
			if step.Kind != tc.kind || step.Member.Name != tc.member || finished != tc.finished || !strings.Contains(step.Reason, tc.reason) {
				t.Fatalf("PlanSweep = %+v, finished %v; want %s of %q, finished %v, reason with %q", step, finished, tc.kind, tc.member, tc.finished, tc.reason)
			}
		})
	}
}
