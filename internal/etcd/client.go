// Package etcd is the operator's narrow view of an etcd cluster: the few calls the controller makes,
// behind an interface so tests can plug in real etcd servers started on localhost.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Member is one entry of etcd's member list, the source of truth for membership.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// EndpointStatus is what one member reports about itself.
type EndpointStatus struct {
	MemberID uint64
	Leader   uint64
	Version  string
	DBSize   int64
	// DBSizeInUse is the part of DBSize that holds data; the rest is free pages only a defragmentation
	// returns to the file system.
	DBSizeInUse int64
	// Revision is the key-value store's revision as this member has applied it.
	Revision  int64
	RaftIndex uint64
	IsLearner bool
	Errors    []string
}

// AwaitsLeader reports whether a member's status errors say only that it knows no leader: the cluster is
// electing one (a stalled leader was voted out, a member just restarted), or the member is cut off from a
// majority. Only time tells the two apart.
func AwaitsLeader(errs []string) bool {
	for _, e := range errs {
		if e != rpctypes.ErrNoLeader.Error() {
			return false
		}
	}
	return len(errs) > 0
}

// Client talks to one etcd cluster.
type Client interface {
	// MemberList returns the cluster's members, learners included.
	MemberList(ctx context.Context) ([]Member, error)
	// ClusterID is the ID etcd gave the cluster when it bootstrapped (it never changes).
	ClusterID(ctx context.Context) (uint64, error)
	// Status asks the member serving endpoint about itself.
	Status(ctx context.Context, endpoint string) (EndpointStatus, error)
	// AddLearner adds a non-voting member with the given peer URL and returns the new member list.
	AddLearner(ctx context.Context, peerURL string) (Member, error)
	// Promote makes a caught-up learner a voting member.
	Promote(ctx context.Context, id uint64) error
	// Remove removes a member.
	Remove(ctx context.Context, id uint64) error
	// MoveLeader hands leadership to another voter; the client must be connected to the leader.
	MoveLeader(ctx context.Context, to uint64) error
	// AuthEnabled reports whether etcd authentication is on.
	AuthEnabled(ctx context.Context) (bool, error)
	// EnableAuth creates the root user (with the root role) if it is missing and turns authentication on.
	EnableAuth(ctx context.Context, rootPassword string) error
	// DisableAuth turns authentication off; users and roles are kept.
	DisableAuth(ctx context.Context) error
	// Alarms lists the cluster's active alarms.
	Alarms(ctx context.Context) ([]Alarm, error)
	// DisarmAlarm clears one alarm.
	DisarmAlarm(ctx context.Context, a Alarm) error
	// Compact discards every key revision older than rev, physically (it returns once the space is free
	// for reuse). Compacting at or below the compacted revision is not an error.
	Compact(ctx context.Context, rev int64) error
	// Defragment rewrites the database file of the member serving endpoint, returning free pages to the
	// file system. The member serves no request meanwhile, which takes long on a big database, so it has
	// a timeout of its own.
	Defragment(ctx context.Context, endpoint string) error
	Close() error
}

// Dialer opens a Client to the cluster behind the given client URLs.
type Dialer interface {
	// A nil tlsConfig dials plain HTTP endpoints.
	Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config) (Client, error)
}

// IsTransientRefusal reports whether etcd refused a membership change only for now: it accepts a change
// once every member has been connected for a few seconds, and promotes a learner once it has caught up.
// Such refusals are waits, not failures.
func IsTransientRefusal(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, rpctypes.ErrUnhealthy.Error()) || strings.Contains(msg, rpctypes.ErrMemberLearnerNotReady.Error())
}

// NewDialer returns a Dialer using the official etcd client with the given per-call timeout.
func NewDialer(timeout time.Duration) Dialer { return clientDialer{timeout: timeout} }

type clientDialer struct{ timeout time.Duration }

func (d clientDialer) Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config) (Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: d.timeout,
		Context:     ctx,
		// The etcd client logs every failed dial at warn level; the controller reports failures itself.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %v: %w", endpoints, err)
	}
	return &client{c: c, timeout: d.timeout}, nil
}

type client struct {
	c       *clientv3.Client
	timeout time.Duration
}

func (c *client) MemberList(ctx context.Context) ([]Member, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out, nil
}

func (c *client) ClusterID(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.MemberList(ctx)
	if err != nil {
		return 0, fmt.Errorf("list etcd members: %w", err)
	}
	return resp.Header.GetClusterId(), nil
}

