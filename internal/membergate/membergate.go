// Package membergate decides, before etcd starts in a member pod, whether it may start.
//
// The StatefulSet creates member pods whenever it likes, and etcd trusts its configuration: started on an
// empty data directory with an initial cluster state of "existing", it finds "itself" in the running
// cluster by its peer URL and takes over that member's ID. If the operator did not plan that join (the
// pod and its claim were deleted and recreated while the old member is still listed), etcd comes up
// under the old member's ID with none of its data; once the operator replaces the old member, the
// process holds a WAL of a removed ID and every peer rejects it for ever. The gate runs first, with the
// data volume mounted, and lets etcd start only when the evidence says the start is safe:
//
//   - a WAL in the data directory: the member's own data, unless a peer answers with a member list
//     that lacks the WAL's member ID (or with another cluster ID): then the data is stale and the gate
//     refuses, with a termination message starting with RefusalMarker and exit code RefusalExitCode;
//   - no WAL, state new: the cluster bootstraps, start at once; but once the cluster formed without some
//     of its initial members (EnvLateBootstrap lists them), only those may: any other member with an
//     empty directory lost the data it had, and is held until the operator replaces it;
//   - no WAL, state existing: wait until the member list holds a member with this pod's peer URL that
//     has never started (the operator's AddLearner): that member is the one etcd is meant to become;
//   - a WAL while the configuration forces another member to start alone (a quorum-loss recovery: see
//     EnvForceNewClusterMember): hold, exiting with HoldExitCode, so that this member never forces a
//     cluster of its own; the kubelet runs the gate again, and once the operator has taken the instruction
//     out, the first rule judges the data (by then the recovered member no longer lists it). The member
//     the instruction names starts with Decision.Force, in a pod created after the instruction was
//     written; the gate hands that start to etcd as a ticket in the pod's own volume (forced.go), never
//     through the configuration every container reads;
//   - in a pod that restores a backup for a quorum-loss recovery (see EnvRestoreRecovery), a WAL of the
//     lost cluster, or no WAL: start, so that the restore step, which runs next, moves the data aside and
//     restores the snapshot. Peers must not judge it: those already restored are another cluster, and
//     their answer would condemn data the restore keeps; and no member is added for an empty directory to
//     wait for. A WAL the restore wrote (its member ID is the one the recovery's token gives this member)
//     is judged by the first rule.
package membergate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

const (
	// RefusalMarker starts the termination message of a gate that refused to let etcd start because
	// the data directory holds a member the cluster no longer has.
	RefusalMarker = "stale-data:"
	// RefusalExitCode is the gate's exit code when it refuses; other failures exit 1 (or 2 for usage).
	RefusalExitCode = 3
	// HoldMarker and HoldExitCode: the gate holds a member with data back while another member is forced to
	// start alone; nothing is wrong with the data, it is judged at the gate's next run.
	HoldMarker   = "held:"
	HoldExitCode = 4

	// EnvForceNewCluster is etcd's own --force-new-cluster setting. It is never in the members'
	// configuration: the kubelet gives that to every container at every start, and a second member forced
	// alone is a second cluster. Only the etcd entry (EtcdStart) sets it, once, on a ticket of its own pod.
	EnvForceNewCluster = "ETCD_FORCE_NEW_CLUSTER"
	// EnvForceNewClusterMember, in the members' configuration during a quorum-loss recovery, names the
	// member to restart alone: every other member's gate holds its data back meanwhile. It is the
	// operator's record of the decision, not a setting etcd reads. EnvForceNewClusterOldPod, beside it,
	// is the UID of that member's pod when the instruction was written: that pod may have passed its gate
	// before, so it never forces; the pod that replaces it does.
	EnvForceNewClusterMember = "FORCE_NEW_CLUSTER_MEMBER"
	EnvForceNewClusterOldPod = "FORCE_NEW_CLUSTER_OLD_POD"
	// EnvPodUID is the pod's own UID (downward API), which a forced start's ticket names.
	EnvPodUID = "POD_UID"
	// EnvRestoreRecovery, on the gate container of a pod whose restore step restores for a quorum-loss
	// recovery from a backup, names that recovery. The pod template sets it, not the shared
	// configuration: only a pod that restores may let the lost cluster's data, or an empty directory,
	// through at once.
	EnvRestoreRecovery = "MEMBER_GATE_RESTORE_RECOVERY"
	// EnvRestoreToken, beside EnvRestoreRecovery, is the initial cluster token the pod's restore step
	// restores under (from the template too: a configuration the kubelet read before the recovery began
	// would name the lost cluster's token).
	EnvRestoreToken = "MEMBER_GATE_RESTORE_TOKEN"
	// EnvLateBootstrap, in the members' configuration beside state "new" once the cluster formed, names
	// the initial members that never started (comma-separated): only they may still bootstrap.
	EnvLateBootstrap = "MEMBER_GATE_LATE_BOOTSTRAP"

	stateNew      = "new"
	stateExisting = "existing"
)

