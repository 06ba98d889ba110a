package maintenance

import (
	"context"
	"fmt"
	"slices"

	"github.com/seedops/etcd-operator/internal/etcd"
)

// Cluster is how steps reach the members.
type Cluster struct {
	// Voters is a client to the voting members.
	Voters etcd.Client
	// Members as observed, and each one's client URL by ID.
	Members  []Member
	Endpoint map[uint64]string
}

// Step outcomes told to a Report, one per action taken (events).
const (
	Compacted     = "Compacted"
	Defragmented  = "Defragmented"
	AlarmDisarmed = "AlarmDisarmed"
)

// Report is told of each action as it is done.
type Report func(outcome, message string)

// Apply takes step: a routine defragmentation or one of a sweep, a disarm, or the whole NOSPACE recovery
// (RecoverSpace). Other kinds do nothing.
func Apply(ctx context.Context, cl Cluster, step SpaceStep, report Report) error {
	switch step.Kind {
	case SpaceDefragment, SpaceSweepDefragment:
		return defragment(ctx, cl, step.Member, report)
	case SpaceDisarm:
		return disarm(ctx, cl, step.Alarms, report)
	case SpaceRecover:
		return RecoverSpace(ctx, cl, step, report)
	}
	return nil
}

// RecoverSpace compacts at step.Revision, defragments every voter (followers by name, then the leader), and
// disarms step.Alarms if every file is then below
// step.LimitBytes. Each action is idempotent: after a crash the procedure runs again from the start. It
// returns nil once every voter is defragmented, whether or not the alarm could be disarmed.
func RecoverSpace(ctx context.Context, cl Cluster, step SpaceStep, report Report) error {
	if err := cl.Voters.Compact(ctx, step.Revision); err != nil {
		return err
	}
	report(Compacted, fmt.Sprintf("compacted the key-value history at revision %d", step.Revision))

	voters := byName(slices.DeleteFunc(slices.Clone(cl.Members), func(m Member) bool { return m.Learner }))
	leader, err := leaderOf(ctx, cl)
	if err != nil {
		return err
	}
	for _, m := range voters {
		if m.ID != leader {
			if err := defragment(ctx, cl, m, report); err != nil {
				return err
			}
		}
	}
	for _, m := range voters {
		if m.ID == leader {
			if err := defragment(ctx, cl, m, report); err != nil {
				return err
			}
		}
	}

	for _, m := range voters {
		st, err := cl.Voters.Status(ctx, cl.Endpoint[m.ID])
		if err != nil {
			return err
		}
		if st.DBSize >= step.LimitBytes {
			return nil // the plan says Blocked, with the sizes, on the next look
		}
	}
	return disarm(ctx, cl, step.Alarms, report)
}

// leaderOf asks the members which one leads.
func leaderOf(ctx context.Context, cl Cluster) (uint64, error) {
	var lastErr error
	for _, m := range byName(cl.Members) {
		st, err := cl.Voters.Status(ctx, cl.Endpoint[m.ID])
		if err != nil {
			lastErr = err
			continue
		}
		if st.Leader != 0 {
			return st.Leader, nil
		}
	}
	return 0, fmt.Errorf("no member knows a leader: %w", lastErr)
}

func defragment(ctx context.Context, cl Cluster, m Member, report Report) error {
	url, ok := cl.Endpoint[m.ID]
	if !ok {
		return fmt.Errorf("defragment member %s: no client URL known", m.Name)
	}
	if err := cl.Voters.Defragment(ctx, url); err != nil {
		return err
	}
	msg := fmt.Sprintf("defragmented member %s", m.Name)
	if st, err := cl.Voters.Status(ctx, url); err == nil {
		msg += fmt.Sprintf(": its database file is %s (%s of data)", mib(st.DBSize), mib(st.DBSizeInUse))
	}
	report(Defragmented, msg)
	return nil
}

func disarm(ctx context.Context, cl Cluster, alarms []etcd.Alarm, report Report) error {
	for _, a := range alarms {
		if err := cl.Voters.DisarmAlarm(ctx, a); err != nil {
			return err
		}
	}
	report(AlarmDisarmed, "disarmed the NOSPACE alarm: every member's database is well below the quota")
	return nil
}
