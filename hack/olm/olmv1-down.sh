#!/usr/bin/env bash
# Removes OLM v1 from the local node: ClusterExtensions first (while operator-controller still runs, so it removes
# what it installed), the ClusterCatalogs, then everything olmv1-up applied. Idempotent.
source "$(dirname "$0")/lib.sh"
[ -f "$KUBECONFIG_PATH" ] || { log "no node: nothing to do"; exit 0; }
if kc get crd clusterextensions.olm.operatorframework.io >/dev/null 2>&1; then
  kc delete clusterextensions.olm.operatorframework.io --all --wait=true --timeout=120s >/dev/null || true
  kc delete clustercatalogs.olm.operatorframework.io --all --wait=true --timeout=60s >/dev/null || true
fi
if [ -f "$OLM_WORK/olmv1/olmv1.yaml" ]; then
  kc delete --ignore-not-found --wait=true --timeout=120s -f "$OLM_WORK/olmv1/olmv1.yaml" >/dev/null || true
fi
log "OLM v1 removed"
