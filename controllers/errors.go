package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// waitError is a failure that no watched event will end (a Secret the user must create, which the operator
// does not watch): status reports it, and the reconcile is retried at a fixed interval instead of with the
// ever longer backoff of errors.
type waitError struct {
	error
	after time.Duration
}

func (e waitError) Unwrap() error { return e.error }

// namespaceTerminating reports a write refused because the object's namespace is being deleted: the
// namespace's deletion takes the cluster and everything the operator made for it, so no retry can help,
// and reporting it as a failure would only fill the log while the namespace goes.
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
