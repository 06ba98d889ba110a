//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
	"github.com/seedops/etcd-operator/tests/framework"
)

// minioImage is MinIO built from its Go module by `make minio` and pushed by hack/node/images.sh.
var minioImage = framework.Env("E2E_MINIO_IMAGE", "localhost:5000/minio:e2e")

var _ = Describe("Backups and restore", Label("backup"), func() {
	It("restores 10,000 keys from a scheduled backup into a new cluster after the source is deleted", func() {
		ns := fw.NewNamespace("backup")
		src := fw.NewCluster(ns, "source", etcdVersion, 3)
		src.Spec.BackupSchedule = "* * * * *" // every minute: the test waits for the next run
		src.Spec.Backup.Retention = 3
		Expect(k8s.Create(ctx, src)).To(Succeed())
		fw.WaitAvailable(src, 3*time.Minute)

		By("writing 10,000 keys")
		start := time.Now()
		want, rev := writeKeys(src, "/e2e/keys", 10000)
		framework.ReportDuration("write 10,000 keys", time.Since(start))
		oldID := clusterID(src)

		By("waiting for a scheduled backup that holds every write")
		start = time.Now()
		var location string
		Eventually(func(g Gomega) {
			cur := fw.GetCluster(src)
			cond := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionBackupSucceeded)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
			g.Expect(cur.Status.LastBackupLocation).NotTo(BeEmpty())
			g.Expect(revisionOf(cur.Status.LastBackupLocation)).To(BeNumerically(">=", rev), "a backup taken before the writes ended")
			location = cur.Status.LastBackupLocation
		}).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		framework.ReportDuration("scheduled backup with every write", time.Since(start))
		Expect(location).To(HavePrefix("pvc://source-backups/" + ns + "/source/scheduled/source-"))

		By("deleting the source cluster; its backup claim stays")
		Expect(k8s.Delete(ctx, src)).To(Succeed())
		fw.ExpectGone(src, 2*time.Minute)
		Eventually(func() []corev1.Pod { return fw.MemberPods(src) }).WithTimeout(2 * time.Minute).Should(BeEmpty())
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "source-backups"}, &corev1.PersistentVolumeClaim{})).To(Succeed())

		By("restoring into a new cluster")
		restored := fw.NewCluster(ns, "restored", etcdVersion, 3)
		restored.Spec.BackupSchedule = ""
		restored.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{
			PVC: &etcdv1beta1.PVCBackupDestination{ClaimName: "source-backups"},
			Key: strings.TrimPrefix(location, "pvc://source-backups/"),
		}}
		Expect(k8s.Create(ctx, restored)).To(Succeed())
		framework.ReportDuration("restored cluster Available", fw.WaitAvailable(restored, 4*time.Minute))
		expectKeys(restored, "/e2e/keys", want)
		Expect(clusterID(restored)).NotTo(Equal(oldID), "a restored cluster gets a new cluster ID")
		// Recorded once every member has restored: Available needs only a quorum of them.
		Eventually(func() string { return fw.GetCluster(restored).Status.RestoredFrom }).
			WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal(location))
	})

	It("takes an on-demand EtcdBackup to an S3 object store and restores a new cluster from it", func() {
		ns := fw.NewNamespace("s3")
		s3 := startMinIO(ns)

		src := fw.NewCluster(ns, "s3-source", etcdVersion, 1)
		src.Spec.BackupSchedule = ""
		Expect(k8s.Create(ctx, src)).To(Succeed())
		fw.WaitAvailable(src, 3*time.Minute)
		want, rev := writeKeys(src, "/e2e/s3", 1000)

		By("taking an on-demand backup to the bucket")
		b := &etcdv1beta1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-upgrade"},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterName: src.Name, Destination: &etcdv1beta1.BackupDestination{
				S3: &etcdv1beta1.S3BackupDestination{Endpoint: s3.inCluster, Bucket: "etcd-backups", Prefix: "e2e", CredentialsSecretName: "s3-credentials"},
			}},
		}
		start := time.Now()
		Expect(k8s.Create(ctx, b)).To(Succeed())
		waitBackupSucceeded(b)
		framework.ReportDuration("on-demand backup to S3", time.Since(start))
		Expect(b.Status.Revision).To(BeNumerically(">=", rev))
		Expect(b.Status.Location).To(Equal("s3://etcd-backups/" + b.Status.Key))
		Expect(b.Status.Key).To(HavePrefix("e2e/" + ns + "/s3-source/on-demand/s3-source-"))
		obj, err := s3.client.StatObject(ctx, "etcd-backups", b.Status.Key, minio.StatObjectOptions{})
		Expect(err).NotTo(HaveOccurred(), "the snapshot is in the bucket")
		Expect(obj.Size).To(Equal(b.Status.SizeBytes))

		By("restoring a new 3-member cluster from the EtcdBackup")
		restored := fw.NewCluster(ns, "s3-restored", etcdVersion, 3)
		restored.Spec.BackupSchedule = ""
		restored.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{FromBackup: &etcdv1beta1.BackupSource{BackupName: b.Name}}
		Expect(k8s.Create(ctx, restored)).To(Succeed())
		framework.ReportDuration("cluster restored from S3 Available", fw.WaitAvailable(restored, 4*time.Minute))
		expectKeys(restored, "/e2e/s3", want)
	})
})

