// Package v1beta1 contains the v1beta1 API of the etcd.seedops.io group.
// +kubebuilder:object:generate=true
// +groupName=etcd.seedops.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "etcd.seedops.io", Version: "v1beta1"}

	// SchemeBuilder is used to add Go types to the GroupVersionKind scheme.
	// (controller-runtime deprecates this helper for API packages others import; the types register with
	// it in the kubebuilder layout, and this module is the API's only importer.)
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // see above

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
