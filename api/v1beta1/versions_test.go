package v1beta1_test

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/randfill"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/seedops/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/seedops/etcd-operator/api/v1beta1"
)

// storageVersion is the version new writes are stored as (docs/api-versions.md).
const storageVersion = "v1beta1"

// crdFiles are the generated CRDs of the group.
var crdFiles = []string{"etcd.seedops.io_etcdclusters.yaml", "etcd.seedops.io_etcdbackups.yaml"}

// TestServedVersionsHaveOneSchema: the rule that keeps round trips lossless without a conversion webhook.
// While two versions are served, the CRD converts with None (the API server only rewrites apiVersion), so
// every served version must have exactly the storage version's schema, subresources and columns: a field
// one version lacks would be pruned from objects written through the other.
func TestServedVersionsHaveOneSchema(t *testing.T) {
	for _, name := range crdFiles {
		b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", name))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
			t.Errorf("%s: conversion %q: the versions must share one schema, converted by None", name, crd.Spec.Conversion.Strategy)
		}
		var storage *apiextensionsv1.CustomResourceDefinitionVersion
		for i, v := range crd.Spec.Versions {
			if v.Storage {
				if storage != nil {
					t.Fatalf("%s: two storage versions", name)
				}
				storage = &crd.Spec.Versions[i]
			}
		}
		if storage == nil || storage.Name != storageVersion {
			t.Fatalf("%s: the storage version is not %s", name, storageVersion)
		}
		served := 0
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			served++
			if !equality.Semantic.DeepEqual(v.Schema, storage.Schema) {
				t.Errorf("%s: version %s's schema differs from %s's", name, v.Name, storage.Name)
			}
			if !equality.Semantic.DeepEqual(v.Subresources, storage.Subresources) ||
				!equality.Semantic.DeepEqual(v.AdditionalPrinterColumns, storage.AdditionalPrinterColumns) ||
				!equality.Semantic.DeepEqual(v.SelectableFields, storage.SelectableFields) {
				t.Errorf("%s: version %s's subresources, columns or selectable fields differ from %s's", name, v.Name, storage.Name)
			}
			if v.Name == etcdv1alpha1.GroupVersion.Version && (!v.Deprecated || v.DeprecationWarning == nil ||
				!bytes.Contains([]byte(*v.DeprecationWarning), []byte(etcdv1beta1.GroupVersion.String()))) {
				t.Errorf("%s: %s is served without a deprecation warning that names %s", name, v.Name, etcdv1beta1.GroupVersion)
			}
		}
		if served != 2 {
			t.Errorf("%s: %d versions served, want v1alpha1 and v1beta1", name, served)
		}
	}
}

// FuzzVersionRoundTrip: any object, every field of spec and status filled at random, reads the same through
// either version's Go types: v1beta1's JSON decodes strictly into v1alpha1 (no field unknown to it) and
// encodes to the same bytes, and back. (The envtest round trip in validation_test.go proves the same
// through a real API server with objects it accepts.)
func FuzzVersionRoundTrip(f *testing.F) {
	for seed := range int64(64) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		filler := randfill.New().RandSource(rand.NewSource(seed)).NilChance(0.2).NumElements(0, 3)
		// (Object metadata is the API server's, the same in every version: only spec and status are filled.)
		c := &etcdv1beta1.EtcdCluster{}
		filler.Fill(&c.Spec)
		filler.Fill(&c.Status)
		roundTrip(t, c, &etcdv1alpha1.EtcdCluster{})
		b := &etcdv1beta1.EtcdBackup{}
		filler.Fill(&b.Spec)
		filler.Fill(&b.Status)
		roundTrip(t, b, &etcdv1alpha1.EtcdBackup{})
	})
}

// roundTrip decodes from's JSON strictly into to, and checks that to encodes to the same JSON and decodes
// back into an object equal to from.
func roundTrip(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	strict(t, b, to)
	b2, err := json.Marshal(to)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("%T and %T encode differently:\n%s\n%s", from, to, b, b2)
	}
	back := reflect.New(reflect.TypeOf(from).Elem()).Interface()
	strict(t, b2, back)
	if !equality.Semantic.DeepEqual(from, back) {
		t.Fatalf("%T changed on its way through %T:\n%s", from, to, b)
	}
}

func strict(t *testing.T, b []byte, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%T: %v", into, err)
	}
}
