#!/usr/bin/env bash
# Removes OLM v0 from the local node: first every Subscription, CSV and InstallPlan (while OLM still runs, so it
# removes what it created for them), the CatalogSources and packageserver, then OLM itself and its CRDs. Idempotent.
source "$(dirname "$0")/lib.sh"
[ -f "$KUBECONFIG_PATH" ] || { log "no node: nothing to do"; exit 0; }
if kc get crd subscriptions.operators.coreos.com >/dev/null 2>&1; then
  kc delete subscriptions.operators.coreos.com --all -A --wait=true --timeout=60s >/dev/null || true
  # Every CSV, packageserver's last: OLM removes their finalizers and what they own (packageserver's APIService).
  kc get csv -A --no-headers -o custom-columns=NS:.metadata.namespace,N:.metadata.name 2>/dev/null |
    while read -r ns name; do
      [ "$ns/$name" = "$OLM_NAMESPACE/packageserver" ] || kc -n "$ns" delete csv "$name" --wait=true --timeout=60s >/dev/null || true
    done
  kc delete installplans.operators.coreos.com --all -A --timeout=60s >/dev/null || true
  kc delete catalogsources.operators.coreos.com --all -A --timeout=60s >/dev/null || true
  kc -n "$OLM_NAMESPACE" delete csv packageserver --ignore-not-found --wait=true --timeout=60s >/dev/null || true
fi
# An APIService left without its backend blocks the deletion of every namespace (discovery fails).
kc delete apiservice v1.packages.operators.coreos.com --ignore-not-found >/dev/null
if [ -f "$OLM_WORK/manifests/olm.yaml" ]; then
  kc delete --ignore-not-found --wait=true --timeout=120s -f "$OLM_WORK/manifests/olm.yaml" >/dev/null || true
  kc delete --ignore-not-found --wait=true --timeout=120s -f "$OLM_WORK/manifests/crds" >/dev/null || true
fi
log "OLM removed"
