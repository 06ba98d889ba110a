// Package memlimit sets the Go runtime's soft memory limit from the container's memory limit, so that a
// fleet that needs more memory takes one change (the container's limit) and the collector's target moves
// with it.
package memlimit

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// EnvContainerLimit names the variable that carries the container's memory limit in bytes (the manager's
// Deployment sets it from resourceFieldRef limits.memory; without a limit Kubernetes gives the node's
// allocatable memory).
const EnvContainerLimit = "CONTAINER_MEMORY_LIMIT"

// Fraction of the container's limit given to the Go runtime. The rest covers what the soft limit does not
// count or cannot hold: the binary's mapped pages (~42 MiB), and a live set that outgrows the soft limit
// for a while (the collector then works harder, the container is not killed).
const Fraction = 0.5

// Apply sets the soft memory limit to Fraction of the container's limit, unless GOMEMLIMIT is set (the Go
// runtime has already applied it: an explicit choice wins). It returns what it did, for the log; an
// unreadable limit is an error and changes nothing.
func Apply(getenv func(string) string) (string, error) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return "GOMEMLIMIT=" + v + " (set explicitly)", nil
	}
	raw := strings.TrimSpace(getenv(EnvContainerLimit))
	if raw == "" {
		return "no soft memory limit (neither GOMEMLIMIT nor " + EnvContainerLimit + " is set)", nil
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit <= 0 {
		return "", fmt.Errorf("%s=%q: want the container's memory limit in bytes", EnvContainerLimit, raw)
	}
	soft := int64(float64(limit) * Fraction)
	debug.SetMemoryLimit(soft)
	return fmt.Sprintf("soft memory limit %d MiB (%.0f%% of the container's %d MiB)", soft>>20, Fraction*100, limit>>20), nil
}
