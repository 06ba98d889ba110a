package kubectlplugin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// waitForBackup watches the backup until its phase is final (Succeeded or Failed) and returns it. progress
// is called with the backup each time its phase, Job or error changes, starting with b's own state. The
// watch resumes from the last seen resourceVersion when the API server ends it, and starts over from a
// fresh read when that version has expired.
func waitForBackup(ctx context.Context, c client.WithWatch, b *etcdv1beta1.EtcdBackup, progress func(*etcdv1beta1.EtcdBackup)) (*etcdv1beta1.EtcdBackup, error) {
	last := b.DeepCopy()
	progress(last)
	rv := last.ResourceVersion
	for !final(last) {
		w, err := c.Watch(ctx, &etcdv1beta1.EtcdBackupList{}, &client.ListOptions{
			Namespace:     b.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", b.Name),
			Raw:           &metav1.ListOptions{ResourceVersion: rv},
		})
		if err != nil {
			return nil, fmt.Errorf("watch EtcdBackup %q: %w", b.Name, err)
		}
		rv, err = follow(ctx, w, &last, progress)
		w.Stop()
		if err != nil {
			return nil, err
		}
		if rv == "" { // the version expired: read the backup again and watch from there
			fresh := &etcdv1beta1.EtcdBackup{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(b), fresh); err != nil {
				return nil, describeGetError(err, "EtcdBackup", b.Name, b.Namespace)
			}
			report(&last, fresh, progress)
			rv = fresh.ResourceVersion
		}
	}
	return last, nil
}

// follow consumes one watch until the backup is final, the watch ends (returning the version to resume
// from) or the version expired (returning "").
func follow(ctx context.Context, w watch.Interface, last **etcdv1beta1.EtcdBackup, progress func(*etcdv1beta1.EtcdBackup)) (string, error) {
	rv := (*last).ResourceVersion
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			switch ev.Type {
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
					return "", nil
				}
				return "", fmt.Errorf("watch EtcdBackup %q: %w", (*last).Name, apierrors.FromObject(ev.Object))
			case watch.Deleted:
				return "", fmt.Errorf("EtcdBackup %q was deleted before it finished", (*last).Name)
			case watch.Added, watch.Modified:
				b, ok := ev.Object.(*etcdv1beta1.EtcdBackup)
				if !ok {
					continue
				}
				rv = b.ResourceVersion
				report(last, b, progress)
				if final(b) {
					return rv, nil
				}
			}
		}
	}
}

// report calls progress when what the user sees changed.
func report(last **etcdv1beta1.EtcdBackup, b *etcdv1beta1.EtcdBackup, progress func(*etcdv1beta1.EtcdBackup)) {
	prev := (*last).Status
	*last = b
	if prev.Phase != b.Status.Phase || prev.JobName != b.Status.JobName || prev.Error != b.Status.Error {
		progress(b)
	}
}

func final(b *etcdv1beta1.EtcdBackup) bool {
	return b.Status.Phase == etcdv1beta1.BackupSucceeded || b.Status.Phase == etcdv1beta1.BackupFailed
}
