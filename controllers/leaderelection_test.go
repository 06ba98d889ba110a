package controllers

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
)

var _ = Describe("Leader election under the pod's name", func() {
	// elect runs one operator process's elector for the pod podName; leading is closed once it leads.
	// The lease is long (an hour), so whoever leads before it expires did not wait for it to.
	elect := func(podName string) (leading chan struct{}, crash context.CancelFunc) {
		lock, err := LeaderLock(testEnv.Config, watchedNS, podName)
		Expect(err).NotTo(HaveOccurred())
		leading = make(chan struct{})
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: time.Hour, RenewDeadline: leaderRenewDeadline, RetryPeriod: 100 * time.Millisecond,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(leading) }, OnStoppedLeading: func() {}},
		})
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); elector.Run(ctx) }()
		// A crash: the process ends without releasing the lease (ReleaseOnCancel is off here).
		crash = func() { cancel(); <-done }
		DeferCleanup(crash)
		return leading, crash
	}

	It("lets a container restarted in the same pod take the lease back at once, and no other pod", func() {
		first, crash := elect("etcd-operator-controller-manager-a")
		Eventually(first).Should(BeClosed())
		crash()

		lease := &coordinationv1.Lease{}
		Expect(k8sClient.Get(context.Background(), key(watchedNS, LeaderElectionID), lease)).To(Succeed())
		Expect(*lease.Spec.HolderIdentity).To(Equal("etcd-operator-controller-manager-a"))

		By("another pod waits for the hour-long lease")
		other, _ := elect("etcd-operator-controller-manager-b")
		Consistently(other, 2*time.Second, 100*time.Millisecond).ShouldNot(BeClosed())

		By("the restarted container of the same pod leads before the lease expires")
		restarted, _ := elect("etcd-operator-controller-manager-a")
		Eventually(restarted).Should(BeClosed())
		Consistently(other, time.Second, 100*time.Millisecond).ShouldNot(BeClosed())
	})

	It("leaves the lock to controller-runtime outside a pod, and refuses a pod name without a namespace", func() {
		lock, err := LeaderLock(testEnv.Config, watchedNS, "")
		Expect(err).NotTo(HaveOccurred())
		Expect(lock).To(BeNil())
		_, err = LeaderLock(testEnv.Config, "", "etcd-operator-controller-manager-a")
		Expect(err).To(MatchError(ContainSubstring("namespace")))
	})
})
