package continuous

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seedops/etcd-operator/internal/backup"
)

// DefaultOrphanGrace is how old an unfinished chain's objects must be before retention removes them.
const DefaultOrphanGrace = time.Hour

// RetentionPolicy says how much history to keep. Whole chains are removed, oldest first; the newest chain
// (and the one restoring the newest revision, when that is another) is always kept.
type RetentionPolicy struct {
	// MaxAge keeps every point of the last MaxAge restorable: a chain goes once the newest time it
	// restores is older than that (0: no age limit).
	MaxAge time.Duration
	// MaxBytes bounds the total size of the chains (0: no bound).
	MaxBytes int64
	// OrphanGrace is how old the objects of a chain without a manifest must be to be removed
	// (DefaultOrphanGrace). Such objects newer than the newest chain are kept regardless: the capturer
	// may still be storing a large snapshot.
	OrphanGrace time.Duration
}

// Deletion is a chain (or an unfinished chain's leftovers) retention removes.
type Deletion struct {
	ChainID string
	Reason  string
	// Keys in the order they are deleted: the manifest first, so that an interrupted deletion leaves
	// an unfinished chain, never a chain that claims more than it has.
	Keys  []string
	Bytes int64
}

// RetentionPlan is what a policy removes from a catalog.
type RetentionPlan struct {
	Delete []Deletion
	// KeptChains and KeptBytes are what remains.
	KeptChains int
	KeptBytes  int64
}

// PlanRetention decides what policy removes from cat at time now. It is pure: ApplyRetention acts.
func PlanRetention(cat *Catalog, policy RetentionPolicy, now time.Time) RetentionPlan {
	grace := policy.OrphanGrace
	if grace <= 0 {
		grace = DefaultOrphanGrace
	}
	var plan RetentionPlan
	protected := map[string]bool{}
	if n := len(cat.Chains); n > 0 {
		protected[cat.Chains[n-1].ID] = true
	}
	// The newest chains by base and by coverage: the one a capturer writes may be either.
	for _, c := range []*Chain{cat.Newest(), cat.Latest()} {
		if c != nil {
			protected[c.ID] = true
		}
	}
	var newestBase string
	if n := len(cat.Chains); n > 0 {
		newestBase = cat.Chains[n-1].ID
	}

	// Leftovers of unfinished chains, by chain folder.
	type orphanDir struct {
		keys     []string
		bytes    int64
		modified time.Time
	}
	orphans := map[string]*orphanDir{}
	var orphanIDs []string
	for _, o := range cat.Orphans {
		id := path.Base(path.Dir(o.Key))
		d := orphans[id]
		if d == nil {
			d = &orphanDir{}
			orphans[id] = d
			orphanIDs = append(orphanIDs, id)
		}
		d.keys = append(d.keys, o.Key)
		d.bytes += o.Size
		if o.LastModified.After(d.modified) {
			d.modified = o.LastModified
		}
	}
	sort.Strings(orphanIDs)
	var total int64
	for _, id := range orphanIDs {
		d := orphans[id]
		// Chain IDs start with the zero-padded base revision: a greater ID is a later chain.
		if (newestBase != "" && id > newestBase) || now.Sub(d.modified) < grace {
			total += d.bytes
			continue
		}
		plan.Delete = append(plan.Delete, Deletion{ChainID: id, Reason: "unfinished chain", Keys: orderedKeys(d.keys), Bytes: d.bytes})
	}

	deleted := map[string]bool{}
	// An earlier history's chains first: they restore nothing, and go as their age or the bound says.
	chains := append(slices.Clone(cat.Superseded), cat.Chains...)
	for _, c := range chains {
		total += c.Bytes
	}
	for _, c := range chains {
		if protected[c.ID] || policy.MaxAge <= 0 {
			continue
		}
		if newest := c.NewestTime(); now.Sub(newest) > policy.MaxAge {
			deleted[c.ID] = true
			total -= c.Bytes
			plan.Delete = append(plan.Delete, Deletion{ChainID: c.ID, Keys: orderedKeys(c.Keys), Bytes: c.Bytes,
				Reason: fmt.Sprintf("restores nothing after %s, older than %s", newest.UTC().Format(time.RFC3339), policy.MaxAge)})
		}
	}
	for _, c := range chains {
		if policy.MaxBytes <= 0 || total <= policy.MaxBytes {
			break
		}
		if protected[c.ID] || deleted[c.ID] {
			continue
		}
		deleted[c.ID] = true
		total -= c.Bytes
		plan.Delete = append(plan.Delete, Deletion{ChainID: c.ID, Keys: orderedKeys(c.Keys), Bytes: c.Bytes,
			Reason: fmt.Sprintf("the chains exceed %d bytes", policy.MaxBytes)})
	}
	for _, c := range chains {
		if !deleted[c.ID] {
			plan.KeptChains++
		}
	}
	plan.KeptBytes = total
	return plan
}

// orderedKeys puts the manifest first and the snapshot last.
func orderedKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	rank := func(k string) int {
		switch {
		case strings.HasSuffix(k, "/"+manifestName):
			return 0
		case strings.HasSuffix(k, "/"+snapshotName):
			return 2
		}
		return 1
	}
	out = append(out, keys...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// ApplyRetention deletes what plan says, in order, and returns the keys it deleted; it stops at the first
// failure (a later run finishes the job: the chain is then an unfinished one).
func ApplyRetention(ctx context.Context, store backup.Store, plan RetentionPlan) ([]string, error) {
	var deleted []string
	for _, d := range plan.Delete {
		for _, k := range d.Keys {
			if err := store.Delete(ctx, k); err != nil {
				return deleted, fmt.Errorf("retention of chain %s: %w", d.ChainID, err)
			}
			deleted = append(deleted, k)
		}
	}
	return deleted, nil
}
