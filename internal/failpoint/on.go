//go:build failpoints

package failpoint

import "sync"

var (
	mu    sync.Mutex
	armed = map[string]int{}
	fired = map[string]int{}
)

// Enabled reports whether this build has failpoints.
const Enabled = true

// Arm makes the next n hits of name crash.
func Arm(name string, n int) {
	mu.Lock()
	defer mu.Unlock()
	armed[name] += n
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

// Inject crashes (panics with Crash) when name is armed.
func Inject(name string) {
	mu.Lock()
	if armed[name] <= 0 {
		mu.Unlock()
		return
	}
	armed[name]--
	fired[name]++
	mu.Unlock()
	panic(Crash{Name: name})
}
