package membership

import (
	"context"
	"fmt"

	"github.com/seedops/etcd-operator/internal/etcd"
)

// ApplyToEtcd makes the action's one etcd call. peerURL is the new member's URL (AddLearner only);
// for MoveLeader the client must be connected to the current leader.
func (a Action) ApplyToEtcd(ctx context.Context, cli etcd.Client, peerURL string) error {
	switch a.Type {
	case ActionAddLearner:
		_, err := cli.AddLearner(ctx, peerURL)
		return err
	case ActionPromote:
		return cli.Promote(ctx, a.ID)
	case ActionRemove:
		return cli.Remove(ctx, a.ID)
	case ActionMoveLeader:
		return cli.MoveLeader(ctx, a.ID)
	}
	return fmt.Errorf("%q is not an etcd step", a.Type)
}
