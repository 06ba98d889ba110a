#!/usr/bin/env bash
# Installs OLM v0 on the running local node from images built from its pinned module (images.sh) and manifests
# rendered from that module's chart (deploy/chart with deploy/upstream/values.yaml, as OLM's releases are made),
# every image reference pointing at the node's registry. Then serves the local variant of catalog/ through a
# CatalogSource in the olm namespace and waits until packageserver lists the package. Idempotent.
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.3.0}
[ -f "$KUBECONFIG_PATH" ] || die "no node: run make cluster-up"

VERSION=$VERSION "$OLM_HACK/images.sh"
source "$OLM_WORK/images.env"
"$OLM_HACK/render.sh"

log "installing OLM $OLM_VERSION"
# Server-side apply: the CRDs are too large for the last-applied annotation.
kc apply --server-side --force-conflicts --field-manager=olm-up -f "$OLM_WORK/manifests/crds" >/dev/null
for crd in $(kc get -f "$OLM_WORK/manifests/crds" -o name); do
  kc wait --for=condition=Established --timeout=60s "$crd" >/dev/null
done
kc apply --server-side --force-conflicts --field-manager=olm-up -f "$OLM_WORK/manifests/olm.yaml" >/dev/null
kc -n "$OLM_NAMESPACE" rollout status deployment/olm-operator --timeout=180s >/dev/null
kc -n "$OLM_NAMESPACE" rollout status deployment/catalog-operator --timeout=180s >/dev/null
# packageserver_state: the CSV's phase and reason, its pods and the APIService's Available condition, on one line.
packageserver_state() {
  printf 'CSV %s; pods %s; APIService %s' \
    "$(kc -n "$OLM_NAMESPACE" get csv packageserver -o jsonpath='{.status.phase}/{.status.reason}' 2>/dev/null || echo -)" \
    "$(kc -n "$OLM_NAMESPACE" get pods -l app=packageserver --no-headers \
        -o custom-columns=S:.status.phase,R:.status.containerStatuses[0].ready,N:.status.containerStatuses[0].restartCount 2>/dev/null | tr -s ' \n' '/ ' || echo -)" \
    "$(kc get apiservice v1.packages.operators.coreos.com -o jsonpath='{.status.conditions[?(@.type=="Available")].status}/{.status.conditions[?(@.type=="Available")].reason}' 2>/dev/null || echo -)"
}
packageserver_diagnostics() {
  kc -n "$OLM_NAMESPACE" get csv,deployments,pods -o wide
  kc -n "$OLM_NAMESPACE" get csv packageserver -o jsonpath='{range .status.conditions[*]}{.lastTransitionTime} {.phase} {.reason}: {.message}{"\n"}{end}'
  kc -n "$OLM_NAMESPACE" describe pods -l app=packageserver | sed -n '/^Events:/,/^$/p'
  kc -n "$OLM_NAMESPACE" logs -l app=packageserver --tail=30 --prefix
  kc get apiservice v1.packages.operators.coreos.com -o yaml
  kc -n "$OLM_NAMESPACE" logs deployment/olm-operator --tail=40
  cat /proc/loadavg
}
packageserver_ready() {
  [ "$(kc -n "$OLM_NAMESPACE" get csv packageserver -o jsonpath='{.status.phase}')" = Succeeded ] &&
    kc wait --for=condition=Available --timeout=1s apiservice/v1.packages.operators.coreos.com
}
# The packageserver CSV succeeds once its deployment is available and its APIService answers through the
# aggregation layer: 10-20 s measured, on fresh nodes too. The deadline is generous (OLM itself marks a CSV
# install Failed after 5 minutes in Installing and then re-evaluates it); progress lines show where a slow install
# stands, and a timeout prints the CSV's conditions, the pods' events and logs, the APIService and olm-operator's
# log.
wait_watching "the packageserver CSV to succeed" "${PACKAGESERVER_TIMEOUT:-600}" \
  packageserver_state packageserver_diagnostics packageserver_ready
log "OLM $OLM_VERSION running"

