package maintenance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A sweep defragments every voting member in turn, whatever its free pages: on a schedule, or when a human
// asks (before a known quiet hour, after deleting much data). It keeps the routine rules: one member at a
// time, followers by name, the leader last, each only while every member answers and is healthy.

// Sweep triggers, as status reports them.
const (
	TriggerSchedule = "schedule"
	TriggerRequest  = "request"
)

// searchWindows bound the search for the latest scheduled time: the smallest window before now that holds
// one is searched from its start, so a schedule of every minute and one of once a year both cost a few
// iterations, however long ago the last sweep was.
var searchWindows = []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour}

// maxTicksPerWindow caps the iterations in one window (a minute schedule has 1,440 a day).
const maxTicksPerWindow = 100_000

// LatestScheduled returns the latest time of schedule after since and not after now (zero if there is
// none), and the first time of schedule after now. Times are UTC.
func LatestScheduled(schedule string, since, now time.Time) (latest, next time.Time, err error) {
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	since, now = since.UTC(), now.UTC()
	next = sched.Next(now)
	if next.IsZero() {
		// The parser gives up after five years without a match (e.g. "0 0 30 2 *": February 30th).
		return time.Time{}, time.Time{}, fmt.Errorf("schedule %q never falls due", schedule)
	}
	for _, w := range searchWindows {
		from := now.Add(-w)
		if from.Before(since) {
			from = since
		}
		for t, n := sched.Next(from), 0; !t.IsZero() && !t.After(now) && n < maxTicksPerWindow; t, n = sched.Next(t), n+1 {
			latest = t
		}
		if !latest.IsZero() || !from.After(since) {
			return latest, next, nil
		}
	}
	return latest, next, nil
}

// PlanSweep returns the sweep's next defragmentation: a voter not in done, followers by name before the
// leader. finished is true once every voter is in done. It waits (SpaceWait, with the reason) while a member
// does not answer or is unhealthy: a member serves nothing while it defragments, and with another one down
// that could cost quorum.
func PlanSweep(members []Member, done []string) (step SpaceStep, finished bool) {
	var unwell []string
	for _, m := range members {
		if !m.Answered || !m.Healthy {
			unwell = append(unwell, m.Name)
		}
	}
	if len(unwell) > 0 {
		slices.Sort(unwell)
		return SpaceStep{Kind: SpaceWait, Reason: fmt.Sprintf("waiting for every member to be healthy (not: %s)", strings.Join(unwell, ", "))}, false
	}
	var leader *Member
	for _, m := range byName(members) {
		switch {
		case m.Learner || slices.Contains(done, m.Name):
		case m.Leader:
			leader = &m
		default:
			return SpaceStep{Kind: SpaceSweepDefragment, Member: m, Reason: fmt.Sprintf("defragmenting member %s in turn", m.Name)}, false
		}
	}
	if leader != nil {
		return SpaceStep{Kind: SpaceSweepDefragment, Member: *leader, Reason: fmt.Sprintf("defragmenting member %s, the leader, last", leader.Name)}, false
	}
	return SpaceStep{}, true
}
