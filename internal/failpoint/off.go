//go:build !failpoints

package failpoint

// Enabled reports whether this build has failpoints.
const Enabled = false

// Inject does nothing in builds without the failpoints tag.
func Inject(string) {}

// Arm is unavailable without the failpoints tag: a test that needs failpoints fails instead of passing
// without them.
func Arm(name string, _ int) { panic("failpoint " + name + ": built without the failpoints tag") }

// Fired is empty without the failpoints tag.
func Fired() map[string]int { return nil }
