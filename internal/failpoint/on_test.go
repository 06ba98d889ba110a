//go:build failpoints

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The process mode runs in a child process (this test binary again), since a fired failpoint exits.
func TestMain(m *testing.M) {
	if os.Getenv("FAILPOINT_TEST_CHILD") == "1" {
		if _, err := ArmFromEnv(); err != nil {
			_, _ = os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		Inject(AfterMembershipStep)
		Inject(AfterCertificateIssued)
		if reason := os.Getenv("FAILPOINT_TEST_EXIT"); reason != "" {
			RecordExit(reason)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, dir, spec string, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", EnvFailpoints+"="+spec, EnvStateDir+"="+dir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestArmFromEnvCrashesTheProcessCountTimesPerStateDir(t *testing.T) {
	dir := t.TempDir()
	spec := AfterMembershipStep + "=2," + AfterCertificateIssued + "=1"
	var exits []int
	for range 4 {
		code, out := child(t, dir, spec)
		exits = append(exits, code)
		if code == ExitCode && !strings.Contains(out, "failpoint after-") {
			t.Fatalf("crash without its message: %q", out)
		}
	}
	// Two crashes at the membership step, one at the certificate, then the process runs through.
	if want := []int{ExitCode, ExitCode, ExitCode, 0}; !slices.Equal(exits, want) {
		t.Fatalf("exit codes %v, want %v", exits, want)
	}
	for name, want := range map[string]string{AfterMembershipStep: "2", AfterCertificateIssued: "1"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Fatalf("%s recorded %q (%v), want %q", name, b, err, want)
		}
	}
}

func TestArmFromEnvRefusesBadSpecs(t *testing.T) {
	for _, spec := range []string{"nope=1", AfterMembershipStep, AfterMembershipStep + "=0", AfterMembershipStep + "=x"} {
		if code, out := child(t, t.TempDir(), spec); code != 2 {
			t.Errorf("%q: exit %d (%s), want a refusal", spec, code, out)
		}
	}
	if code, _ := child(t, "", AfterMembershipStep+"=1"); code != 2 {
		t.Errorf("no state dir: exit %d, want a refusal", code)
	}
}

func TestRecordExitListsEachExitAfterTheArmedCrashes(t *testing.T) {
	dir := t.TempDir()
	var exits []int
	for _, reason := range []string{"leader election lost", "caches did not sync\nin time"} {
		code, _ := child(t, dir, AfterMembershipStep+"=1", "FAILPOINT_TEST_EXIT="+reason)
		exits = append(exits, code)
	}
	// The first run crashes at the armed failpoint before it gets to its own exit; the next two exit on their own.
	code, _ := child(t, dir, AfterMembershipStep+"=1", "FAILPOINT_TEST_EXIT=leader election lost")
	exits = append(exits, code)
	if want := []int{ExitCode, 1, 1}; !slices.Equal(exits, want) {
		t.Fatalf("exit codes %v, want %v", exits, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, ExitsFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := "caches did not sync in time\nleader election lost\n"; string(b) != want {
		t.Fatalf("%s holds %q, want %q", ExitsFile, b, want)
	}
}

func TestRecordExitWithoutArmingRecordsNothing(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", EnvStateDir+"="+dir, "FAILPOINT_TEST_EXIT=lost")
	if err := cmd.Run(); err == nil {
		t.Fatal("the child should exit 1")
	}
	if _, err := os.Stat(filepath.Join(dir, ExitsFile)); !os.IsNotExist(err) {
		t.Fatalf("%s written by a process no failpoint armed: %v", ExitsFile, err)
	}
}
