package controllers

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNamespaceTerminating(t *testing.T) {
	services := schema.GroupResource{Resource: "services"}
	ending := apierrors.NewForbidden(services, "c-client", errors.New("unable to create new content in namespace ns because it is being terminated"))
	ending.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "ns"}}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"no error":                          {nil, false},
		"refused in a namespace going":      {ending, true},
		"the same, wrapped by its phase":    {fmt.Errorf("apply *v1.Service ns/c-client: %w", ending), true},
		"forbidden by RBAC":                 {apierrors.NewForbidden(services, "c-client", errors.New("RBAC")), false},
		"a conflict":                        {apierrors.NewConflict(services, "c-client", errors.New("changed")), false},
		"not an API error":                  {errors.New("dial tcp: i/o timeout"), false},
		"the namespace's message, no cause": {errors.New("because it is being terminated"), false},
	} {
		if got := namespaceTerminating(tc.err); got != tc.want {
			t.Errorf("%s: namespaceTerminating = %v, want %v", name, got, tc.want)
		}
	}
}
