#!/usr/bin/env bash
# make scorecard-node: every scorecard test of bundle/ (basic, olm, custom) on the local node, offline.
#   1. the node's images (hack/node/images.sh) and the operator deployed with `make deploy`, after checking
#      that no other etcd-operator runs (an OLM install by someone else: retry later, nothing is deleted);
#   2. the scorecard's images (hack/node/scorecard-images.sh); the operator told where the alm-examples' etcd
#      images are mirrored (RELATED_IMAGE_ETCD_*, as a disconnected OLM install does), undone at the end;
#   3. namespace etcd-operator-scorecard with the tests' service account and Role (config/scorecard/rbac);
#   4. `operator-sdk scorecard` with a copy of the bundle's config whose images are the local builds;
#   5. the JSON result in bin/node/scorecard.json; fails unless every result is pass.
# The namespace is deleted at the end. Touches the shared node: run it under the node lock.
# Needs from make: VERSION, IMAGE_TAG_BASE, OPERATOR_SDK, KUSTOMIZE (and the node's KUBECTL from lib.sh).
source "$(dirname "$0")/../../hack/node/lib.sh"
: "${VERSION:?}" "${IMAGE_TAG_BASE:?}" "${OPERATOR_SDK:?}" "${KUSTOMIZE:?}"
export KUBECONFIG=$KUBECONFIG_PATH
WAIT=${SCORECARD_NODE_WAIT:-20m}
# Fixed by config/scorecard/rbac.
NS=etcd-operator-scorecard
SA=etcd-operator-scorecard
OP_NS=etcd-operator-system
OP_DEPLOY=etcd-operator-controller-manager
cd "$ROOT"

log "images for the node (operator, etcd)"
VERSION=$VERSION "$HACK/images.sh"
op_image=$(cat "$NODE_DIR/operator-image")

# Exactly one operator: the one `make deploy` installs. Another one found (an OLM install, another
# deployment of the operator's image) belongs to someone else unless it is in our namespace.
if kc get crd clusterserviceversions.operators.coreos.com >/dev/null 2>&1; then
  csvs=$(kc get csv -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name} {.status.reason}{"\n"}{end}')
  # Copied CSVs are OLM's mirrors of one install into each target namespace, not installs of their own.
  while read -r ns name reason; do
    [ -n "$ns" ] || continue
    [ "$reason" = Copied ] && continue
    if [ "$ns" = "$NS" ]; then
      log "removing the OLM install $name in $NS (ours)"
      kc -n "$NS" delete subscriptions.operators.coreos.com --all --wait
      kc -n "$NS" delete csv "$name" --wait
    else
      die "etcd-operator is installed by OLM in namespace $ns ($name): someone else's install; wait for the node lock again later"
    fi
  done < <(awk '$2 ~ /^etcd-operator\./' <<<"$csvs")
fi
deploys=$(kc get deploy -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name} {.spec.template.spec.containers[*].image}{"\n"}{end}')
while read -r ns name images; do
  [ -n "$ns" ] || continue
  [ "$ns/$name" = "$OP_NS/$OP_DEPLOY" ] && continue
  case " $images " in
    *"/etcd-operator:"* | *"/etcd-operator@"*) ;;
    *) continue ;;
  esac
  if [ "$ns" = "$NS" ]; then
    kc -n "$ns" delete deployment "$name" --wait
  else
    die "another etcd-operator runs: deployment $ns/$name ($images); wait for the node lock again later"
  fi
done <<<"$deploys"

log "operator: make deploy IMG=$op_image"
make --no-print-directory deploy IMG="$op_image"

log "scorecard images"
VERSION=$VERSION "$HACK/scorecard-images.sh"
# shellcheck disable=SC1091
source "$NODE_DIR/scorecard-images.env"
mapfile -t related <"$NODE_DIR/scorecard-related-images"

# Everything below is undone on exit, whatever happens: the operator as `make deploy` left it, no namespace.
undo() {
  local rc=$?
  set +e
  if [ "${#related[@]}" -gt 0 ]; then
    kc -n "$OP_NS" set env "deployment/$OP_DEPLOY" -c manager "${related[@]/%=*/-}" >/dev/null
  fi
  log "deleting namespace $NS"
  kc delete namespace "$NS" --ignore-not-found --wait --timeout=5m >/dev/null
  exit $rc
}
trap undo EXIT
if [ "${#related[@]}" -gt 0 ]; then
  log "operator: etcd mirrors ${related[*]}"
  kc -n "$OP_NS" set env "deployment/$OP_DEPLOY" -c manager "${related[@]}"
fi
kc -n "$OP_NS" rollout status "deployment/$OP_DEPLOY" --timeout=5m

log "namespace $NS, service account $SA and its Role"
# A namespace left over from an interrupted run may still hold clusters: start from a clean one.
kc delete namespace "$NS" --ignore-not-found --wait --timeout=5m
"$KUSTOMIZE" build config/scorecard/rbac | kc apply --server-side -f -

sdk_version=$(awk '$1=="require" && $2=="github.com/operator-framework/operator-sdk" {print $3}' hack/tools/operator-sdk/go.mod)
config=$NODE_DIR/scorecard-config.yaml
"$NODE_DIR/images/scorecard-local" config --in bundle/tests/scorecard/config.yaml --out "$config" \
  --image "quay.io/operator-framework/scorecard-test:$sdk_version=$SCORECARD_TEST_IMAGE" \
  --image "$IMAGE_TAG_BASE-scorecard-tests:v$VERSION=$SCORECARD_TESTS_IMAGE"

log "operator-sdk scorecard (config $config)"
out=$NODE_DIR/scorecard.json
start=$SECONDS
# operator-sdk's exit status says little (0 with failed tests); the JSON is the verdict.
"$OPERATOR_SDK" scorecard ./bundle --config "$config" --namespace "$NS" --service-account "$SA" \
  --pod-security restricted --untar-image "$SCORECARD_UNTAR_IMAGE" --storage-image "$SCORECARD_UNTAR_IMAGE" \
  --wait-time "$WAIT" -o json >"$out" || log "operator-sdk scorecard exited with $?"
log "scorecard ran in $((SECONDS - start)) s; results in $out"
"$NODE_DIR/images/scorecard-local" results "$out"
