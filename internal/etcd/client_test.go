package etcd

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seedops/etcd-operator/internal/etcdtest"
)

// A member whose host name has no address yet (a new pod before its DNS record exists) fails its status
// call with the lookup's answer, at once: it must not hold the look at the cluster for the call's timeout.
func TestStatusOfUnresolvableMemberFailsWithTheLookup(t *testing.T) {
	c := etcdtest.StartStatic(t, "resolve", 1, nil)
	port := c.ClientURL(0)[strings.LastIndex(c.ClientURL(0), ":")+1:]
	looked := map[string]int{}
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		looked[host]++
		if host == "localhost" {
			return []string{"127.0.0.1"}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	t.Cleanup(func() { lookupHost = net.DefaultResolver.LookupHost })

	// A long timeout: a status call that reached gRPC for the unresolvable name would wait all of it and
	// fail with a deadline, not with the lookup's error.
	cli, err := NewDialer(time.Minute).Dial(context.Background(), []string{c.ClientURL(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()

	_, err = cli.Status(context.Background(), "http://member-3.members.ns.svc:"+port)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("status of an unresolvable member: got %v, want the lookup's not-found error", err)
	}

	// A name that resolves, and an IP address (never looked up), are asked as before.
	for _, ep := range []string{"http://localhost:" + port, c.ClientURL(0)} {
		st, err := cli.Status(context.Background(), ep)
		if err != nil || st.MemberID == 0 {
			t.Fatalf("status of %s: %+v, %v", ep, st, err)
		}
	}
	if looked["localhost"] != 1 || looked["127.0.0.1"] != 0 || looked["member-3.members.ns.svc"] != 1 {
		t.Fatalf("lookups: %v", looked)
	}
}
