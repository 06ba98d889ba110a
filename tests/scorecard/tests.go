package scorecard

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
)

// Names of the tests: the first argument of the test image's entrypoint (config/scorecard).
const (
	ALMExampleAvailableTest = "alm-example-available"
	ScaleUpDownTest         = "scale-up-down"
)

// Timeouts bound each wait of a test. Their sum for one test stays below the scorecard's --wait-time, so
// that a slow cluster ends as a failure with reasons rather than as a scorecard timeout.
type Timeouts struct {
	// Available: from creation to Available with every replica ready.
	Available time.Duration
	// Scale: from a change of spec.replicas until the new membership is settled.
	Scale time.Duration
	// Delete: deleting a cluster and waiting until it and its pods are gone.
	Delete time.Duration
}

// DefaultTimeouts leave room for image pulls and volume provisioning on a small node.
var DefaultTimeouts = Timeouts{Available: 5 * time.Minute, Scale: 5 * time.Minute, Delete: 3 * time.Minute}

// A Test creates what it needs through env (which records it for the cleanup) and reports into env.Result.
type Test func(ctx context.Context, env *Env, examples []etcdv1alpha1.EtcdCluster, t Timeouts)

// Tests are the tests the image runs, by name.
var Tests = map[string]Test{
	ALMExampleAvailableTest: ALMExampleAvailable,
	ScaleUpDownTest:         ScaleUpDown,
}

// TestNames lists the tests, sorted.
func TestNames() []string {
	names := make([]string, 0, len(Tests))
	for n := range Tests {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ALMExampleAvailable creates every EtcdCluster of the CSV's alm-examples as it is (only the name is made
// unique and the namespace is the scorecard's) and waits until each is Available with all replicas ready.
// The clusters come up side by side, as a user applying the examples would see them.
func ALMExampleAvailable(ctx context.Context, env *Env, examples []etcdv1alpha1.EtcdCluster, t Timeouts) {
	var wg sync.WaitGroup
	for _, ex := range examples {
		c := ForTest(ex, env.Namespace, ALMExampleAvailableTest)
		if err := env.Create(ctx, c); err != nil {
			env.Result.Errorf("alm-example %s: %v", ex.Name, err)
			continue
		}
		wg.Go(func() { env.WaitFor(ctx, c, "Available with every replica ready", Available, t.Available) })
	}
	wg.Wait()
	if !env.Result.Failed() {
		names := make([]string, 0, len(examples))
		for _, ex := range examples {
			names = append(names, ex.Name)
		}
		env.Result.Logf("every alm-example EtcdCluster became Available: %s", strings.Join(names, ", "))
	}
}

// ScaleUpDown runs the first alm-example as a 3-member cluster, scales it to 5 (new members join as
// learners and must all end up healthy voters) and back to 3 (the removed members must leave etcd's
// member list, not only lose their pods).
func ScaleUpDown(ctx context.Context, env *Env, examples []etcdv1alpha1.EtcdCluster, t Timeouts) {
	ex := examples[0]
	ex.Name += "-scale"
	c := ForTest(ex, env.Namespace, ScaleUpDownTest)
	c.Spec.Replicas = 3
	if err := env.Create(ctx, c); err != nil {
		env.Result.Errorf("%v", err)
		return
	}
	if !env.WaitFor(ctx, c, "3 healthy voting members", VotingMembers(3), t.Available) {
		return
	}
	for _, n := range []int32{5, 3} {
		if err := env.Scale(ctx, c, n); err != nil {
			env.Result.Errorf("%v", err)
			return
		}
		if !env.WaitFor(ctx, c, fmt.Sprintf("%d healthy voting members", n), VotingMembers(n), t.Scale) {
			return
		}
	}
}

// Run runs the named test with its cleanup and returns its result. The cleanup runs even when ctx is
// cancelled (the scorecard deleting the pod), with cleanupCtx.
func Run(ctx, cleanupCtx context.Context, env *Env, name string, examples []etcdv1alpha1.EtcdCluster, t Timeouts) {
	test, ok := Tests[name]
	if !ok {
		env.Result.Errorf("unknown test %q; this image runs: %s", name, strings.Join(TestNames(), ", "))
		env.Result.Finish()
		return
	}
	defer func() {
		if p := recover(); p != nil {
			env.Result.Errorf("the test panicked: %v", p)
		}
		env.Cleanup(cleanupCtx, t.Delete)
		// Cut short by a signal: the checks did not all run, whatever they found so far.
		if ctx.Err() == nil {
			env.Result.Finish()
		}
	}()
	test(ctx, env, slices.Clone(examples), t)
}
