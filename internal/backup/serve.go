package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// A restore from a claim reads the snapshot through a snapshot server: one pod that mounts the claim (a
// ReadWriteOnce claim on node-local storage binds every pod that mounts it to one node) and serves the
// snapshot to the restoring members over the pod network, wherever they run.
const (
	// SnapshotPath is where a snapshot server serves key K: GET SnapshotPath + K.
	SnapshotPath = "/snapshots/"
	// SnapshotDigestHeader carries the served file's sha256 trailer (hex): what the download must end with.
	SnapshotDigestHeader = "X-Etcd-Snapshot-Sha256"
	// SnapshotTokenEnv holds the token a server requires and a restore presents; it comes from a Secret
	// (secretKeyRef), never from a flag, so it stays out of pod specs and process listings.
	SnapshotTokenEnv = "SNAPSHOT_SERVER_TOKEN"
)

// Errors of a download from a snapshot server. None is retried in the process: the restore step fails with
// the message, and the kubelet runs it again.
var (
	// ErrTokenRefused: the server did not accept the token (401 without one, 403 for a wrong one).
	ErrTokenRefused = errors.New("the snapshot server refused the token")
	// ErrNotServed: the server does not serve the key (404): it was started for another snapshot, or the
	// snapshot is not on its claim.
	ErrNotServed = errors.New("the snapshot server does not serve this snapshot")
	// ErrIncomplete: the download ended before the length the server announced.
	ErrIncomplete = errors.New("snapshot download incomplete")
)

// SnapshotServer serves the snapshots at Keys of a claim's DirStore, and nothing else, to requests that
// carry Token as a bearer token.
type SnapshotServer struct {
	Store *DirStore
	Keys  []string
	Token string
	Log   *zap.Logger
}

// Check finds every key on the claim with a snapshot's shape (whole sectors and a sha256 trailer), so a
// server for a snapshot that is not there fails at once with that message instead of answering 404s.
func (s *SnapshotServer) Check() error {
	if s.Token == "" {
		return errors.New("no token: " + SnapshotTokenEnv + " is empty")
	}
	if len(s.Keys) == 0 {
		return errors.New("no key to serve")
	}
	for _, key := range s.Keys {
		p, err := s.Store.path(key)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("no snapshot at %s", s.Store.Location(key))
		case err != nil:
			return err
		case !st.Mode().IsRegular() || st.Size() < sha256.Size || st.Size()%512 != sha256.Size:
			return fmt.Errorf("%w: %s has no sha256 trailer (size %d)", ErrCorrupt, s.Store.Location(key), st.Size())
		}
	}
	return nil
}

func (s *SnapshotServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lg := s.Log
	if lg == nil {
		lg = zap.NewNop()
	}
	if r.URL.Path == "/healthz" {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The token is checked before the key, so a caller without it learns nothing of what is served.
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || given == "":
		lg.Warn("request without a token refused", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path))
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		return
	case subtle.ConstantTimeCompare([]byte(given), []byte(s.Token)) != 1:
		lg.Warn("request with a wrong token refused", zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path))
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, SnapshotPath)
	if !ok || !slices.Contains(s.Keys, key) {
		http.Error(w, "not served here: this server serves only the snapshot of the restore it runs for", http.StatusNotFound)
		return
	}
	p, err := s.Store.path(key)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no snapshot at "+s.Store.Location(key), http.StatusNotFound)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	size := st.Size()
	trailer := make([]byte, sha256.Size)
	if size < sha256.Size {
		http.Error(w, fmt.Sprintf("%s is no snapshot (size %d)", s.Store.Location(key), size), http.StatusInternalServerError)
		return
	}
	if _, err := f.ReadAt(trailer, size-sha256.Size); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	w.Header().Set(SnapshotDigestHeader, hex.EncodeToString(trailer))
	if r.Method == http.MethodHead {
		return
	}
	start := time.Now()
	n, err := io.Copy(w, f)
	if err != nil {
		lg.Warn("snapshot download broken off", zap.String("key", key), zap.String("remote", r.RemoteAddr),
			zap.Int64("bytes", n), zap.Int64("size", size), zap.Error(err))
		return
	}
	lg.Info("snapshot served", zap.String("key", key), zap.String("remote", r.RemoteAddr), zap.Int64("bytes", n),
		zap.Duration("took", time.Since(start)))
}

