// Command operatorhub writes the community catalogs' submission tree (internal/operatorhub): `make operatorhub`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/seedops/etcd-operator/internal/operatorhub"
)

func main() {
	var src operatorhub.Source
	var out, catalogs string
	flag.StringVar(&src.Root, "root", ".", "the repository's root")
	flag.StringVar(&src.Package, "package", "etcd-operator", "the OLM package")
	flag.StringVar(&src.Version, "version", "", "the version in development (its bundle is bundle/)")
	flag.StringVar(&out, "out", "", "the directory to write the submission to (emptied first)")
	flag.StringVar(&catalogs, "catalogs", "", "comma-separated catalogs the template maps to (default: the OpenShift release of the bundle's minKubeVersion)")
	flag.Parse()
	if err := run(src, out, catalogs); err != nil {
		fmt.Fprintln(os.Stderr, "operatorhub:", err)
		os.Exit(1)
	}
}

func run(src operatorhub.Source, out, catalogs string) error {
	if src.Version == "" || out == "" {
		return fmt.Errorf("-version and -out are required")
	}
	names := strings.FieldsFunc(catalogs, func(r rune) bool { return r == ',' })
	if len(names) == 0 {
		v, err := operatorhub.MinKubeVersion(filepath.Join(src.Root, "bundle"))
		if err != nil {
			return err
		}
		name, err := operatorhub.OpenShiftVersions(v)
		if err != nil {
			return err
		}
		names = []string{name}
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := operatorhub.Write(src, out, names); err != nil {
		return err
	}
	// The names, for the Makefile to render each catalog with opm.
	fmt.Println(strings.Join(names, " "))
	return nil
}
