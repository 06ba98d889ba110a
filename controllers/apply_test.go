package controllers

import (
	"testing"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

func TestNoopCacheKeysOnResourceVersionAndDesiredHash(t *testing.T) {
	a := corev1ac.ConfigMap("c", "ns").WithData(map[string]string{"k": "v"})
	b := corev1ac.ConfigMap("c", "ns").WithData(map[string]string{"k": "other"})
	ha, err := hashOf(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := hashOf(b)
	if ha == hb {
		t.Fatal("different desired configurations hash alike")
	}
	n := &noopCache{entries: map[string]noopEntry{}}
	n.set("cm", "10", ha)
	if !n.is("cm", "10", ha) {
		t.Fatal("unchanged object and desired configuration not remembered")
	}
	if n.is("cm", "11", ha) || n.is("cm", "10", hb) || n.is("other", "10", ha) || n.is("cm", "", ha) {
		t.Fatal("a changed object or desired configuration must be compared in full")
	}
	n.forget("cm")
	if n.is("cm", "10", ha) {
		t.Fatal("forgotten entry still used")
	}
}

func TestResourceVersionOfAnApplyResponse(t *testing.T) {
	ac := corev1ac.ConfigMap("c", "ns").WithResourceVersion("42")
	if got := resourceVersionOf(ac); got != "42" {
		t.Fatalf("resourceVersion %q, want 42", got)
	}
	if got := resourceVersionOf(&corev1ac.ConfigMapApplyConfiguration{}); got != "" {
		t.Fatalf("resourceVersion %q of empty metadata, want none", got)
	}
	if got := resourceVersionOf(corev1ac.ConfigMap("c", "ns")); got != "" {
		t.Fatalf("resourceVersion %q, want none", got)
	}
}