// Config is what the gate knows about its member: etcd's own configuration, so it judges exactly the
// member etcd is about to start.
type Config struct {
	// WALDir is the member's WAL directory (ETCD_WAL_DIR, else <ETCD_DATA_DIR>/member/wal).
	WALDir string
	// State is ETCD_INITIAL_CLUSTER_STATE: "new" or "existing".
	State string
	// PeerURLs are the member's own advertised peer URLs (ETCD_INITIAL_ADVERTISE_PEER_URLS).
	PeerURLs []string
	// Peers are the peer URLs of the other members (ETCD_INITIAL_CLUSTER without this member).
	Peers []string
	// TLS is the client configuration for https peers; nil for plain http.
	TLS *tls.Config
	// Name is the member's name (ETCD_NAME); ForcedMember, during a quorum-loss recovery, names the member
	// the configuration forces to start alone ("" otherwise), and OldPod the pod of it that must not.
	Name, ForcedMember, OldPod string
	// PodUID is this pod's UID (EnvPodUID; "" from a template without it, which then never forces).
	PodUID string
	// RestoreRecovery, during a quorum-loss recovery from a backup, names it ("" otherwise); Token is the
	// initial cluster token the restore gives the member's new data.
	RestoreRecovery, Token string
	// LateBootstrap, with state new once the cluster formed, names the members that may still bootstrap
	// (nil: every member may, the cluster is bootstrapping).
	LateBootstrap []string

	// Interval between polls while waiting (default 1 s; the member-gate command asks every 250 ms); RequestTimeout bounds one peer's answer
	// (default 3 s).
	Interval, RequestTimeout time.Duration
	// Log receives what the gate found and what it waits for; nil logs nothing.
	Log *zap.Logger
}

