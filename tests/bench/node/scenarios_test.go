//go:build bench

package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// TestAvailable: time to Available for 1, 3 and 5 members, each next to the bare StatefulSet of the same
// size in the same run (alternating which goes first, so drift in the node's load hits both).
func TestAvailable(t *testing.T) {
	lastBare := map[int32]float64{} // the baseline a slow run is judged by, when the operator goes first
	for run := range runs {
		for _, n := range []int32{1, 3, 5} {
			var bare, op float64
			measureBare := func() {
				ns, done := newNamespace(t, "bare")
				defer done()
				start := time.Now()
				applyBare(t, ns, "bare", n)
				waitPodsReady(t, ns, "bare", int(n), nil, 5*time.Minute)
				bare = secs(time.Since(start))
				lastBare[n] = bare
			}
			measureOp := func() {
				ns, done := newNamespace(t, "op")
				defer done()
				c := cluster(ns, "op", etcdVersion, n)
				start := time.Now()
				if err := k8s.Create(context.Background(), c); err != nil {
					t.Fatal(err)
				}
				scenario := fmt.Sprintf("available-%d", n)
				stopWatch := watchForSlowness(t, scenario, ns, lastBare[n], start)
				defer stopWatch()
				waitAvailable(t, c, "", 5*time.Minute)
				op = secs(time.Since(start))
				stopWatch()
				keepEvidenceIfSlow(t, scenario, ns, op, lastBare[n], start)
			}
			if run%2 == 0 {
				measureBare()
				measureOp()
			} else {
				measureOp()
				measureBare()
			}
			sample := map[string]float64{"members": float64(n), "operator": op, "bare": bare, "ratio": op / bare}
			if n == 3 {
				// The same size without TLS: what TLS itself costs (four certificates, a TLS handshake in
				// every probe and status call).
				sample["operatorNoTLS"] = availableWithoutTLS(t, n)
			}
			record(t, "available", sample)
		}
	}
}

// withoutTLS turns TLS off in a cluster's spec.
func withoutTLS(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS.Enabled = ptr.To(false) }

// availableWithoutTLS is the time to Available of an n-member cluster with TLS off.
func availableWithoutTLS(t *testing.T, n int32) float64 {
	ns, done := newNamespace(t, "notls")
	defer done()
	c := cluster(ns, "op", etcdVersion, n)
	withoutTLS(c)
	start := time.Now()
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c, "", 5*time.Minute)
	return secs(time.Since(start))
}

// TestScale: 3→5 and 5→3, time per member step, next to one member's start (bare 1-member StatefulSet,
// new volume) in the same run; 3→5 of a cluster without TLS, and on etcd 3.6, where the two new members
// join side by side.
func TestScale(t *testing.T) {
	for range runs {
		pod := barePodStart(t)
		c, done := startCluster(t, "scale", etcdVersion, nil)
		up := scaleTo(t, c, 5)
		down := scaleTo(t, c, 3)
		done()
		plain, done := startCluster(t, "notls", etcdVersion, withoutTLS)
		upNoTLS := scaleTo(t, plain, 5)
		done()
		next, done := startCluster(t, "next", nextVersion, nil)
		upNext := scaleTo(t, next, 5)
		done()
		record(t, "scale", map[string]float64{"podStart": pod, "up": up, "upStep": up / 2, "down": down, "downStep": down / 2,
			"upRatio": up / 2 / pod, "downRatio": down / 2 / pod, "upNoTLS": upNoTLS, "upNext": upNext, "upNextRatio": upNext / pod})
	}
}