# OLM's own pods must pass the restricted Pod Security Standard: the chart labels the namespace enforce=restricted;
# a server-side dry run of that label lists any running pod that would violate it.
warnings=$(kc label --dry-run=server --overwrite ns "$OLM_NAMESPACE" pod-security.kubernetes.io/enforce=restricted 2>&1 >/dev/null || true)
[ -z "$warnings" ] || die "pods in $OLM_NAMESPACE violate the restricted Pod Security Standard: $warnings"
[ "$(kc get ns "$OLM_NAMESPACE" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')" = restricted ] ||
  die "namespace $OLM_NAMESPACE is not labelled enforce=restricted"

# `operator-sdk run bundle-upgrade` has no flag for its registry pod's decompression image (run bundle has
# --decompression-image) and always uses operator-sdk's default, a public image. Name the node's busybox that way
# in every node's containerd store (the pod may land on any node): the kubelet does not pull a tagged image it
# has (IfNotPresent). Read from the pinned operator-sdk module, so a version bump follows.
sdk_dir=$(cd "$ROOT/hack/tools/operator-sdk" && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/operator-framework/operator-sdk)
init_image=$(sed -n 's/^[[:space:]]*DefaultInitImage = "\(.*\)"$/\1/p' "$sdk_dir/internal/olm/fbcutil/util.go")
[ -n "$init_image" ] || die "cannot find operator-sdk's DefaultInitImage"
source "$ROOT/hack/node/nodes.sh"
for i in $(node_indexes); do
  select_node "$i"
  # ctr fetches the image itself, from the host's registry; the node's containerd stores it.
  ctr --address "$N_SOCK" -n k8s.io images pull --plain-http "$BUSYBOX_IMAGE" >/dev/null
  ctr --address "$N_SOCK" -n k8s.io images tag --force "$BUSYBOX_IMAGE" "$init_image" >/dev/null
done
log "containerd of every node: $init_image is $BUSYBOX_IMAGE (operator-sdk bundle-upgrade's decompression image)"

log "serving the catalog $CATALOG_IMAGE"
kc apply --server-side --force-conflicts --field-manager=olm-up -f - >/dev/null <<YAML
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: $CATALOG_SOURCE
  namespace: $OLM_NAMESPACE
spec:
  sourceType: grpc
  image: $CATALOG_IMAGE
  displayName: etcd-operator (local node)
  publisher: seedops
  grpcPodConfig:
    securityContextConfig: restricted
YAML
cs_state() { kc -n "$OLM_NAMESPACE" get catalogsource "$CATALOG_SOURCE" -o jsonpath='{.status.connectionState.lastObservedState}' 2>/dev/null; }
cs_ready() { [ "$(cs_state)" = READY ]; }
catalog_state() {
  printf 'CatalogSource %s; pods %s' "$(cs_state || echo -)" \
    "$(kc -n "$OLM_NAMESPACE" get pods -l olm.catalogSource="$CATALOG_SOURCE" --no-headers \
        -o custom-columns=S:.status.phase,R:.status.containerStatuses[0].ready,N:.status.containerStatuses[0].restartCount | tr -s ' \n' '/ ')"
}
catalog_diagnostics() {
  kc -n "$OLM_NAMESPACE" get catalogsource "$CATALOG_SOURCE" -o yaml
  kc -n "$OLM_NAMESPACE" describe pods -l olm.catalogSource="$CATALOG_SOURCE" | sed -n '/^Events:/,/^$/p'
  kc -n "$OLM_NAMESPACE" logs -l olm.catalogSource="$CATALOG_SOURCE" --tail=30 --prefix
  kc -n "$OLM_NAMESPACE" logs deployment/catalog-operator --tail=40
  cat /proc/loadavg
}
wait_watching "CatalogSource $CATALOG_SOURCE to be READY" "${CATALOG_TIMEOUT:-300}" catalog_state catalog_diagnostics cs_ready
pkg_listed() {
  [ "$(kc -n "$OLM_NAMESPACE" get packagemanifest "$PACKAGE" -o jsonpath='{.status.catalogSource}' 2>/dev/null)" = "$CATALOG_SOURCE" ]
}
wait_for "packageserver to list $PACKAGE" 120 pkg_listed
log "OLM ready: packagemanifest $PACKAGE from $CATALOG_SOURCE ($(kc -n "$OLM_NAMESPACE" get packagemanifest "$PACKAGE" \
  -o jsonpath='{range .status.channels[*]}{.name}={.currentCSV} {end}'))"
