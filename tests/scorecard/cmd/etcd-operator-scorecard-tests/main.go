// Command etcd-operator-scorecard-tests is the entrypoint of the project's custom scorecard test image:
//
//	etcd-operator-scorecard-tests [flags] TEST
//
// operator-sdk's scorecard runs it in a pod of the namespace it tests in, with the bundle at /bundle, and
// reads one v1alpha3.TestStatus as JSON from the pod's log. Everything else the test has to say goes into
// that status (its log and errors), never to stdout or stderr, which share the pod's log with the JSON.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/seedops/etcd-operator/tests/scorecard"
)

// The service account's namespace, when SCORECARD_NAMESPACE (set by the scorecard) is not.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	bundleDir := flag.String("bundle", "/bundle", "directory of the untarred bundle")
	namespace := flag.String("namespace", os.Getenv("SCORECARD_NAMESPACE"),
		"namespace to create clusters in (default: $SCORECARD_NAMESPACE, else the service account's)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig to use instead of the pod's service account (to run a test from a host)")
	t := scorecard.DefaultTimeouts
	flag.DurationVar(&t.Available, "available-timeout", t.Available, "time for a new cluster to become Available")
	flag.DurationVar(&t.Scale, "scale-timeout", t.Scale, "time for a scaled cluster to settle")
	flag.DurationVar(&t.Backup, "backup-timeout", t.Backup, "time for an EtcdBackup to succeed")
	flag.DurationVar(&t.Delete, "delete-timeout", t.Delete, "time for what a test created to be gone")
	flag.Parse()

	name := strings.Join(flag.Args(), " ")
	res := scorecard.NewResult(name)
	// What client-go (klog) and controller-runtime print goes into the result's log: their messages (a
	// watch that keeps failing, a forbidden list) explain failures, and on stderr they would corrupt the
	// JSON the scorecard parses from the pod's log. Both write to os.Stderr as it is when they log.
	drained, err := captureStderr(res)
	if err != nil {
		res.Errorf("capturing stderr: %v", err)
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	// The scorecard deletes the pod on its own timeout: stop waiting and clean up within the grace period.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	run(ctx, res, name, *bundleDir, *namespace, *kubeconfig, t)
	drained()

	out, err := json.MarshalIndent(res.Status(), "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "encoding the result: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// captureStderr points os.Stderr at a pipe whose lines go to the result's log; the returned function
// restores stderr and waits until every line is logged.
func captureStderr(res *scorecard.Result) (drained func(), err error) {
	orig := os.Stderr
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}, err
	}
	os.Stderr = w
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			res.Logf("stderr: %s", sc.Text())
		}
	}()
	return func() {
		os.Stderr = orig
		_ = w.Close()
		<-done
	}, nil
}

func run(ctx context.Context, res *scorecard.Result, name, bundleDir, namespace, kubeconfig string, t scorecard.Timeouts) {
	fail := func(format string, args ...any) {
		res.Errorf(format, args...)
		res.Finish()
	}
	if _, ok := scorecard.Tests[name]; len(flag.Args()) != 1 || !ok {
		fail("want one test name argument, one of: %s; got %q", strings.Join(scorecard.TestNames(), ", "), flag.Args())
		return
	}
	csv, err := scorecard.LoadCSV(bundleDir)
	if err != nil {
		fail("%v", err)
		return
	}
	examples, err := scorecard.ParseExamples(csv)
	if err != nil {
		fail("%v", err)
		return
	}
	if namespace == "" {
		b, err := os.ReadFile(serviceAccountNamespaceFile)
		if err != nil {
			fail("no namespace: SCORECARD_NAMESPACE is not set and %v", err)
			return
		}
		namespace = strings.TrimSpace(string(b))
	}
	cfg, err := rest.InClusterConfig()
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		fail("client config: %v", err)
		return
	}
	cl, err := scorecard.NewClient(cfg)
	if err != nil {
		fail("client: %v", err)
		return
	}
	res.Logf("bundle %s (CSV %s), namespace %s, %d EtcdCluster and %d EtcdBackup alm-examples", bundleDir, csv.GetName(), namespace, len(examples.Clusters), len(examples.Backups))

	// The cleanup gets its own context: after a signal only the pod's grace period (30 s) is left.
	cleanupCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-ctx.Done()
		time.AfterFunc(25*time.Second, cancel)
	}()
	env := &scorecard.Env{Client: cl, Namespace: namespace, Result: res}
	scorecard.Run(ctx, cleanupCtx, env, name, examples, t)
}