// writeKeys writes n keys under prefix in transactions of 100 and returns them with the revision of the
// last write.
func writeKeys(c *etcdv1beta1.EtcdCluster, prefix string, n int) (map[string]string, int64) {
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	want := make(map[string]string, n)
	var rev int64
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100 && j < n; j++ {
			k, v := fmt.Sprintf("%s/%06d", prefix, j), fmt.Sprintf("value-%d-%s", j, strings.Repeat("x", 64))
			want[k] = v
			ops = append(ops, clientv3.OpPut(k, v))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		rev = resp.Header.Revision
	}
	return want, rev
}

// expectKeys reads every key under prefix and compares them with want.
func expectKeys(c *etcdv1beta1.EtcdCluster, prefix string, want map[string]string) {
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, resp.Kvs).To(HaveLen(len(want)))
	for _, kv := range resp.Kvs {
		ExpectWithOffset(1, string(kv.Value)).To(Equal(want[string(kv.Key)]), string(kv.Key))
	}
}

func clusterID(c *etcdv1beta1.EtcdCluster) uint64 {
	cli := fw.ClusterClient(c)
	defer func() { _ = cli.Close() }()
	resp, err := cli.Get(ctx, "cluster-id-probe")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp.Header.ClusterId
}

var revisionRE = regexp.MustCompile(`-r([0-9]+)\.db$`)

// revisionOf reads the revision from a snapshot's name (<cluster>-<time>-r<revision>.db).
func revisionOf(location string) int64 {
	m := revisionRE.FindStringSubmatch(location)
	if m == nil {
		return -1
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	return rev
}

type minioServer struct {
	inCluster string
	client    *minio.Client
}

// startMinIO runs a MinIO server (restricted pod) in ns with a bucket etcd-backups and the Secret
// s3-credentials the operator's backup pods read.
func startMinIO(ns string) minioServer {
	const user, password = "etcd-operator-e2e", "etcd-operator-e2e-secret"
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-credentials"},
		StringData: map[string]string{"accessKeyID": user, "secretAccessKey": password},
	})).To(Succeed())
	labels := map[string]string{"app": "minio"}
	Expect(k8s.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minio"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
						FSGroup: ptr.To(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "minio", Image: minioImage, Args: []string{"server", "/data", "--address", ":9000", "--quiet"},
						Env: []corev1.EnvVar{{Name: "MINIO_ROOT_USER", Value: user}, {Name: "MINIO_ROOT_PASSWORD", Value: password},
							{Name: "MINIO_BROWSER", Value: "off"}, {Name: "HOME", Value: "/tmp"}},
						Ports: []corev1.ContainerPort{{ContainerPort: 9000}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/minio/health/ready", Port: intstr.FromInt32(9000)}}, PeriodSeconds: 1},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "tmp", MountPath: "/tmp"}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	})).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "minio"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 9000, TargetPort: intstr.FromInt32(9000)}}},
	}
	Expect(k8s.Create(ctx, svc)).To(Succeed())
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "minio"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(1)))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	// The host reaches the Service's cluster IP on the local node.
	mc, err := minio.New(svc.Spec.ClusterIP+":9000", &minio.Options{Creds: credentials.NewStaticV4(user, password, "")})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error { return mc.MakeBucket(ctx, "etcd-backups", minio.MakeBucketOptions{}) }).
		WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	return minioServer{inCluster: "http://minio." + ns + ".svc:9000", client: mc}
}

// waitBackupSucceeded waits until the EtcdBackup has succeeded; a timeout after a failed run names its error.
func waitBackupSucceeded(b *etcdv1beta1.EtcdBackup) {
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
		g.Expect(b.Status.Phase).NotTo(Equal(etcdv1beta1.BackupFailed), b.Status.Error)
		g.Expect(b.Status.Phase).To(Equal(etcdv1beta1.BackupSucceeded))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}
