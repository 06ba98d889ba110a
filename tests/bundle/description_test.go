package bundle

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlBlock is the first ```yaml block of a Markdown text that defines an EtcdCluster, indentation removed.
func yamlBlock(t *testing.T, what, text string) string {
	t.Helper()
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(text, -1)
	for _, block := range m {
		if !strings.Contains(block[1], "kind: EtcdCluster") {
			continue
		}
		lines := strings.Split(strings.TrimRight(block[1], " \n"), "\n")
		indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
		for i, l := range lines {
			if len(l) >= indent {
				lines[i] = l[indent:]
			}
		}
		return strings.Join(lines, "\n")
	}
	t.Fatalf("%s has no EtcdCluster example", what)
	return ""
}

// TestDescriptionAgreesWithReadme: OperatorHub shows the CSV's description, GitHub the README; both show the
// same example and neither promises what the other denies.
func TestDescriptionAgreesWithReadme(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	description := loadBundle(t).CSV.Spec.Description
	if got, want := yamlBlock(t, "the CSV description", description), yamlBlock(t, "README.md", string(readme)); got != want {
		t.Errorf("the CSV description's example\n%s\ndiffers from the README's\n%s", got, want)
	}
	// New clusters serve clients over TLS (README, docs/tls.md): the description must not show plaintext.
	if strings.Contains(description, "http://") || strings.Contains(description, "TLS arrives") {
		t.Errorf("the CSV description still describes a plaintext client endpoint")
	}
	for _, fact := range []string{"https://", "status.tls.clientSecretName", "learners"} {
		if !strings.Contains(description, fact) {
			t.Errorf("the CSV description does not mention %q", fact)
		}
	}
}
