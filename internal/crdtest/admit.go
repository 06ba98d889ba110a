// Package crdtest evaluates a generated CRD's validation in process, with the API server's own code: the
// custom resource name check, structural defaulting, the OpenAPI schema and the x-kubernetes-validations
// CEL rules (same CEL environment and cost limits as kube-apiserver). Fuzz targets use it to ask "would the
// API server accept this object (or this update)?" thousands of times a second; the envtest suites remain
// the proof against a real API server.
package crdtest

import (
	"context"
	"fmt"
	"os"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Admitter validates objects of one CRD version as the API server would on create and update.
type Admitter struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// Load reads a CRD manifest (config/crd/bases/...) and prepares the validation of its storage version.
func Load(path string) (*Admitter, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var v1 *apiextensionsv1.CustomResourceValidation
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			v1 = v.Schema
		}
	}
	if v1 == nil {
		return nil, fmt.Errorf("%s: no storage version with a schema", path)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1, internal, nil); err != nil {
		return nil, err
	}
	ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	return &Admitter{structural: ss, schema: sv, cel: cel.NewValidator(ss, true, celconfig.PerCallLimit)}, nil
}

// Create defaults obj (an unstructured object: apiVersion, kind, metadata.name, spec, ...) in place and
// returns the errors the API server would answer a create with.
func (a *Admitter) Create(obj map[string]any) field.ErrorList {
	return a.validate(obj, nil)
}

// Update defaults both objects in place and returns the errors of updating old to obj (transition rules).
func (a *Admitter) Update(old, obj map[string]any) field.ErrorList {
	return a.validate(obj, old)
}

func (a *Admitter) validate(obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	if meta, ok := obj["metadata"].(map[string]any); ok {
		n, _ := meta["name"].(string)
		for _, msg := range validation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), n, msg))
		}
	} else {
		errs = append(errs, field.Required(field.NewPath("metadata"), ""))
	}
	structuraldefaulting.Default(obj, a.structural)
	if old != nil {
		structuraldefaulting.Default(old, a.structural)
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, a.schema)...)
	if a.cel != nil {
		var oldObj any
		if old != nil {
			oldObj = old
		}
		celErrs, _ := a.cel.Validate(context.Background(), nil, a.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}
