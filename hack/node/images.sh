#!/usr/bin/env bash
# Builds the node's images offline (no base image is pulled) and pushes them to the local registry:
#   etcd-operator:v<VERSION>-<hash>  /manager, user 65532:65532 (as the Dockerfile's distroless:nonroot image)
#   etcd:v<version>                  /usr/local/bin/{etcd,etcdctl,etcdutl}, the official image layout
#   pause:<tag>                      the pod sandbox, from Kubernetes' pause.c
#   busybox:<version>                local-path-provisioner's helper pods, from Debian's busybox-static
#   minio:e2e                        the S3-compatible server of the backup e2e tests (MINIO_BIN, `make minio`)
# Each image is skipped when its inputs are unchanged and the registry still has it.
# The operator image reference is written to bin/node/operator-image (FAILPOINT_IMAGE=1 adds the failpoint
# build's, bin/node/operator-image-failpoints).
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.2.0}

"$HACK/registry.sh"
source "$HACK/imagelib.sh"

# The operator, built as the Dockerfile builds it.
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$IMAGES/manager.tmp" ./cmd)
if cmp -s "$IMAGES/manager.tmp" "$IMAGES/manager"; then rm "$IMAGES/manager.tmp"; else mv "$IMAGES/manager.tmp" "$IMAGES/manager"; fi
op_ref=$REGISTRY/etcd-operator:v$VERSION-$(sha256sum "$IMAGES/manager" | cut -c1-12)
image "$op_ref" "${BASE_FILES[@]}" --add "$IMAGES/manager:/manager:0755" \
  --user 65532:65532 --entrypoint /manager --workdir /
echo "$op_ref" >"$NODE_DIR/operator-image"

# FAILPOINT_IMAGE=1 (make test-e2e): the same operator built with the failpoints tag, for the e2e that
# crashes it on purpose (internal/failpoint); its reference goes to bin/node/operator-image-failpoints.
if [ "${FAILPOINT_IMAGE:-}" = 1 ]; then
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -tags failpoints -o "$IMAGES/manager-failpoints.tmp" ./cmd)
  if cmp -s "$IMAGES/manager-failpoints.tmp" "$IMAGES/manager-failpoints"; then rm "$IMAGES/manager-failpoints.tmp"; else mv "$IMAGES/manager-failpoints.tmp" "$IMAGES/manager-failpoints"; fi
  fp_ref=$REGISTRY/etcd-operator:v$VERSION-failpoints-$(sha256sum "$IMAGES/manager-failpoints" | cut -c1-12)
  image "$fp_ref" "${BASE_FILES[@]}" --add "$IMAGES/manager-failpoints:/manager:0755" \
    --user 65532:65532 --entrypoint /manager --workdir /
  echo "$fp_ref" >"$NODE_DIR/operator-image-failpoints"
fi

for v in $ETCD_VERSION $EXTRA_ETCD_VERSIONS; do
  d=$ROOT/bin/etcd/$v
  image "$REGISTRY/etcd:$v" "${BASE_FILES[@]}" \
    --add "$d/etcd:/usr/local/bin/etcd:0755" --add "$d/etcdctl:/usr/local/bin/etcdctl:0755" \
    --add "$d/etcdutl:/usr/local/bin/etcdutl:0755" --dir /var/etcd:0700 --dir /var/lib/etcd:0700 \
    --cmd /usr/local/bin/etcd
done

image "$REGISTRY/pause:$PAUSE_TAG" --add "$TOOLS_BIN/pause:/pause:0755" --user 65535:65535 --entrypoint /pause

bb=/bin/busybox
bb_version=$({ "$bb" 2>&1 || true; } | sed -n '1s/^BusyBox v\([0-9.]*\).*/\1/p')
[ -n "$bb_version" ] || die "cannot tell the version of $bb"
links=()
for applet in $("$bb" --list); do
  [ "$applet" = busybox ] || links+=(--symlink "/bin/$applet:/bin/busybox")
done
image "$REGISTRY/busybox:$bb_version" --add "$bb:/bin/busybox:0755" "${links[@]}" --cmd sh
echo "$bb_version" >"$IMAGES/busybox-version"

if [ -n "${MINIO_BIN:-}" ]; then
  go version -m "$MINIO_BIN" | grep -q 'CGO_ENABLED=0' || die "$MINIO_BIN must be static (make minio builds it with CGO_ENABLED=0)"
  image "$REGISTRY/minio:e2e" "${BASE_FILES[@]}" --add "$MINIO_BIN:/usr/bin/minio:0755" \
    --user 65532:65532 --entrypoint /usr/bin/minio --workdir /tmp
fi

log "images ready in $REGISTRY (operator: $op_ref)"
