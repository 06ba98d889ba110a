package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/internal/resources"
)

// appliedEvents lists the Applied events regarding cluster c.
func appliedEvents(ctx context.Context, c *etcdv1beta1.EtcdCluster) ([]eventsv1.Event, error) {
	return eventsWithReason(ctx, c, ReasonApplied)
}

// eventsWithReason lists the events of the given reason regarding cluster c.
func eventsWithReason(ctx context.Context, c *etcdv1beta1.EtcdCluster, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := k8sClient.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == c.UID && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

var _ = Describe("EtcdCluster controller events", func() {
	// Six Applied events of one reconcile would form an event series, which client-go's broadcaster
	// closes with a PATCH 6 minutes later: a write long after the cluster settled.
	It("records one Applied event per reconcile, naming every object it changed", func() {
		ctx := context.Background()
		c := newCluster(watchedNS)
		createAndSettle(ctx, c)
		want := []string{
			"ConfigMap " + resources.ConfigMapName(c),
			"Service " + resources.PeerServiceName(c),
			"Service " + *resources.ClientService(c).Name,
			"StatefulSet " + resources.StatefulSetName(c),
			"PodDisruptionBudget " + resources.PDBName(c),
			"CronJob " + resources.BackupCronJobName(c),
		}
		Eventually(func(g Gomega) {
			events, err := appliedEvents(ctx, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events).To(HaveLen(1))
			for _, w := range want {
				g.Expect(events[0].Note).To(ContainSubstring(w))
			}
		}, timeout, interval).Should(Succeed())
		Consistently(func(g Gomega) {
			events, err := appliedEvents(ctx, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events).To(HaveLen(1))
			g.Expect(events[0].Series).To(BeNil(), "no event series")
		}, 2*time.Second, interval).Should(Succeed())
	})
})
