package maintenance

import (
	"context"
	"fmt"

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

// Apply takes step: one action, a routine defragmentation or one of a sweep or a recovery, a recovery's
// compaction, or a disarm. Other kinds do nothing.
func Apply(ctx context.Context, cl Cluster, step SpaceStep, report Report) error {
	switch step.Kind {
	case SpaceDefragment, SpaceSweepDefragment, SpaceRecoverDefragment:
		return defragment(ctx, cl, step.Member, report)
	case SpaceDisarm:
		return disarm(ctx, cl, step.Alarms, report)
	case SpaceRecover:
		// Compacting at or below the compacted revision is not an error: a repeated step is harmless.
		if err := cl.Voters.Compact(ctx, step.Revision); err != nil {
			return err
		}
		report(Compacted, fmt.Sprintf("compacted the key-value history at revision %d", step.Revision))
	}
	return nil
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
