package kubectlplugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// The API server is started once, by the first test that needs it; tests that need none (golden files,
// argument construction) run without envtest's binaries.
var (
	envOnce    sync.Once
	env        *envtest.Environment
	envClient  client.Client
	kubeconfig string
	envErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

// apiServer returns a client of the envtest API server (with the CRDs installed) and a kubeconfig file
// pointing at it, for the commands to use as a user's would.
func apiServer(t *testing.T) (client.Client, string) {
	t.Helper()
	envOnce.Do(func() {
		env = &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
		}
		cfg, err := env.Start()
		if err != nil {
			envErr = err
			return
		}
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = etcdv1beta1.AddToScheme(scheme)
		if envClient, envErr = client.New(cfg, client.Options{Scheme: scheme}); envErr != nil {
			return
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
		kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: "default"}
		kc.CurrentContext = "envtest"
		dir, err := os.MkdirTemp("", "kubectl-etcd-envtest")
		if err != nil {
			envErr = err
			return
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		envErr = clientcmd.WriteToFile(*kc, kubeconfig)
	})
	if envErr != nil {
		t.Fatalf("envtest needs KUBEBUILDER_ASSETS (make envtest, or `make test`): %v", envErr)
	}
	return envClient, kubeconfig
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubectl-etcd-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// run executes `kubectl etcd args...` against the envtest API server.
func run(ctx context.Context, kubeconfig string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRootCommand(Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, "test")
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestStatusThroughAPIServer(t *testing.T) {
	c, kc := apiServer(t)
	ctx := context.Background()
	ns := namespace(t, c)

	fixture := healthyCluster()
	ec := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: fixture.Name, Namespace: ns}, Spec: fixture.Spec}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}

	out, _, err := run(ctx, kc, "status", ec.Name, "-n", ns)
	if err != nil || !strings.Contains(out, "No status yet") {
		t.Fatalf("before the operator wrote status: err %v, output:\n%s", err, out)
	}

	// The status subresource, as the operator writes it.
	ec.Status = fixture.Status
	ec.Status.ObservedGeneration = ec.Generation
	ec.Status.Alarms = []string{"NOSPACE on prod-etcd-1"}
	if err := c.Status().Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	out, _, err = run(ctx, kc, "status", ec.Name, "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"EtcdCluster prod-etcd in namespace " + ns, "Phase:     Running", "3 desired, 3 ready",
		"prod-etcd-0  8e9e05c52164694d  voter  *       yes      3.5.17   41.0 MiB  24.0 MiB  41%",
		"NOSPACE on prod-etcd-1", "Available        True    QuorumHealthy", "prod-etcd-client-tls",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour written to a buffer")
	}

	out, _, err = run(ctx, kc, "status", ec.Name, "-n", ns, "-o", "yaml")
	if err != nil || !strings.Contains(out, "kind: EtcdCluster") || !strings.Contains(out, "dbSizeInUseBytes: 25165824") {
		t.Errorf("-o yaml: err %v, output:\n%s", err, out)
	}

	_, _, err = run(ctx, kc, "status", "missing", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), `EtcdCluster "missing" not found in namespace "`+ns+`"`) {
		t.Errorf("missing cluster: got error %v", err)
	}
}

