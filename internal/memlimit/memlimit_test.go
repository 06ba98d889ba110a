package memlimit

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore the test binary's own limit
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int64 // the runtime's limit afterwards
		said    string
		wantErr bool
	}{
		{name: "half of the container's limit", env: map[string]string{EnvContainerLimit: "268435456"}, want: 128 << 20, said: "128 MiB"},
		{name: "an explicit GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "80MiB", EnvContainerLimit: "268435456"}, want: math.MaxInt64, said: "set explicitly"},
		{name: "no limit given", env: map[string]string{}, want: math.MaxInt64, said: "no soft memory limit"},
		{name: "not a number", env: map[string]string{EnvContainerLimit: "256Mi"}, want: math.MaxInt64, wantErr: true},
		{name: "zero", env: map[string]string{EnvContainerLimit: "0"}, want: math.MaxInt64, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			said, err := Apply(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if !strings.Contains(said, tc.said) {
				t.Errorf("said %q, want it to mention %q", said, tc.said)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("runtime limit %d, want %d", got, tc.want)
			}
		})
	}
}
