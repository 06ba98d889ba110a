// Command scorecard-local helps `make scorecard-node` run the scorecard on the local node:
//
//	scorecard-local config --in CONFIG --out FILE --image PUBLIC=LOCAL...
//	    writes CONFIG with every test image replaced by its local build; an image without one is an error,
//	    so no test ever tries to pull from a public registry (and a stale tag is caught).
//	scorecard-local etcd-versions BUNDLE_DIR
//	    prints the etcd versions the CSV's alm-examples run from the default repository, one a line: the
//	    images the operator must find mirrored (RELATED_IMAGE_ETCD_*) on a disconnected node.
//	scorecard-local results [FILE]
//	    reads `operator-sdk scorecard -o json` output (FILE or stdin), prints one line per result and exits
//	    1 unless every result is pass (operator-sdk itself exits 0 when a test fails).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/seedops/etcd-operator/tests/scorecard"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "config":
		err = config(os.Args[2:])
	case "etcd-versions":
		err = etcdVersions(os.Args[2:])
	case "results":
		err = results(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scorecard-local %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: scorecard-local config|etcd-versions|results ... (see the package comment)")
	os.Exit(2)
}

type imageMap map[string]string

func (m imageMap) String() string { return fmt.Sprint(map[string]string(m)) }
func (m imageMap) Set(v string) error {
	public, local, ok := strings.Cut(v, "=")
	if !ok || public == "" || local == "" {
		return fmt.Errorf("want PUBLIC=LOCAL, got %q", v)
	}
	m[public] = local
	return nil
}

func config(args []string) error {
	fs := flag.NewFlagSet("config", flag.ExitOnError)
	in := fs.String("in", "", "scorecard configuration to read")
	out := fs.String("out", "", "file to write")
	images := imageMap{}
	fs.Var(images, "image", "PUBLIC=LOCAL image to substitute (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var cfg v1alpha3.Configuration
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	rewritten, err := scorecard.LocalConfig(cfg, images)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	b, err = yaml.Marshal(rewritten)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

func etcdVersions(args []string) error {
	if len(args) != 1 {
		return errors.New("want the bundle directory")
	}
	csv, err := scorecard.LoadCSV(args[0])
	if err != nil {
		return err
	}
	examples, err := scorecard.ParseExamples(csv)
	if err != nil {
		return err
	}
	for _, v := range scorecard.DefaultRepositoryVersions(examples.Clusters) {
		fmt.Println(v)
	}
	return nil
}

func results(args []string) error {
	in := io.Reader(os.Stdin)
	if len(args) > 0 {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		in = f
	}
	var list v1alpha3.TestList
	if err := json.NewDecoder(in).Decode(&list); err != nil {
		return fmt.Errorf("not scorecard JSON output: %w", err)
	}
	lines, notPassed := scorecard.Summary(list)
	for _, l := range lines {
		fmt.Println(l)
	}
	if notPassed > 0 {
		return fmt.Errorf("%d of %d scorecard results did not pass", notPassed, len(lines))
	}
	fmt.Printf("all %d scorecard results passed\n", len(lines))
	return nil
}
