//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	armed = map[string]int{}
	fired = map[string]int{}

	// stateDir is set by ArmFromEnv: a fired failpoint is recorded there and ends the process.
	stateDir string
)

// Enabled reports whether this build has failpoints.
const Enabled = true

// Arm makes the next n hits of name crash.
func Arm(name string, n int) {
	mu.Lock()
	defer mu.Unlock()
	armed[name] += n
}

// Disarm clears every armed failpoint: a test that armed more hits than it needed leaves none to crash
// the tests after it.
func Disarm() {
	mu.Lock()
	defer mu.Unlock()
	clear(armed)
}

// ArmFromEnv arms the failpoints named in EnvFailpoints ("name=n,name=n") for a real process crash: a
// fired failpoint is counted in EnvStateDir, written to the container's termination message and ends the
// process with ExitCode. The state directory must outlive the process (an emptyDir survives container
// restarts), so each failpoint fires n times per pod, not n times per restart.
func ArmFromEnv() (map[string]int, error) {
	spec := strings.TrimSpace(os.Getenv(EnvFailpoints))
	if spec == "" {
		return nil, nil
	}
	dir := os.Getenv(EnvStateDir)
	if dir == "" {
		return nil, fmt.Errorf("%s is set but %s (a directory that outlives the process) is not", EnvFailpoints, EnvStateDir)
	}
	want, err := parse(spec)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	left := map[string]int{}
	for name, n := range want {
		done, err := firedIn(dir, name)
		if err != nil {
			return nil, err
		}
		fired[name] = done
		if n > done {
			armed[name] = n - done
			left[name] = n - done
		}
	}
	stateDir = dir
	return left, nil
}

func parse(spec string) (map[string]int, error) {
	known := map[string]bool{}
	for _, n := range All {
		known[n] = true
	}
	out := map[string]int{}
	for _, item := range strings.Split(spec, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not name=count (count >= 1)", EnvFailpoints, item)
		}
		if !known[name] {
			return nil, fmt.Errorf("%s: unknown failpoint %q (known: %s)", EnvFailpoints, name, strings.Join(All, ", "))
		}
		out[name] += n
	}
	return out, nil
}

func firedIn(dir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Fired returns how often each failpoint crashed.
func Fired() map[string]int {
	mu.Lock()
	defer mu.Unlock()
	out := map[string]int{}
	for k, v := range fired {
		out[k] = v
	}
	return out
}

// RecordExit records, in a process armed by ArmFromEnv, that the process is about to exit on its own for
// reason (its manager stopped: a lost leader lease, say), in ExitsFile and in the termination message. A test
// counting the container's restarts then tells such an exit from a crash nothing accounts for (a panic, an
// OOM kill).
func RecordExit(reason string) {
	mu.Lock()
	dir := stateDir
	mu.Unlock()
	if dir == "" {
		return
	}
	reason = strings.ReplaceAll(reason, "\n", " ")
	if f, err := os.OpenFile(filepath.Join(dir, ExitsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		_, _ = f.WriteString(reason + "\n")
		_ = f.Close()
	}
	writeTerminationLog(ExitPrefix + reason)
}

// writeTerminationLog writes msg only into a termination log the kubelet mounted: never creates
// /dev/termination-log elsewhere.
func writeTerminationLog(msg string) {
	if f, err := os.OpenFile(TerminationLog, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
		_, _ = f.WriteString(msg)
		_ = f.Close()
	}
}

// Inject crashes when name is armed: it panics with Crash (Arm, in-process tests) or, armed by
// ArmFromEnv, records the crash and exits the process at once (no deferred function runs).
func Inject(name string) {
	mu.Lock()
	if armed[name] <= 0 {
		mu.Unlock()
		return
	}
	armed[name]--
	fired[name]++
	dir, count := stateDir, fired[name]
	mu.Unlock()
	if dir == "" {
		panic(Crash{Name: name})
	}
	msg := fmt.Sprintf("failpoint %s fired (%d)", name, count)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.Itoa(count)), 0o600); err != nil {
		msg += "; recording it failed: " + err.Error()
	}
	writeTerminationLog(msg)
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(ExitCode)
}
