package continuous

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Report is the continuous backup agent's GET /status: the agent (cmd/continuousbackup.go) serves it and the
// operator, which reads nothing else of the agent, carries it into the cluster's status. One type for both
// sides, so that a field the agent adds or renames cannot go missing on the operator's.
type Report struct {
	ClusterUID string `json:"clusterUID"`
	// Location is where the chains are stored (pvc://<claim>/<prefix> or s3://<bucket>/<prefix>).
	Location string `json:"location"`
	// Capturing: a chain exists and the capture's last step succeeded.
	Capturing bool `json:"capturing"`
	// The restorable range across the retained chains; NewestTime is the recovery point.
	OldestRevision int64     `json:"oldestRevision"`
	OldestTime     time.Time `json:"oldestTime,omitzero"`
	NewestRevision int64     `json:"newestRevision"`
	NewestTime     time.Time `json:"newestTime,omitzero"`
	// Gaps are the revisions inside the retained range that no chain restores.
	Gaps   []ReportGap `json:"gaps"`
	Chains int         `json:"chains"`
	// LastError is the capture's failure since its last success, else the last retention run's.
	LastError string `json:"lastError"`
}

// ReportGap is a Gap as the report gives it.
type ReportGap struct {
	FromRevision int64     `json:"fromRevision"`
	ToRevision   int64     `json:"toRevision"`
	Reason       string    `json:"reason"`
	Time         time.Time `json:"time,omitzero"`
}

// ReadReport decodes a report. Fields it does not know are ignored: an agent of a newer operator version
// may still run while the operator is rolled back.
func ReadReport(r io.Reader) (*Report, error) {
	rep := &Report{}
	if err := json.NewDecoder(r).Decode(rep); err != nil {
		return nil, fmt.Errorf("decode the continuous backup report: %w", err)
	}
	return rep, nil
}

// MetricsPrefix starts the name of every metric the agent serves at /metrics.
const MetricsPrefix = "etcd_operator_continuous_backup_"

// MetricNames are the metrics the agent serves at /metrics (cmd/continuousbackup.go; docs/metrics.md), for
// the checks of documentation and queries that refer to them.
func MetricNames() []string {
	var out []string
	for _, n := range []string{"newest_revision", "newest_timestamp_seconds", "oldest_revision", "oldest_timestamp_seconds", "gaps",
		"recovery_point_seconds", "capturing", "segments_written_total", "bytes_written_total", "chains_started_total", "gaps_recorded_total"} {
		out = append(out, MetricsPrefix+n)
	}
	return out
}
