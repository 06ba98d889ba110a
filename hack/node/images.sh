#!/usr/bin/env bash
# Builds the node's images offline (no base image is pulled) and pushes them to the local registry:
#   etcd-operator:v<VERSION>-<hash>  /manager, user 65532:65532 (as the Dockerfile's distroless:nonroot image); an
#                                    image index of linux/amd64 and linux/arm64 (OPERATOR_ARCHES), as docker-buildx
#   etcd:v<version>                  /usr/local/bin/{etcd,etcdctl,etcdutl}, the official image layout
#   pause:<tag>                      the pod sandbox, from Kubernetes' pause.c
#   busybox:<version>                local-path-provisioner's helper pods, from Debian's busybox-static
#   minio:e2e                        the S3-compatible server of the backup e2e tests (MINIO_BIN, `make minio`)
#   loadgen:bench                    /loadgen, the served-load benchmark's load generator (LOADGEN_IMAGE=1)
# Each image is skipped when its inputs are unchanged and the registry still has it.
# The operator image reference is written to bin/node/operator-image (FAILPOINT_IMAGE=1 adds the failpoint
# build's, bin/node/operator-image-failpoints).
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.3.0}

"$HACK/registry.sh"
source "$HACK/imagelib.sh"

# The operator, built as the Dockerfile builds it, for every architecture the CSV declares.
OPERATOR_ARCHES=${OPERATOR_ARCHES:-amd64 arm64} operator_image manager "$ROOT" "v$VERSION"
op_ref=$OPERATOR_REF
echo "$op_ref" >"$NODE_DIR/operator-image"

# FAILPOINT_IMAGE=1 (make test-e2e): the same operator built with the failpoints tag, for the e2e that
# crashes it on purpose (internal/failpoint); its reference goes to bin/node/operator-image-failpoints.
if [ "${FAILPOINT_IMAGE:-}" = 1 ]; then
  operator_image manager-failpoints "$ROOT" "v$VERSION-failpoints" -tags failpoints
  echo "$OPERATOR_REF" >"$NODE_DIR/operator-image-failpoints"
fi

for v in $ETCD_VERSION $EXTRA_ETCD_VERSIONS; do
  etcd_image "$v" "$ROOT/bin/etcd/$v"
done

image "$REGISTRY/pause:$PAUSE_TAG" --add "$TOOLS_BIN/pause:/pause:0755" --user 65535:65535 --entrypoint /pause

busybox_args
image "$REGISTRY/busybox:$BB_VERSION" "${BB_ARGS[@]}" --cmd sh
echo "$BB_VERSION" >"$IMAGES/busybox-version"

if [ -n "${MINIO_BIN:-}" ]; then
  go version -m "$MINIO_BIN" | grep -q 'CGO_ENABLED=0' || die "$MINIO_BIN must be static (make minio builds it with CGO_ENABLED=0)"
  image "$REGISTRY/minio:e2e" "${BASE_FILES[@]}" --add "$MINIO_BIN:/usr/bin/minio:0755" \
    --user 65532:65532 --entrypoint /usr/bin/minio --workdir /tmp
fi

# LOADGEN_IMAGE=1 (make bench-node): the load generator the served-load scenario runs in pods
# (tests/bench/loadgen), static, user 65532:65532.
if [ "${LOADGEN_IMAGE:-}" = 1 ]; then
  (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOWORK=off go build -trimpath -o "$IMAGES/loadgen.tmp" ./tests/bench/loadgen)
  replace_if_changed "$IMAGES/loadgen.tmp" "$IMAGES/loadgen"
  image "$REGISTRY/loadgen:bench" "${BASE_FILES[@]}" --add "$IMAGES/loadgen:/loadgen:0755" \
    --user 65532:65532 --entrypoint /loadgen --workdir /tmp
fi

log "images ready in $REGISTRY (operator: $op_ref)"
