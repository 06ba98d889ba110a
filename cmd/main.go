// Command manager runs the etcd operator.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/controllers"
	"github.com/seedops/etcd-operator/internal/failpoint"
	"github.com/seedops/etcd-operator/internal/memlimit"
	"github.com/seedops/etcd-operator/internal/resources"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1beta1.AddToScheme(scheme))
}

func main() {
	// The same image runs backups (CronJob and EtcdBackup Jobs) and restores (init containers).
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "backup":
			os.Exit(runBackup(os.Args[2:]))
		case "restore":
			os.Exit(runRestore(os.Args[2:]))
		case "member-gate":
			os.Exit(runMemberGate(os.Args[2:]))
		case "etcd-start":
			os.Exit(runEtcdStart(os.Args[2:]))
		case "continuous-backup":
			os.Exit(runContinuousBackupMode(os.Args[2:]))
		case "pitr":
			os.Exit(runPITRMode(os.Args[2:]))
		case "install-self":
			os.Exit(runInstallSelf(os.Args[2:]))
		case "serve-snapshot":
			os.Exit(runServeSnapshot(os.Args[2:]))
		}
	}

	var metricsAddr, probeAddr, clusterDomain string
	var enableLeaderElection, secureMetrics, enableHTTP2 bool
	var healAfter, healthInterval time.Duration
	var maxConcurrentReconciles int
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Metrics endpoint address (:8443 for HTTPS, :8080 for HTTP, 0 to disable).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Health and readiness probe address.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false, "Elect a leader so only one operator replica is active.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS with authentication and authorization.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Enable HTTP/2 for the metrics server (off: CVE-2023-44487, CVE-2023-39325).")
	flag.StringVar(&clusterDomain, "cluster-domain", envOr("CLUSTER_DOMAIN", "cluster.local"), "DNS domain of the Kubernetes cluster.")
	flag.DurationVar(&healAfter, "heal-after", 3*time.Minute, "How long a member may stay unhealthy before it is replaced (only while quorum holds).")
	flag.DurationVar(&healthInterval, "health-interval", 30*time.Second, "How often a cluster at rest is health-checked.")
	flag.IntVar(&maxConcurrentReconciles, "max-concurrent-reconciles", 4, "How many EtcdClusters are reconciled at once (each one by one worker at a time).")
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if said, err := memlimit.Apply(os.Getenv); err != nil {
		setupLog.Error(err, "unable to set the soft memory limit")
		os.Exit(1)
	} else {
		setupLog.Info(said)
	}

	if armed, err := failpoint.ArmFromEnv(); err != nil {
		setupLog.Error(err, "unable to arm failpoints")
		os.Exit(1)
	} else if len(armed) > 0 {
		setupLog.Info("failpoints armed: this operator crashes on purpose", "armed", armed)
	}

	options := resources.DefaultOptions()
	options.ClusterDomain = clusterDomain
	options.OperatorImage = envOr("OPERATOR_IMAGE", options.OperatorImage)
	options.RelatedImages = resources.RelatedImagesFromEnv(os.Environ())
	options.OperatorNamespace = os.Getenv("OPERATOR_NAMESPACE")

	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics, TLSOpts: tlsOpts}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	restConfig := ctrl.GetConfigOrDie()
	var leaderLock resourcelock.Interface
	if enableLeaderElection {
		var err error
		if leaderLock, err = controllers.LeaderLock(restConfig, options.OperatorNamespace, os.Getenv("POD_NAME")); err != nil {
			setupLog.Error(err, "unable to create the leader election lock")
			os.Exit(1)
		}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                              scheme,
		Metrics:                             metricsOpts,
		HealthProbeBindAddress:              probeAddr,
		LeaderElection:                      enableLeaderElection,
		LeaderElectionID:                    controllers.LeaderElectionID,
		LeaderElectionResourceLockInterface: leaderLock,
		LeaderElectionReleaseOnCancel:       true,
		Cache:                               controllers.CacheOptions(os.Getenv("WATCH_NAMESPACE")),
	})
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		os.Exit(1)
	}

	if err := controllers.Setup(mgr, controllers.Config{Options: options, HealAfter: healAfter, HealthInterval: healthInterval,
		MaxConcurrentReconciles: maxConcurrentReconciles}); err != nil {
		setupLog.Error(err, "unable to create controllers")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "unable to set up ready check")
		os.Exit(1)
	}
	setupLog.Info("starting manager", "watchNamespaces", os.Getenv("WATCH_NAMESPACE"), "clusterDomain", clusterDomain)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		failpoint.RecordExit(err.Error())
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}
