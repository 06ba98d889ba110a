//go:build !failpoints

package failpoint

import (
	"fmt"
	"os"
)

// Enabled reports whether this build has failpoints.
const Enabled = false

// Inject does nothing in builds without the failpoints tag.
func Inject(string) {}

// Arm is unavailable without the failpoints tag: a test that needs failpoints fails instead of passing
// without them.
func Arm(name string, _ int) { panic("failpoint " + name + ": built without the failpoints tag") }

// Disarm does nothing without the failpoints tag: nothing can be armed.
func Disarm() {}

// RecordExit does nothing without the failpoints tag.
func RecordExit(string) {}

// Fired is empty without the failpoints tag.
func Fired() map[string]int { return nil }

// ArmFromEnv refuses failpoints requested from a build without them, so a test cannot pass without them.
func ArmFromEnv() (map[string]int, error) {
	if os.Getenv(EnvFailpoints) != "" {
		return nil, fmt.Errorf("%s is set but this build has no failpoints (build with -tags failpoints)", EnvFailpoints)
	}
	return nil, nil
}