func (c *client) Status(ctx context.Context, endpoint string) (EndpointStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := unresolvable(ctx, endpoint); err != nil {
		return EndpointStatus{}, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	resp, err := c.c.Status(ctx, endpoint)
	if err != nil {
		return EndpointStatus{}, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return EndpointStatus{
		MemberID:    resp.Header.MemberId,
		Leader:      resp.Leader,
		Version:     resp.Version,
		DBSize:      resp.DbSize,
		DBSizeInUse: resp.DbSizeInUse,
		Revision:    resp.Header.Revision,
		RaftIndex:   resp.RaftIndex,
		IsLearner:   resp.IsLearner,
		Errors:      resp.Errors,
	}, nil
}

// unresolvable returns the lookup's error when the endpoint's host name has no address: a member whose pod
// is new has no DNS record until its endpoint is published, and asking it anyway waits out the whole
// timeout while gRPC retries the lookup, which would hold every look at the cluster (a learner's
// promotion, the next member's addition) for that long. Any other outcome, an IP address or a lookup that
// fails otherwise, leaves the judgement to the call itself.
func unresolvable(ctx context.Context, endpoint string) error {
	var host string
	if u, parseErr := url.Parse(endpoint); parseErr == nil {
		host = u.Hostname()
	}
	if host == "" || net.ParseIP(host) != nil {
		return nil // an unparsable endpoint fails in the call itself, with the client's own message
	}
	_, err := lookupHost(ctx, host)
	if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return err
	}
	return nil
}

// lookupHost resolves member host names (the system's resolver; tests answer for it).
var lookupHost = net.DefaultResolver.LookupHost

func (c *client) AddLearner(ctx context.Context, peerURL string) (Member, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return Member{}, fmt.Errorf("add learner %s: %w", peerURL, err)
	}
	m := resp.Member
	return Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}, nil
}

func (c *client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.c.MemberPromote(ctx, id); err != nil {
		return fmt.Errorf("promote learner %x: %w", id, err)
	}
	return nil
}

func (c *client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.c.MemberRemove(ctx, id); err != nil {
		return fmt.Errorf("remove member %x: %w", id, err)
	}
	return nil
}

func (c *client) MoveLeader(ctx context.Context, to uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.c.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leadership to %x: %w", to, err)
	}
	return nil
}

func (c *client) Close() error { return c.c.Close() }

// AlarmType is an etcd alarm: NOSPACE (the database reached its quota; writes are refused) or CORRUPT (a
// member's data differs from the others').
type AlarmType string

const (
	AlarmNoSpace AlarmType = "NOSPACE"
	AlarmCorrupt AlarmType = "CORRUPT"
)

// Alarm is one active alarm, raised by one member.
type Alarm struct {
	MemberID uint64
	Type     AlarmType
}

func (c *client) Alarms(ctx context.Context) ([]Alarm, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list alarms: %w", err)
	}
	out := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		out = append(out, Alarm{MemberID: a.MemberID, Type: AlarmType(a.Alarm.String())})
	}
	return out, nil
}

func (c *client) DisarmAlarm(ctx context.Context, a Alarm) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	t, ok := etcdserverpb.AlarmType_value[string(a.Type)]
	if !ok {
		return fmt.Errorf("disarm alarm: unknown type %q", a.Type)
	}
	if _, err := c.c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: etcdserverpb.AlarmType(t)}); err != nil {
		return fmt.Errorf("disarm %s alarm of member %x: %w", a.Type, a.MemberID, err)
	}
	return nil
}

func (c *client) Compact(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compact at revision %d: %w", rev, err)
	}
	return nil
}

// defragmentTimeout bounds one member's defragmentation: etcd rewrites the whole file, roughly a second
// per hundred MiB on ordinary disks, and the quota the operator sets is at most 8 GiB.
const defragmentTimeout = 5 * time.Minute

func (c *client) Defragment(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, defragmentTimeout)
	defer cancel()
	if _, err := c.c.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}

// ClientTLSConfig is the TLS configuration of a client authenticating with certPEM/keyPEM to members whose
// certificates caPEM signed.
func ClientTLSConfig(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate found")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// ClientTLSConfigFromFiles reads ClientTLSConfig's inputs from files (a mounted certificate Secret).
func ClientTLSConfigFromFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	var pems [3][]byte
	for i, f := range []string{caFile, certFile, keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pems[i] = b
	}
	return ClientTLSConfig(pems[0], pems[1], pems[2])
}

func (c *client) AuthEnabled(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.c.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("authentication status: %w", err)
	}
	return resp.Enabled, nil
}

func (c *client) EnableAuth(ctx context.Context, rootPassword string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// etcd refuses to enable authentication without a root user holding the root role.
	if _, err := c.c.UserAdd(ctx, "root", rootPassword); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("add the root user: %w", err)
	}
	if _, err := c.c.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("grant the root role: %w", err)
	}
	if _, err := c.c.AuthEnable(ctx); err != nil {
		return fmt.Errorf("enable authentication: %w", err)
	}
	return nil
}

func (c *client) DisableAuth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.c.AuthDisable(ctx); err != nil {
		return fmt.Errorf("disable authentication: %w", err)
	}
	return nil
}
