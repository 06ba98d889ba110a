// Package failpoint crashes the operator at named points, so tests can prove that every step of scaling,
// upgrading, healing, restoring and certificate rotation resumes after a crash right after it. Failpoints
// exist only in builds with the `failpoints` tag (the test suites'); release builds compile Inject to
// nothing.
package failpoint

// Names of the failpoints: each fires right after the step it names has taken effect.
const (
	// AfterMembershipStep fires after any planned membership step (add learner, promote, remove, move
	// leader, delete a pod for an upgrade or heal, mark or delete a volume).
	AfterMembershipStep = "after-membership-step"
	// AfterStatefulSetApply fires after the StatefulSet changed (a new size, image or restore source).
	AfterStatefulSetApply = "after-statefulset-apply"
	// AfterCertificateIssued fires after a certificate Secret was written (issue or renewal).
	AfterCertificateIssued = "after-certificate-issued"
)

// All is every failpoint.
var All = []string{AfterMembershipStep, AfterStatefulSetApply, AfterCertificateIssued}

// Process crashes (ArmFromEnv), for e2e tests of a failpoint build of the operator image.
const (
	// EnvFailpoints arms failpoints at start: "name=count,name=count".
	EnvFailpoints = "ETCD_OPERATOR_FAILPOINTS"
	// EnvStateDir is where fired failpoints are counted; it must outlive the process (an emptyDir).
	EnvStateDir = "ETCD_OPERATOR_FAILPOINT_STATE"
	// ExitCode is the exit code of a process a failpoint ended.
	ExitCode = 77
	// TerminationLog receives "failpoint <name> fired (<n>)", so the pod's status says which one fired.
	TerminationLog = "/dev/termination-log"
	// ExitsFile, in EnvStateDir, lists the exits the process chose itself (RecordExit), one reason a line:
	// with the failpoints' counts it accounts for every restart of the container.
	ExitsFile = "exits"
	// ExitPrefix starts the termination message of an exit RecordExit recorded.
	ExitPrefix = "operator stopped: "
)

// Crash is the panic value of a failpoint that fired.
type Crash struct{ Name string }
