package kubectlplugin

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the renderer")

func TestRenderStatusGolden(t *testing.T) {
	scaling, scalingBackups := scalingCluster()
	cases := map[string]StatusView{
		"healthy":               {Cluster: healthyCluster()},
		"learner-and-unhealthy": {Cluster: scaling, Backups: scalingBackups},
		"nospace-degraded":      {Cluster: noSpaceCluster()},
		"no-backups":            {Cluster: unscheduledCluster()},
		"no-status":             {Cluster: newCluster()},
		"defragmenting":         {Cluster: defragmentingCluster()},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			v.Now = now
			var out bytes.Buffer
			if err := RenderStatus(&out, v); err != nil {
				t.Fatal(err)
			}
			golden(t, name, out.String())
		})
	}
}

func TestRenderStatusColor(t *testing.T) {
	var plainOut, colored bytes.Buffer
	_ = RenderStatus(&plainOut, StatusView{Cluster: noSpaceCluster(), Now: now})
	_ = RenderStatus(&colored, StatusView{Cluster: noSpaceCluster(), Now: now, Color: true})
	if strings.Contains(plainOut.String(), "\x1b[") {
		t.Error("output without colour contains escape codes")
	}
	if !strings.Contains(colored.String(), "\x1b[31mNOSPACE on prod-etcd-0\x1b[0m") {
		t.Errorf("alarm not red:\n%q", colored.String())
	}
	// Colour must not move columns: with the escape codes removed, both outputs are the same.
	stripped := colored.String()
	for _, code := range ansi {
		stripped = strings.ReplaceAll(stripped, code, "")
	}
	if diff := cmp.Diff(plainOut.String(), strings.ReplaceAll(stripped, "\x1b[0m", "")); diff != "" {
		t.Errorf("coloured output differs from plain output beyond escape codes (-plain +coloured):\n%s", diff)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 41 * mib: "41.0 MiB", 3277 * mib: "3.2 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestNextBackupInvalidSchedule(t *testing.T) {
	if got := nextRun("61 * * * *", now); !strings.Contains(got, "does not parse") {
		t.Errorf("nextRun of a bad schedule = %q", got)
	}
}

// golden compares got with testdata/<name>.golden, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/kubectlplugin/ -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); rerun with -update if the change is intended:\n%s", path, diff)
	}
}
