// Command scorecard-results reads the output of `operator-sdk scorecard -o json` (a file, or stdin), prints
// one line per test result and exits non-zero unless every result is pass. operator-sdk's own exit status
// is not enough: it exits 0 when a test fails.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"

	"github.com/seedops/etcd-operator/tests/scorecard"
)

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	var list v1alpha3.TestList
	if err := json.NewDecoder(in).Decode(&list); err != nil {
		fmt.Fprintf(os.Stderr, "not scorecard JSON output: %v\n", err)
		os.Exit(2)
	}
	lines, notPassed := scorecard.Summary(list)
	for _, l := range lines {
		fmt.Println(l)
	}
	if notPassed > 0 {
		fmt.Printf("%d of %d scorecard results did not pass\n", notPassed, len(lines))
		os.Exit(1)
	}
	fmt.Printf("all %d scorecard results passed\n", len(lines))
}
