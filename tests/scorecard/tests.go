package scorecard

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/etcd"
)

// Names of the tests: the first argument of the test image's entrypoint (config/scorecard).
const (
	ALMExampleAvailableTest = "alm-example-available"
	ScaleUpDownTest         = "scale-up-down"
	BackupTakenTest         = "backup-taken"
)

// Timeouts bound each wait of a test. Their sum for one test stays below the scorecard's --wait-time, so
// that a slow cluster ends as a failure with reasons rather than as a scorecard timeout.
type Timeouts struct {
	// Available: from creation to Available with every replica ready.
	Available time.Duration
	// Scale: from a change of spec.replicas until the new membership is settled.
	Scale time.Duration
	// Backup: from creating an EtcdBackup until it Succeeded.
	Backup time.Duration
	// Delete: deleting what a test created and waiting until it and its pods are gone.
	Delete time.Duration
}

// DefaultTimeouts leave room for image pulls and volume provisioning on a small node.
var DefaultTimeouts = Timeouts{Available: 5 * time.Minute, Scale: 5 * time.Minute, Backup: 3 * time.Minute, Delete: 3 * time.Minute}

// A Test creates what it needs through env (which records it for the cleanup) and reports into env.Result.
type Test func(ctx context.Context, env *Env, examples Examples, t Timeouts)

