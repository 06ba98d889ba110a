package membergate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A forced start (etcd's --force-new-cluster during a quorum-loss recovery) must reach exactly the member
// the operator names, once. The members' configuration cannot carry it: the kubelet gives that to every
// member's etcd at every start of its container (after a liveness kill, an OOM, or a removed member's exit),
// and the gate, which would hold those back, runs only when a pod starts. So the gate of the named member's
// new pod writes a ticket naming its pod UID in a volume of that pod alone (an emptyDir, gone with the pod),
// and the etcd entry (EtcdStart) takes it before etcd starts: the first start in that pod forces, and no
// later start, nor any other pod's, can.

// ForceTicketFile is the ticket's name in the pod's ticket directory.
const ForceTicketFile = "force-new-cluster"

// WriteForceTicket leaves, in dir, the ticket for one forced start of etcd in pod podUID.
func WriteForceTicket(dir, podUID string) error {
	if podUID == "" {
		return errors.New("a forced start's ticket needs the pod's UID")
	}
	tmp := filepath.Join(dir, ForceTicketFile+".tmp")
	if err := os.WriteFile(tmp, []byte(podUID+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ForceTicketFile))
}

// ClearForceTicket removes a ticket an earlier run of the gate in this pod left (a gate that runs again
// decides again).
func ClearForceTicket(dir string) error {
	if err := os.Remove(filepath.Join(dir, ForceTicketFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// TakeForceTicket consumes the ticket in dir: true when there was one for pod podUID. It is removed before
// etcd starts: at most one start forces. etcd writes the forced membership to its log before it serves, so
// a restart after that comes up alone anyway; a container killed before it stays out of quorum, and deleting
// its pod (whose successor's gate issues a new ticket while the instruction stands) forces again.
func TakeForceTicket(dir, podUID string) (bool, error) {
	path := filepath.Join(dir, ForceTicketFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return podUID != "" && strings.TrimSpace(string(b)) == podUID, nil
}

// EtcdStart is the environment etcd starts with in a member pod: the container's own, with
// EnvForceNewCluster set only when this pod's ticket is taken, and dropped otherwise (whatever the
// configuration says). It reports whether the start forces.
func EtcdStart(environ []string, ticketDir string) ([]string, bool, error) {
	var env []string
	podUID := ""
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvForceNewCluster:
			continue
		case EnvPodUID:
			podUID = v
		}
		env = append(env, kv)
	}
	forced, err := TakeForceTicket(ticketDir, podUID)
	if err != nil {
		return nil, false, fmt.Errorf("forced start ticket in %s: %w", ticketDir, err)
	}
	if forced {
		env = append(env, EnvForceNewCluster+"=true")
	}
	return env, forced, nil
}