// HTTPStore is the read-only Store of a snapshot server: a member's restore step reads a claim it does not
// mount through it. Locations are the claim's, as if it were mounted.
type HTTPStore struct {
	// URL is the server's base URL (http://host:port).
	URL   string
	Token string
	// Claim names the claim the server mounts (for locations).
	Claim string
	// Wait is how long a server that does not answer yet (its pod starting, its Service without an
	// endpoint) is retried before Get gives up; answers are never retried.
	Wait time.Duration
	// StallTimeout ends a download that received nothing for this long (default a minute).
	StallTimeout time.Duration
	Client       *http.Client
	Log          *zap.Logger
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

var errReadOnly = errors.New("a snapshot server is read-only")

func (s *HTTPStore) Put(context.Context, string, string, map[string]string) error { return errReadOnly }
func (s *HTTPStore) List(context.Context, string) ([]Object, error)               { return nil, errReadOnly }
func (s *HTTPStore) Delete(context.Context, string) error                         { return errReadOnly }
func (s *HTTPStore) Location(key string) string                                   { return "pvc://" + s.Claim + "/" + key }

// Get streams the snapshot at key into file and checks that it arrived whole: exactly the announced length,
// ending with the sha256 trailer the server read from the claim. Restore then verifies the file as it
// verifies any snapshot (the trailer against the database's sha256, bbolt's consistency check), so a byte
// changed on the way is refused too.
func (s *HTTPStore) Get(ctx context.Context, key, file string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := s.request(ctx, key)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	// A download that stops moving ends the request, rather than the restore step's whole timeout.
	idle := s.StallTimeout
	if idle <= 0 {
		idle = time.Minute
	}
	stalled := time.AfterFunc(idle, func() { cancel(fmt.Errorf("no data for %s", idle)) })
	defer stalled.Stop()
	body := readerFunc(func(p []byte) (int, error) {
		n, err := resp.Body.Read(p)
		stalled.Reset(idle)
		return n, err
	})
	want := resp.ContentLength
	digest, err := hex.DecodeString(resp.Header.Get(SnapshotDigestHeader))
	if want < 0 || err != nil || len(digest) != sha256.Size {
		return fmt.Errorf("%w: the snapshot server sent no length or no %s for %s", ErrIncomplete, SnapshotDigestHeader, key)
	}
	out, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(out, body, make([]byte, 1<<20))
	if err == nil && n != want {
		err = errors.New("length differs")
	}
	if cause := context.Cause(ctx); err != nil && cause != nil {
		err = cause
	}
	if err != nil {
		_ = out.Close()
		return fmt.Errorf("%w: %s ended after %d of %d bytes: %v", ErrIncomplete, s.Location(key), n, want, err)
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	got, err := fileTrailer(file, n)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, digest) {
		return fmt.Errorf("%w: the download of %s ends with %x where the served file ends with %x", ErrCorrupt, s.Location(key), got, digest)
	}
	return nil
}

func fileTrailer(file string, size int64) ([]byte, error) {
	if size < sha256.Size {
		return nil, fmt.Errorf("%w: %s has no sha256 trailer (size %d)", ErrCorrupt, file, size)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, sha256.Size)
	_, err = f.ReadAt(b, size-sha256.Size)
	return b, err
}

// request GETs key, retrying while the server cannot be reached or answers 5xx (for at most Wait), and
// returns a 200 response; any other answer is an error at once.
func (s *HTTPStore) request(ctx context.Context, key string) (*http.Response, error) {
	u, err := url.Parse(strings.TrimSuffix(s.URL, "/") + SnapshotPath)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("snapshot server URL %q must be an http or https URL", s.URL)
	}
	u = u.JoinPath(strings.Split(key, "/")...)
	cli := s.Client
	if cli == nil {
		cli = &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
		}}
	}
	lg := s.Log
	if lg == nil {
		lg = zap.NewNop()
	}
	deadline := time.Now().Add(s.Wait)
	backoff := time.Second
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := cli.Do(req)
		var problem string
		switch {
		case err != nil:
			problem = err.Error()
		case resp.StatusCode == http.StatusOK:
			return resp, nil
		case resp.StatusCode >= 500:
			problem = answer(resp)
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return nil, fmt.Errorf("%w for %s (%s): the token in %s is not the server's", ErrTokenRefused, s.Location(key), answer(resp), SnapshotTokenEnv)
		case resp.StatusCode == http.StatusNotFound:
			return nil, fmt.Errorf("%w: %s (%s)", ErrNotServed, s.Location(key), answer(resp))
		default:
			return nil, fmt.Errorf("the snapshot server answered %s for %s", answer(resp), s.Location(key))
		}
		if ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("the snapshot server %s did not serve %s within %s: %s", s.URL, s.Location(key), s.Wait, problem)
		}
		lg.Info("the snapshot server does not answer yet; retrying", zap.String("server", s.URL), zap.String("problem", problem),
			zap.Duration("in", backoff))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// answer is a refused response's status and the first line of its body, and closes it.
func answer(resp *http.Response) string {
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if line == "" {
		return resp.Status
	}
	return resp.Status + ": " + line
}