func TestBackupThroughAPIServer(t *testing.T) {
	c, kc := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := namespace(t, c)
	ec := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: ns}, Spec: healthyCluster().Spec}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}

	t.Run("succeeds", func(t *testing.T) {
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, _, err := run(ctx, kc, "backup", ec.Name, "-n", ns, "--name", "before-upgrade", "--timeout", "30s")
			done <- result{out, err}
		}()
		b := createdBackup(ctx, t, c, ns, "before-upgrade")
		if diff := b.Spec; diff.ClusterName != ec.Name || diff.Destination != nil {
			t.Errorf("spec = %+v, want clusterName %s and no destination (the cluster's spec.backup applies)", b.Spec, ec.Name)
		}
		start := metav1.Now()
		setBackupStatus(ctx, t, c, b, etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupRunning, JobName: "before-upgrade-backup", StartTime: &start})
		end := metav1.NewTime(start.Add(4 * time.Second))
		setBackupStatus(ctx, t, c, b, etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, JobName: "before-upgrade-backup",
			StartTime: &start, CompletionTime: &end, Revision: 50877, SizeBytes: 25 * mib, EtcdVersion: "3.5.17",
			Location: "pvc://prod-etcd-backups/" + ns + "/prod-etcd/ondemand/before-upgrade.db"})
		r := <-done
		if r.err != nil {
			t.Fatalf("backup: %v\n%s", r.err, r.out)
		}
		for _, want := range []string{"etcdbackup.etcd.seedops.io/before-upgrade created", "phase Running, Job before-upgrade-backup",
			"Backup before-upgrade succeeded", "Revision:  50877", "Size:      25.0 MiB (26214400 bytes)", "ondemand/before-upgrade.db"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
	})

	t.Run("fails", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, _, err := run(ctx, kc, "backup", ec.Name, "-n", ns, "--name", "doomed", "--timeout", "30s")
			done <- err
		}()
		b := createdBackup(ctx, t, c, ns, "doomed")
		setBackupStatus(ctx, t, c, b, etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupFailed, Error: "BackoffLimitExceeded: snapshot: context deadline exceeded"})
		if err := <-done; err == nil || !strings.Contains(err.Error(), "backup doomed failed: BackoffLimitExceeded") {
			t.Errorf("got error %v, want the backup's error", err)
		}
	})

	t.Run("times out", func(t *testing.T) {
		_, _, err := run(ctx, kc, "backup", ec.Name, "-n", ns, "--name", "slow", "--timeout", "500ms")
		if err == nil || !strings.Contains(err.Error(), "has not finished after 500ms") {
			t.Errorf("got error %v", err)
		}
	})

	t.Run("cluster missing", func(t *testing.T) {
		_, _, err := run(ctx, kc, "backup", "nope", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), `EtcdCluster "nope" not found in namespace "`+ns+`"`) {
			t.Errorf("got error %v", err)
		}
	})
}

// createdBackup waits for the command under test to create the EtcdBackup.
func createdBackup(ctx context.Context, t *testing.T, c client.Client, ns, name string) *etcdv1beta1.EtcdBackup {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{}
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b)
		if err == nil {
			return b
		}
		if ctx.Err() != nil {
			t.Fatalf("EtcdBackup %s never created: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func setBackupStatus(ctx context.Context, t *testing.T, c client.Client, b *etcdv1beta1.EtcdBackup, st etcdv1beta1.EtcdBackupStatus) {
	t.Helper()
	b.Status = st
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
}

func TestDefragThroughAPIServer(t *testing.T) {
	c, kc := apiServer(t)
	ctx := context.Background()
	ns := namespace(t, c)
	ec := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-etcd", Namespace: ns, Annotations: map[string]string{"team": "storage"}},
		Spec: healthyCluster().Spec}
	if err := c.Create(ctx, ec); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC()
	out, _, err := run(ctx, kc, "defrag", ec.Name, "-n", ns)
	if err != nil {
		t.Fatalf("defrag: %v\n%s", err, out)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		t.Fatal(err)
	}
	request, err := time.Parse(time.RFC3339Nano, ec.Annotations[etcdv1beta1.DefragmentAnnotation])
	if err != nil || request.Before(before.Truncate(time.Second)) {
		t.Fatalf("annotation %q = %q (%v): want the time of the request", etcdv1beta1.DefragmentAnnotation, ec.Annotations[etcdv1beta1.DefragmentAnnotation], err)
	}
	if ec.Annotations["team"] != "storage" {
		t.Errorf("annotations %v: the others must stay", ec.Annotations)
	}
	for _, want := range []string{"etcdcluster.etcd.seedops.io/prod-etcd: defragmentation requested", "kubectl etcd status prod-etcd -n " + ns} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A second request gets a new value: the operator starts a sweep for each new value.
	if _, _, err := run(ctx, kc, "defrag", ec.Name, "-n", ns); err != nil {
		t.Fatal(err)
	}
	first := ec.Annotations[etcdv1beta1.DefragmentAnnotation]
	if err := c.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
		t.Fatal(err)
	}
	if ec.Annotations[etcdv1beta1.DefragmentAnnotation] == first {
		t.Errorf("a second request kept the value %q", first)
	}

	_, _, err = run(ctx, kc, "defrag", "missing", "-n", ns)
	if err == nil || !strings.Contains(err.Error(), `EtcdCluster "missing" not found in namespace "`+ns+`"`) {
		t.Errorf("missing cluster: got error %v", err)
	}
}
