// Command controller runs the cert-manager controllers that issue Certificates from CA Issuers and
// ClusterIssuers, built from the cert-manager library module, against the API server of a kubeconfig. The
// envtest suites run it where no cert-manager deployment exists; the webhook is left out (the suites create
// only valid objects, and cert-manager's CRDs carry their own structural schemas).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each of these registers its controller (or issuer type) with the packages above when imported.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
)

// controllers are the control loops a Certificate issued by a CA issuer passes through: the Certificate
// pipeline, the approver (a CertificateRequest is signed only once approved), the CA signer, and the issuer
// controllers that mark an Issuer or ClusterIssuer Ready.
var controllers = []string{
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"issuers",
	"clusterissuers",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to run against (empty: in-cluster)")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets ClusterIssuers refer to")
	namespace := flag.String("namespace", "", "namespace to watch (empty: all)")
	workers := flag.Int("workers", 2, "workers per controller")
	flag.Parse()

	logf.InitLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log)
	if err := run(ctx, *kubeconfig, *namespace, *clusterResourceNamespace, *workers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, namespace, clusterResourceNamespace string, workers int) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		Namespace:          namespace,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		// cert-manager's own flag defaults.
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	known := controllerpkg.Known()
	var loops []controllerpkg.Interface
	for _, name := range controllers {
		construct, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered", name)
		}
		loop, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %q: %w", name, err)
		}
		loops = append(loops, loop)
	}
	// The informer factories are shared by every Context the factory builds: started once, after every
	// controller has asked for its informers.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())

	errs := make(chan error, len(loops))
	var wg sync.WaitGroup
	for i, loop := range loops {
		wg.Go(func() {
			if err := loop.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("controller %q: %w", controllers[i], err)
			}
		})
	}
	logf.Log.Info("cert-manager controllers running", "controllers", controllers)
	wg.Wait()
	close(errs)
	return <-errs
}
