package controllers

import "time"

// waitError is a failure that no watched event will end (a Secret the user must create, which the operator
// does not watch): status reports it, and the reconcile is retried at a fixed interval instead of with the
// ever longer backoff of errors.
type waitError struct {
	error
	after time.Duration
}

func (e waitError) Unwrap() error { return e.error }
