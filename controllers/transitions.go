package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// conditionMemory remembers, per cluster, the condition state ("Status/Reason" by type) last reported in
// an event. A reconcile that read its cluster from a cache not yet showing the previous reconcile's status
// patch would otherwise report the same transitions again; repeated events of one object, reason and
// action form an event series, which client-go's broadcaster closes with a PATCH 6-12 minutes later:
// writes long after the cluster settled. The reconciler holds one (created in SetupWithManager).
func newConditionMemory() *conditionMemory {
	return &conditionMemory{byCluster: map[types.UID]map[string]string{}}
}

// maxRememberedClusters bounds the memory (deleted clusters are never looked up again): past it, it starts
// over, which at worst repeats one transition event per cluster.
const maxRememberedClusters = 20000

type conditionMemory struct {
	mu        sync.Mutex
	byCluster map[types.UID]map[string]string
}

// firstReport records state for the cluster's condition type and reports whether it differs from the
// state last reported.
func (m *conditionMemory) firstReport(uid types.UID, condType, state string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	conds := m.byCluster[uid]
	if conds == nil {
		if len(m.byCluster) >= maxRememberedClusters {
			clear(m.byCluster)
		}
		conds = map[string]string{}
		m.byCluster[uid] = conds
	}
	if conds[condType] == state {
		return false
	}
	conds[condType] = state
	return true
}
