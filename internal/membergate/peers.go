package membergate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Member is one entry of the member list a peer serves at GET /members: etcd's membership.Member,
// whose raft and attribute fields are embedded and so flattened in JSON. The ID is a JSON number.
type Member struct {
	ID         uint64   `json:"id"`
	Name       string   `json:"name,omitempty"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

// Started reports whether the member's process has ever run: etcd publishes its client URLs (with its
// name) once it has joined. The name alone says nothing: a member of the initial cluster is listed under
// its name from the start, before its process ever ran (a bootstrap member whose pod starts late, after
// the others formed the cluster); a member just added (MemberAdd, MemberAddAsLearner) has neither.
func (m Member) Started() bool { return len(m.ClientURLs) > 0 }

// MemberList is one peer's view of the cluster.
type MemberList struct {
	// From is the peer URL that answered.
	From string
	// ClusterID is the X-Etcd-Cluster-ID header; 0 if the peer sent none.
	ClusterID uint64
	Members   []Member
}

// clusterIDHeader is the header etcd's peer handlers set to the cluster ID, in hex.
const clusterIDHeader = "X-Etcd-Cluster-ID"

// membersPath is the peer handler that serves the member list. It is what etcd itself reads when it
// joins with an initial cluster state of existing, so every member version the operator runs has it.
const membersPath = "/members"

// fetchMembers asks one peer for its member list.
func fetchMembers(ctx context.Context, hc *http.Client, peerURL string) (MemberList, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+membersPath, nil)
	if err != nil {
		return MemberList{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return MemberList{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return MemberList{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return MemberList{}, fmt.Errorf("GET %s: %s", membersPath, resp.Status)
	}
	list := MemberList{From: peerURL}
	if err := json.Unmarshal(body, &list.Members); err != nil {
		return MemberList{}, fmt.Errorf("GET %s: %w", membersPath, err)
	}
	if h := resp.Header.Get(clusterIDHeader); h != "" {
		if id, err := strconv.ParseUint(h, 16, 64); err == nil {
			list.ClusterID = id
		}
	}
	return list, nil
}

// askPeers asks the peers in turn and returns the first answer. An error means no peer answered; it
// carries every peer's failure, for the log.
func askPeers(ctx context.Context, hc *http.Client, peers []string, timeout time.Duration) (MemberList, error) {
	var errs []error
	for _, p := range peers {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		list, err := fetchMembers(rctx, hc, p)
		cancel()
		if err == nil {
			return list, nil
		}
		if ctx.Err() != nil {
			return MemberList{}, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", p, err))
	}
	if len(errs) == 0 {
		return MemberList{}, errors.New("no peers to ask")
	}
	return MemberList{}, errors.Join(errs...)
}

// httpClient talks to peers directly: never through a proxy from the environment, and without kept-alive
// connections, since the gate asks rarely and then hands the pod to etcd.
func httpClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   tlsConfig,
		DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}}
}

// PeerTLSConfig is the client side of etcd's peer TLS: the member's own peer certificate (peers require
// one) and the peer CA, which verifies the peer's certificate. The key pair is read again at every
// handshake, so a gate that waits across a certificate rotation presents the current one; it is read
// once here too, so a missing or broken file fails the gate at once instead of looking like silent peers.
func PeerTLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("peer CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peer CA %s: no certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("peer certificate: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("peer certificate: %w", err)
			}
			return &cert, nil
		}
	}
	return cfg, nil
}

// sameURL compares peer URLs as etcd does in effect: scheme and host are case-insensitive, and a trailing
// slash changes nothing.
func sameURL(a, b string) bool {
	ua, errA := url.Parse(strings.TrimSuffix(a, "/"))
	ub, errB := url.Parse(strings.TrimSuffix(b, "/"))
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) && ua.Path == ub.Path
}

// anyURL reports whether some URL of as equals some URL of bs.
func anyURL(as, bs []string) bool {
	for _, a := range as {
		for _, b := range bs {
			if sameURL(a, b) {
				return true
			}
		}
	}
	return false
}