func scaleTo(t *testing.T, c *etcdv1beta1.EtcdCluster, n int32) float64 {
	start := time.Now()
	patchSpec(t, c, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	waitAvailable(t, c, "", 10*time.Minute)
	return secs(time.Since(start))
}

func patchSpec(t *testing.T, c *etcdv1beta1.EtcdCluster, patch string) {
	t.Helper()
	if err := k8s.Patch(context.Background(), c, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestHeal: a member's pod deleted; a member's pod and volume claim deleted. Time until Available again
// with every member ready and the lost one replaced; next to a bare member pod's restart and, for the
// lost volume (a new member on a new volume), one member's start (bare 1-member StatefulSet, new volume)
// and a bare 1-member StatefulSet's pod and claim replaced (its old pod goes first).
func TestHeal(t *testing.T) {
	for range runs {
		restart := bareMemberRestart(t)
		pod := barePodStart(t)
		replaced := bareVolumeLoss(t)

		c, done := startCluster(t, "heal", etcdVersion, nil)
		podLost := loseMember(t, c, false)
		volumeLost := loseMember(t, c, true)
		done()
		record(t, "heal", map[string]float64{"barePodRestart": restart, "podStart": pod, "podDeleted": podLost, "podAndPVCDeleted": volumeLost,
			"podAndPVCDeletedRatio": volumeLost / pod, "bareVolumeLoss": replaced, "podAndPVCDeletedBareRatio": volumeLost / replaced})
	}
}

// loseMember deletes member 1's pod (and, with volume, its claim first, waiting until the claim is gone),
// and times until the cluster is Available with a new member-1 pod.
func loseMember(t *testing.T, c *etcdv1beta1.EtcdCluster, volume bool) float64 {
	ctx := context.Background()
	victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name + "-1"}}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if volume {
		if err := framework.DeletePodsAndClaims(ctx, k8s, c.Namespace, []string{victim.Name}, 100*time.Millisecond, 2*time.Minute, t.Logf); err != nil {
			t.Fatal(err)
		}
	} else if err := k8s.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	exclude := map[types.UID]bool{victim.UID: true}
	waitPodsReady(t, c.Namespace, c.Name, 3, exclude, 10*time.Minute)
	waitAvailable(t, c, "", 10*time.Minute)
	return secs(time.Since(start))
}

// TestQuorumLoss: two of three members lose their pods and claims at once, with each recovery strategy
// after its shortest window (30 s): FromSurvivor, and FromBackup from an EtcdBackup taken just before. Time
// until Available again (FromBackup: with the recovery reported done), and until then minus the window
// (what the recovery itself takes), next to a bare member pod's restart in the same run.
func TestQuorumLoss(t *testing.T) {
	const after = 30 * time.Second
	for range runs {
		restart := bareMemberRestart(t)
		for _, strategy := range []etcdv1beta1.QuorumLossRecovery{etcdv1beta1.QuorumLossFromSurvivor, etcdv1beta1.QuorumLossFromBackup} {
			took := loseMajority(t, strategy, after)
			fromBackup := 0.0
			if strategy == etcdv1beta1.QuorumLossFromBackup {
				fromBackup = 1
			}
			record(t, "quorumloss", map[string]float64{"barePodRestart": restart, "available": took, "afterWindow": took - after.Seconds(),
				"fromBackup": fromBackup})
		}
	}
}

// loseMajority deletes members 1 and 2 of a new 3-member cluster recovering by strategy, with their claims,
// and returns the seconds until it is Available again with the recovery done.
func loseMajority(t *testing.T, strategy etcdv1beta1.QuorumLossRecovery, after time.Duration) float64 {
	c, done := startCluster(t, "quorum", etcdVersion, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = etcdv1beta1.RecoverySpec{QuorumLoss: strategy, After: &metav1.Duration{Duration: after}}
	})
	defer done()
	ns, ctx := c.Namespace, context.Background()
	if strategy == etcdv1beta1.QuorumLossFromBackup {
		takeBackup(t, c)
	}
	start := time.Now()
	exclude := map[types.UID]bool{}
	var victims []string
	for _, i := range []int{1, 2} {
		victim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", c.Name, i)}}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
			t.Fatal(err)
		}
		exclude[victim.UID] = true
		victims = append(victims, victim.Name)
	}
	// Both members lose their data for sure: a pod recreated on its claim while the claim was being
	// deleted would bring its member back with the majority, and nothing would be recovered.
	if err := framework.DeletePodsAndClaims(ctx, k8s, ns, victims, 100*time.Millisecond, 2*time.Minute, t.Logf); err != nil {
		t.Fatal(err)
	}
	if strategy == etcdv1beta1.QuorumLossFromBackup {
		// Every member restarts onto the backup; Available counts once the recovery is reported done.
		cur := &etcdv1beta1.EtcdCluster{}
		err := waitFor(ctx, &etcdv1beta1.EtcdClusterList{}, []client.ListOption{client.InNamespace(ns)}, 10*time.Minute, func() (bool, error) {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(c), cur)
			return err == nil && cur.Status.LastRecovery != nil, err
		})
		if err != nil {
			t.Fatalf("recovery from the backup: %v", err)
		}
	} else {
		waitPodsReady(t, ns, c.Name, 3, exclude, 10*time.Minute)
	}
	waitAvailable(t, c, "", 10*time.Minute)
	return secs(time.Since(start))
}

// takeBackup takes an on-demand backup of c and waits until it succeeded.
func takeBackup(t *testing.T, c *etcdv1beta1.EtcdCluster) {
	ctx := context.Background()
	b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "before-loss"},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: c.Name}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	err := waitFor(ctx, &etcdv1beta1.EtcdBackupList{}, []client.ListOption{client.InNamespace(c.Namespace)}, 5*time.Minute, func() (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err
		}
		if b.Status.Phase == etcdv1beta1.BackupFailed {
			return false, fmt.Errorf("backup failed: %s", b.Status.Error)
		}
		return b.Status.Phase == etcdv1beta1.BackupSucceeded, nil
	})
	if err != nil {
		t.Fatalf("backup before the loss: %v", err)
	}
}

// TestUpgrade: a rolling version change of 3 members, time per member, next to a bare member pod's
// restart in the same run.
func TestUpgrade(t *testing.T) {
	for range runs {
		restart := bareMemberRestart(t)

		c, done := startCluster(t, "upgrade", upgradeFrom, nil)
		start := time.Now()
		patchSpec(t, c, fmt.Sprintf(`{"spec":{"version":%q}}`, etcdVersion))
		waitAvailable(t, c, etcdRepo+":v"+etcdVersion, 15*time.Minute)
		total := secs(time.Since(start))
		done()
		record(t, "upgrade", map[string]float64{"barePodRestart": restart, "total": total, "perMember": total / 3, "ratio": total / 3 / restart})
	}
}
