package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// EtcdContainerName is the member pods' etcd container.
const EtcdContainerName = "etcd"

// containerCannotRun: the kubelet's waiting reasons that waiting does not cure (an image that cannot be
// had, a configuration the container cannot be created with, a crash loop), unlike the passing states of
// a container that is being started (ContainerCreating, PodInitializing).
var containerCannotRun = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// ContainerStartFailures says, for each container of the pod that the kubelet cannot run (init containers
// first, in the order they run), which container, its image, and the kubelet's reason and message:
// `container etcd (image registry/etcd:v3.5.99): ErrImagePull: <message>`. A crash loop adds why the
// container last failed (ContainerFailure), which the waiting reason does not say.
func ContainerStartFailures(p *corev1.Pod) []string {
	var out []string
	for _, list := range []struct {
		statuses []corev1.ContainerStatus
		specs    []corev1.Container
	}{{p.Status.InitContainerStatuses, p.Spec.InitContainers}, {p.Status.ContainerStatuses, p.Spec.Containers}} {
		for _, cs := range list.statuses {
			w := cs.State.Waiting
			if w == nil || !containerCannotRun[w.Reason] {
				continue
			}
			image := cs.Image
			for _, ctr := range list.specs {
				if ctr.Name == cs.Name {
					image = ctr.Image // the status names the image only once it is pulled
				}
			}
			msg := fmt.Sprintf("container %s (image %s): %s", cs.Name, image, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if last, failed := ContainerFailure(cs); failed && w.Reason == "CrashLoopBackOff" && last != "" {
				msg += ": " + last
			}
			out = append(out, msg)
		}
	}
	return out
}

// EtcdNeverRan reports that etcd has never run in this pod: the kubelet reports its etcd container
// waiting (for its image, its init containers, its creation), never started, never restarted and never
// terminated. Such a pod serves nothing and votes for nothing; its volume holds at most what its init
// containers left there, and stays when the pod is replaced. A pod the kubelet has not reported on is not
// judged: nothing shows that it never ran.
func EtcdNeverRan(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != EtcdContainerName {
			continue
		}
		return cs.State.Waiting != nil && cs.State.Running == nil && cs.State.Terminated == nil &&
			cs.RestartCount == 0 && cs.LastTerminationState.Running == nil && cs.LastTerminationState.Terminated == nil &&
			(cs.Started == nil || !*cs.Started) && !cs.Ready
	}
	return false
}
