package watchnamespace

import (
	"strings"
	"testing"
)

// FuzzParse: WATCH_NAMESPACE parses into trimmed, non-empty names without commas, and parsing the joined
// result gives the same list.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "a", "a,b", " a , ,b,", ",,,", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nss := Parse(s)
		for _, ns := range nss {
			if ns == "" || strings.Contains(ns, ",") || strings.TrimSpace(ns) != ns {
				t.Fatalf("Parse(%q) = %q", s, nss)
			}
		}
		if again := Parse(strings.Join(nss, ",")); strings.Join(again, ",") != strings.Join(nss, ",") {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, nss, again)
		}
	})
}
