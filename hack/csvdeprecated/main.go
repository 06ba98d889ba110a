// Command csvdeprecated completes a CSV's owned entries of the deprecated API version (v1alpha1) from the current
// version's (v1beta1) entries for the same CRD: the same resources and spec and status descriptors, since the two
// versions share one schema (docs/api-versions.md). operator-sdk generates descriptors only for the versions PROJECT
// lists, and OLM's consoles and the scorecard read them for every owned version, including the deprecated
// examples in alm-examples. Run by `make bundle` on the generated bundle CSV; the deprecated entries' own display
// names and descriptions (written in config/manifests/bases) are kept.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

const deprecated, current = "v1alpha1", "v1beta1"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: csvdeprecated CSV_FILE")
		os.Exit(2)
	}
	if err := complete(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "csvdeprecated:", err)
		os.Exit(1)
	}
}

// complete works on the CSV as a plain document, so every field it does not touch is written back as
// operator-sdk wrote it (the typed CSV would add its empty defaults).
func complete(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	csv := map[string]any{}
	if err := yaml.Unmarshal(b, &csv); err != nil {
		return err
	}
	spec, _ := csv["spec"].(map[string]any)
	crds, _ := spec["customresourcedefinitions"].(map[string]any)
	owned, _ := crds["owned"].([]any)
	copied := []string{"resources", "specDescriptors", "statusDescriptors", "actionDescriptors"}
	for _, e := range owned {
		entry, _ := e.(map[string]any)
		if entry["version"] != deprecated {
			continue
		}
		found := false
		for _, c := range owned {
			cur, _ := c.(map[string]any)
			if cur["name"] != entry["name"] || cur["version"] != current {
				continue
			}
			for _, k := range copied {
				delete(entry, k)
				if v, ok := cur[k]; ok {
					entry[k] = v
				}
			}
			found = true
		}
		if !found {
			return fmt.Errorf("%v %s has no %s entry to take its descriptors from", entry["name"], deprecated, current)
		}
	}
	out, err := yaml.Marshal(csv)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
