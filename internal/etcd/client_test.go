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

// A member cut off from the majority answers its status call and says it knows no leader: the words
// AwaitsLeader matches are the ones a real etcd server sends. The healthy cluster's answers say nothing.
func TestStatusOfAMemberWithoutLeaderAwaitsLeader(t *testing.T) {
	c := etcdtest.StartStatic(t, "noleader", 3, nil)
	cli, err := NewDialer(5*time.Second).Dial(context.Background(), []string{c.ClientURL(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	st, err := cli.Status(context.Background(), c.ClientURL(0))
	if err != nil || st.Leader == 0 || AwaitsLeader(st.Errors) {
		t.Fatalf("status of a healthy member: %+v, %v; want a leader and no errors", st, err)
	}

	c.Stop(1)
	c.Stop(2)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = cli.Status(context.Background(), c.ClientURL(0))
		if err == nil && AwaitsLeader(st.Errors) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivor's status never said it awaits a leader: %+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Leader != 0 {
		t.Fatalf("the survivor reports no leader in its errors but leader %x", st.Leader)
	}
}

func TestAwaitsLeader(t *testing.T) {
	for _, tc := range []struct {
		errs []string
		want bool
	}{
		{nil, false},
		{[]string{"etcdserver: no leader"}, true},
		{[]string{"etcdserver: no leader", "etcdserver: no leader"}, true},
		// A corrupt member is unhealthy whatever else it says.
		{[]string{"etcdserver: no leader", "memberID:8e9e05c52164694d alarm:CORRUPT "}, false},
		{[]string{"memberID:8e9e05c52164694d alarm:NOSPACE "}, false},
	} {
		if got := AwaitsLeader(tc.errs); got != tc.want {
			t.Errorf("AwaitsLeader(%q) = %v, want %v", tc.errs, got, tc.want)
		}
	}
}
