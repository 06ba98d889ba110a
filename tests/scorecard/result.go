package scorecard

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
)

// Result collects what one test did (a log with the time since the start) and what went wrong, and turns
// that into the scorecard's TestStatus. It is safe for concurrent use: a test may wait on several clusters
// at once.
type Result struct {
	mu          sync.Mutex
	name        string
	start       time.Time
	now         func() time.Time
	log         []string
	errors      []string
	suggestions []string
	finished    bool
}

// NewResult starts the result of the test called name.
func NewResult(name string) *Result { return newResult(name, time.Now) }

func newResult(name string, now func() time.Time) *Result {
	return &Result{name: name, start: now(), now: now}
}

// Logf adds a line to the log, prefixed with the seconds since the test started.
func (r *Result) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logLocked(fmt.Sprintf(format, args...))
}

func (r *Result) logLocked(msg string) {
	r.log = append(r.log, fmt.Sprintf("[%6.1fs] %s", r.now().Sub(r.start).Seconds(), msg))
}

// Errorf records a failure: the test fails, with the message in its errors (and its log, for the timeline).
func (r *Result) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.errors = append(r.errors, msg)
	r.logLocked("ERROR: " + msg)
}

// Suggest adds a hint for the user (deduplicated).
func (r *Result) Suggest(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.suggestions {
		if have == s {
			return
		}
	}
	r.suggestions = append(r.suggestions, s)
}

// Finish marks the test as having run to its end. A result never finished is a failure: the test was cut
// short (a panic, a signal) and its checks did not all run.
func (r *Result) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = true
	r.logLocked("done")
}

// Failed tells whether an error was recorded.
func (r *Result) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0
}

// Status is the scorecard output: pass only when the test finished without an error.
func (r *Result) Status() v1alpha3.TestStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := v1alpha3.TestResult{
		Name:        r.name,
		State:       v1alpha3.PassState,
		Errors:      append([]string{}, r.errors...),
		Suggestions: append([]string{}, r.suggestions...),
	}
	if !r.finished {
		res.Errors = append(res.Errors, "the test did not run to its end")
	}
	if len(res.Errors) > 0 {
		res.State = v1alpha3.FailState
	}
	res.Log = strings.Join(r.log, "\n")
	return v1alpha3.TestStatus{Results: []v1alpha3.TestResult{res}}
}

// Summary lists every result of a scorecard run (`operator-sdk scorecard -o json`) as "state suite/test
// name", sorted, and counts the results that are not pass. A run without any result counts as a failure:
// a selector that matches nothing must not look green.
func Summary(list v1alpha3.TestList) (lines []string, notPassed int) {
	for _, t := range list.Items {
		suite, test := t.Spec.Labels["suite"], t.Spec.Labels["test"]
		if len(t.Status.Results) == 0 {
			lines = append(lines, fmt.Sprintf("%-5s %s/%s (no result)", v1alpha3.FailState, suite, test))
			notPassed++
			continue
		}
		for _, res := range t.Status.Results {
			line := fmt.Sprintf("%-5s %s/%s %s", res.State, suite, test, res.Name)
			if res.State != v1alpha3.PassState {
				notPassed++
				if len(res.Errors) > 0 {
					line += ": " + strings.Join(res.Errors, "; ")
				}
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "no scorecard test ran")
		notPassed++
	}
	sort.Strings(lines)
	return lines, notPassed
}