// ConfigFromEnv reads etcd's ETCD_* variables through getenv (the kubelet has already expanded the
// $(POD_NAME) references in them).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	dataDir := getenv("ETCD_DATA_DIR")
	adv := getenv("ETCD_INITIAL_ADVERTISE_PEER_URLS")
	if dataDir == "" || adv == "" {
		return Config{}, errors.New("ETCD_DATA_DIR and ETCD_INITIAL_ADVERTISE_PEER_URLS must be set")
	}
	cfg := Config{WALDir: getenv("ETCD_WAL_DIR"), State: getenv("ETCD_INITIAL_CLUSTER_STATE"), PeerURLs: splitList(adv), Name: getenv("ETCD_NAME"),
		RestoreRecovery: getenv(EnvRestoreRecovery), Token: getenv(EnvRestoreToken), LateBootstrap: splitList(getenv(EnvLateBootstrap))}
	cfg.ForcedMember, cfg.OldPod, cfg.PodUID = getenv(EnvForceNewClusterMember), getenv(EnvForceNewClusterOldPod), getenv(EnvPodUID)
	if strings.EqualFold(getenv(EnvForceNewCluster), "true") {
		return Config{}, fmt.Errorf("%s is set in the members' configuration: every member would force a cluster of its own", EnvForceNewCluster)
	}
	if cfg.WALDir == "" {
		cfg.WALDir = WALDir(dataDir)
	}
	if cfg.State == "" {
		cfg.State = stateNew // etcd's default
	}
	if cfg.State != stateNew && cfg.State != stateExisting {
		return Config{}, fmt.Errorf("ETCD_INITIAL_CLUSTER_STATE %q: want %s or %s", cfg.State, stateNew, stateExisting)
	}
	peers, err := otherPeers(getenv("ETCD_INITIAL_CLUSTER"), getenv("ETCD_NAME"), cfg.PeerURLs)
	if err != nil {
		return Config{}, err
	}
	cfg.Peers = peers
	if cfg.RestoreRecovery != "" && cfg.Token == "" {
		return Config{}, fmt.Errorf("%s is set without %s: which data the restore wrote is unknown", EnvRestoreRecovery, EnvRestoreToken)
	}
	if anyHTTPS(append(append([]string{}, cfg.PeerURLs...), cfg.Peers...)) {
		cfg.TLS, err = PeerTLSConfig(getenv("ETCD_PEER_CERT_FILE"), getenv("ETCD_PEER_KEY_FILE"), getenv("ETCD_PEER_TRUSTED_CA_FILE"))
		if err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// otherPeers are the peer URLs of initialCluster ("name=url,...", a name may repeat for several URLs)
// that belong to other members: neither this member's name nor one of its own URLs.
func otherPeers(initialCluster, name string, own []string) ([]string, error) {
	var out []string
	for _, part := range splitList(initialCluster) {
		n, u, ok := strings.Cut(part, "=")
		if !ok || u == "" {
			return nil, fmt.Errorf("ETCD_INITIAL_CLUSTER: %q is not name=url", part)
		}
		if (name != "" && n == name) || anyURL([]string{u}, own) {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

func anyHTTPS(urls []string) bool {
	for _, u := range urls {
		if p, err := url.Parse(u); err == nil && strings.EqualFold(p.Scheme, "https") {
			return true
		}
	}
	return false
}

// Decision is the gate's verdict.
type Decision struct {
	// Start says etcd may start; false is a refusal, or a hold.
	Start bool
	// Force: etcd starts once with --force-new-cluster (a ticket for this pod, WriteForceTicket).
	Force bool
	// Hold: etcd may not start now, but nothing is wrong with the data.
	Hold bool
	// Reason is the evidence, in one line.
	Reason string
}

// Message is the line the gate writes as its termination message: a refusal starts with RefusalMarker, a
// hold with HoldMarker.
func (d Decision) Message() string {
	switch {
	case d.Start:
		return "start: " + d.Reason
	case d.Hold:
		return HoldMarker + " " + d.Reason
	}
	return RefusalMarker + " " + d.Reason
}

func (c *Config) log() *zap.Logger {
	if c.Log == nil {
		return zap.NewNop()
	}
	return c.Log
}

func (c *Config) interval() time.Duration {
	if c.Interval > 0 {
		return c.Interval
	}
	return time.Second
}

func (c *Config) requestTimeout() time.Duration {
	if c.RequestTimeout > 0 {
		return c.RequestTimeout
	}
	return 3 * time.Second
}

// Check decides whether etcd may start. It returns an error only when ctx ends while it waits (SIGTERM:
// the pod is going away) or the configuration is unusable.
func Check(ctx context.Context, cfg Config) (Decision, error) {
	lg := cfg.log()
	md, hasWAL, err := ReadWALMetadata(cfg.WALDir)
	switch {
	case hasWAL && err != nil:
		// etcd would fail on this WAL as well, and report it better. A member with a WAL, readable or
		// not, never takes another member's identity, which is the one thing the gate must prevent.
		lg.Warn("WAL unreadable; leaving it to etcd", zap.String("dir", cfg.WALDir), zap.Error(err))
		return Decision{Start: true, Reason: fmt.Sprintf("WAL in %s unreadable (%v): etcd reports it", cfg.WALDir, err)}, nil
	case err != nil:
		return Decision{}, fmt.Errorf("read %s: %w", cfg.WALDir, err)
	case hasWAL && cfg.ForcedMember != "" && cfg.ForcedMember != cfg.Name:
		// etcd would read the same instruction and force a cluster of its own from this data.
		return Decision{Hold: true, Reason: fmt.Sprintf("the cluster is being recovered from %s alone (--force-new-cluster); data of member %x waits",
			cfg.ForcedMember, md.MemberID)}, nil
	case hasWAL && cfg.ForcedMember != "" && (cfg.PodUID == "" || cfg.PodUID == cfg.OldPod):
		// The pod the instruction was written against (or one that cannot tell): the operator replaces it.
		return Decision{Hold: true, Reason: fmt.Sprintf("the operator restarts member %x alone with --force-new-cluster in a new pod; this pod (%q) is the one it replaces",
			md.MemberID, cfg.PodUID)}, nil
	case hasWAL && cfg.ForcedMember != "":
		// Its peers cannot judge it: it is about to become the cluster's only member.
		return Decision{Start: true, Force: true, Reason: fmt.Sprintf("data of member %x, which the operator restarts alone with --force-new-cluster (pod %s)",
			md.MemberID, cfg.PodUID)}, nil
	case hasWAL && cfg.RestoreRecovery != "":
		return checkDataDuringRestore(ctx, cfg, md)
	case hasWAL:
		return checkOwnData(ctx, cfg, md), nil
	case cfg.RestoreRecovery != "":
		return Decision{Start: true, Reason: fmt.Sprintf("empty data directory: recovery %s restores a backup into it", cfg.RestoreRecovery)}, nil
	case cfg.State != stateExisting && cfg.LateBootstrap != nil && !slices.Contains(cfg.LateBootstrap, cfg.Name):
		// etcd would check with its peers only if one answers: with none, it would come up empty under the
		// ID of a member that ran, having forgotten its log and votes.
		return Decision{Hold: true, Reason: fmt.Sprintf("empty data directory, but the cluster formed with member %s (only %s never started and may still bootstrap): its data is lost; the operator replaces the member",
			cfg.Name, strings.Join(cfg.LateBootstrap, ", "))}, nil
	case cfg.State != stateExisting:
		return Decision{Start: true, Reason: "empty data directory and initial cluster state " + cfg.State + ": the cluster bootstraps"}, nil
	default:
		return waitForJoin(ctx, cfg)
	}
}

// checkOwnData judges a data directory that holds a WAL. One answer is enough: a member list that lacks
// the WAL's member means the member was removed, and its data must never serve again. No answer at all is
// no evidence (the whole cluster may be restarting, and then every member needs its data), so etcd starts.
func checkOwnData(ctx context.Context, cfg Config, md WALMetadata) Decision {
	lg := cfg.log().With(zap.String("member", fmt.Sprintf("%x", md.MemberID)), zap.String("cluster", fmt.Sprintf("%x", md.ClusterID)))
	list, err := askPeers(ctx, httpClient(cfg.TLS), cfg.Peers, cfg.requestTimeout())
	if err != nil {
		lg.Info("no peer answered; the data is the member's own", zap.Error(err))
		return Decision{Start: true, Reason: fmt.Sprintf("data of member %x; no peer answered", md.MemberID)}
	}
	d := judgeData(md, list)
	lg.Info("judged the data directory", zap.String("peer", list.From), zap.Bool("start", d.Start), zap.String("reason", d.Reason))
	return d
}

// checkDataDuringRestore: while every member restores from a backup, data the restore wrote for this
// member is judged as usual; any other data is the lost cluster's, which the restore step moves aside.
func checkDataDuringRestore(ctx context.Context, cfg Config, md WALMetadata) (Decision, error) {
	restored, err := BootstrapMemberID(cfg.Name, cfg.PeerURLs, cfg.Token)
	if err != nil {
		return Decision{}, fmt.Errorf("%s: %w", EnvRestoreRecovery, err)
	}
	if md.MemberID == restored {
		return checkOwnData(ctx, cfg, md), nil
	}
	return Decision{Start: true, Reason: fmt.Sprintf("data of member %x of the lost cluster: recovery %s restores a backup, and its restore step moves this data aside",
		md.MemberID, cfg.RestoreRecovery)}, nil
}

// judgeData compares the WAL's identity with a peer's member list.
func judgeData(md WALMetadata, list MemberList) Decision {
	if list.ClusterID != 0 && md.ClusterID != 0 && list.ClusterID != md.ClusterID {
		return Decision{Reason: fmt.Sprintf("data of member %x of cluster %x, but peer %s is in cluster %x",
			md.MemberID, md.ClusterID, list.From, list.ClusterID)}
	}
	for _, m := range list.Members {
		if m.ID == md.MemberID {
			return Decision{Start: true, Reason: fmt.Sprintf("data of member %x, which peer %s lists", md.MemberID, list.From)}
		}
	}
	return Decision{Reason: fmt.Sprintf("data of member %x, which peer %s does not list: the member was removed",
		md.MemberID, list.From)}
}

// waitForJoin waits, with an empty data directory and state existing, until the join is planned: a
// member with this pod's peer URL that has never started. etcd will take that member's ID, which is
// then exactly right.
func waitForJoin(ctx context.Context, cfg Config) (Decision, error) {
	lg := cfg.log()
	hc := httpClient(cfg.TLS)
	tick := time.NewTicker(cfg.interval())
	defer tick.Stop()
	var last string
	var polls int
	for {
		var why string
		list, err := askPeers(ctx, hc, cfg.Peers, cfg.requestTimeout())
		if err == nil {
			var ready bool
			ready, why = JoinReady(list, cfg.PeerURLs)
			if ready {
				lg.Info("join planned", zap.String("reason", why))
				return Decision{Start: true, Reason: why}, nil
			}
		} else if ctx.Err() == nil {
			why = "no peer answered: " + err.Error()
		}
		if ctx.Err() != nil {
			return Decision{}, fmt.Errorf("stopped while waiting (%s): %w", last, ctx.Err())
		}
		// Log every change, and a reminder every minute or so, not a line a second.
		if polls++; why != last || polls%60 == 0 {
			lg.Info("waiting before etcd may start", zap.String("for", why))
			last = why
		}
		select {
		case <-ctx.Done():
			return Decision{}, fmt.Errorf("stopped while waiting (%s): %w", last, ctx.Err())
		case <-tick.C:
		}
	}
}

// JoinReady says whether the member list has the member this pod is meant to become (peer URLs own) added
// and never started, and if not, why not.
func JoinReady(list MemberList, own []string) (bool, string) {
	ownURLs := strings.Join(own, ",")
	for _, m := range list.Members {
		if !anyURL(m.PeerURLs, own) {
			continue
		}
		if m.Started() {
			// Its data lives elsewhere (or is lost): starting empty would take its identity.
			return false, fmt.Sprintf("member %x (%s) holds peer URL %s and has started: its data is not here; waiting for it to be replaced",
				m.ID, m.Name, ownURLs)
		}
		return true, fmt.Sprintf("member %x with peer URL %s was added and has not started: etcd joins as it (peer %s)", m.ID, ownURLs, list.From)
	}
	return false, fmt.Sprintf("no member has peer URL %s: the join is not planned yet (peer %s)", ownURLs, list.From)
}