// Tests are the tests the image runs, by name.
var Tests = map[string]Test{
	ALMExampleAvailableTest: ALMExampleAvailable,
	ScaleUpDownTest:         ScaleUpDown,
	BackupTakenTest:         BackupTaken,
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

// ALMExampleAvailable creates every alm-example as written (only names are made unique, references between
// examples follow, and the namespace is the scorecard's), as a user applying them all would: the clusters
// that start empty, the backups of those clusters, the clusters restoring those backups. It waits until
// every cluster is Available with all replicas ready and every backup Succeeded.
func ALMExampleAvailable(ctx context.Context, env *Env, x Examples, t Timeouts) {
	var wg sync.WaitGroup
	clusters := map[string]string{} // example name -> created name
	backups := map[string]string{}
	waitAvailable := func(c *etcdv1beta1.EtcdCluster, timeout time.Duration) {
		wg.Go(func() { env.WaitFor(ctx, c, "Available with every replica ready", Available, timeout) })
	}
	for _, ex := range x.Clusters {
		if ex.Spec.Bootstrap != nil {
			continue
		}
		c := ForTest(ex, env.Namespace, ALMExampleAvailableTest)
		if err := env.Create(ctx, c); err != nil {
			env.Result.Errorf("alm-example EtcdCluster %s: %v", ex.Name, err)
			continue
		}
		clusters[ex.Name] = c.Name
		waitAvailable(c, t.Available)
	}
	for _, ex := range x.Backups {
		target, ok := clusters[ex.Spec.ClusterName]
		if !ok {
			env.Result.Errorf("alm-example EtcdBackup %s backs up EtcdCluster %s, which is not an alm-example that starts empty",
				ex.Name, ex.Spec.ClusterName)
			continue
		}
		b := BackupForTest(ex, env.Namespace, ALMExampleAvailableTest, target)
		if err := env.Create(ctx, b); err != nil {
			env.Result.Errorf("alm-example EtcdBackup %s: %v", ex.Name, err)
			continue
		}
		backups[ex.Name] = b.Name
		// The backup runs once its cluster is up: it may wait for that too.
		wg.Go(func() { env.WaitForBackup(ctx, b, t.Available+t.Backup) })
	}
	for _, ex := range x.Clusters {
		if ex.Spec.Bootstrap == nil {
			continue
		}
		c := ForTest(ex, env.Namespace, ALMExampleAvailableTest)
		if from := RestoresFrom(&ex); from != "" {
			name, ok := backups[from]
			if !ok {
				env.Result.Errorf("alm-example EtcdCluster %s restores EtcdBackup %s, which is not an alm-example", ex.Name, from)
				continue
			}
			c.Spec.Bootstrap.FromBackup.BackupName = name
		}
		if err := env.Create(ctx, c); err != nil {
			env.Result.Errorf("alm-example EtcdCluster %s: %v", ex.Name, err)
			continue
		}
		// It starts once its backup exists: the backup's whole wait, then its own.
		waitAvailable(c, 2*t.Available+t.Backup)
	}
	wg.Wait()
	if !env.Result.Failed() {
		env.Result.Logf("every alm-example is up: %d EtcdClusters Available, %d EtcdBackups Succeeded",
			len(x.Clusters), len(x.Backups))
	}
}

// ScaleUpDown runs the first alm-example cluster that starts empty with 3 members, scales it to 5 (new
// members join as learners and must all end up healthy voters) and back to 3 (the removed members must
// leave etcd's member list, not only lose their pods).
func ScaleUpDown(ctx context.Context, env *Env, x Examples, t Timeouts) {
	ex, ok := x.Plain()
	if !ok {
		env.Result.Errorf("no alm-example EtcdCluster starts empty: nothing to scale")
		return
	}
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

// BackupTaken runs the cluster of the first alm-example EtcdBackup (else the first cluster that starts
// empty), writes a key through its client Service, backs it up with that EtcdBackup (else a plain one)
// and checks that the backup Succeeded with a location, a size, the cluster's etcd version and a revision
// that includes the write.
func BackupTaken(ctx context.Context, env *Env, x Examples, t Timeouts) {
	ex, ok := x.Plain()
	backup := etcdv1beta1.EtcdBackup{}
	backup.Name = "backup"
	if len(x.Backups) > 0 {
		backup = x.Backups[0]
		if i := slices.IndexFunc(x.Clusters, func(c etcdv1beta1.EtcdCluster) bool { return c.Name == backup.Spec.ClusterName }); i >= 0 &&
			x.Clusters[i].Spec.Bootstrap == nil {
			ex, ok = x.Clusters[i], true
		}
	}
	if !ok {
		env.Result.Errorf("no alm-example EtcdCluster starts empty: nothing to back up")
		return
	}
	c := ForTest(ex, env.Namespace, BackupTakenTest)
	if err := env.Create(ctx, c); err != nil {
		env.Result.Errorf("%v", err)
		return
	}
	if !env.WaitFor(ctx, c, "Available with every replica ready", Available, t.Available) {
		return
	}
	cur := &etcdv1beta1.EtcdCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		env.Result.Errorf("reading %s: %v", c.Name, err)
		return
	}
	var tlsConfig *tls.Config
	if cur.Status.TLS != nil && cur.Status.TLS.Enabled {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cur.Namespace, Name: cur.Status.TLS.ClientSecretName}, secret); err != nil {
			env.Result.Errorf("%s: reading the client certificate Secret %s: %v", c.Name, cur.Status.TLS.ClientSecretName, err)
			return
		}
		var err error
		if tlsConfig, err = etcd.ClientTLSConfig(secret.Data["ca.crt"], secret.Data["tls.crt"], secret.Data["tls.key"]); err != nil {
			env.Result.Errorf("%s: client certificate Secret %s: %v", c.Name, secret.Name, err)
			return
		}
	}
	key := "scorecard/" + BackupTakenTest + "/" + c.Name
	rev, err := PutKey(ctx, cur.Status.ClientEndpoint, tlsConfig, key, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		env.Result.Errorf("%s: writing %s through %s: %v", c.Name, key, cur.Status.ClientEndpoint, err)
		return
	}
	env.Result.Logf("%s: wrote %s through %s at revision %d", c.Name, key, cur.Status.ClientEndpoint, rev)

	b := BackupForTest(backup, env.Namespace, BackupTakenTest, c.Name)
	if err := env.Create(ctx, b); err != nil {
		env.Result.Errorf("%v", err)
		return
	}
	got, ok := env.WaitForBackup(ctx, b, t.Backup)
	if !ok {
		return
	}
	env.Result.Logf("%s: %s, %d bytes, revision %d, etcd %s, sha256 %s", b.Name, got.Status.Location,
		got.Status.SizeBytes, got.Status.Revision, got.Status.EtcdVersion, got.Status.SHA256)
	if got.Status.Revision < rev {
		env.Result.Errorf("%s: snapshot at revision %d, before the write at revision %d", b.Name, got.Status.Revision, rev)
	}
	if got.Status.EtcdVersion != "" && got.Status.EtcdVersion != cur.Spec.Version {
		env.Result.Errorf("%s: snapshot of etcd %s, the cluster runs %s", b.Name, got.Status.EtcdVersion, cur.Spec.Version)
	}
}

// Run runs the named test with its cleanup and returns its result. The cleanup runs even when ctx is
// cancelled (the scorecard deleting the pod), with cleanupCtx.
func Run(ctx, cleanupCtx context.Context, env *Env, name string, examples Examples, t Timeouts) {
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
	test(ctx, env, examples, t)
}
