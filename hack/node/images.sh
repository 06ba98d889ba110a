#!/usr/bin/env bash
# Builds the node's images offline (no base image is pulled) and pushes them to the local registry:
#   etcd-operator:v<VERSION>-<hash>  /manager, user 65532:65532 (as the Dockerfile's distroless:nonroot image)
#   etcd:v<version>                  /usr/local/bin/{etcd,etcdctl,etcdutl}, the official image layout
#   pause:<tag>                      the pod sandbox, from Kubernetes' pause.c
#   busybox:<version>                local-path-provisioner's helper pods, from Debian's busybox-static
# Each image is skipped when its inputs are unchanged and the registry still has it.
# The operator image reference is written to bin/node/operator-image.
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.1.0}

"$HACK/registry.sh"
IMAGES=$NODE_DIR/images
mkdir -p "$IMAGES"
NODETOOL=$TOOLS_BIN/nodetool

# Minimal /etc files, as distroless has them: root and nonroot (65532) users. Rewritten only when they change,
# so the images' stamps below stay valid.
put() { # FILE CONTENT
  if [ "$(cat "$1" 2>/dev/null)" != "$2" ]; then printf '%s\n' "$2" >"$1"; fi
}
put "$IMAGES/passwd" "root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"
put "$IMAGES/group" "root:x:0:
nonroot:x:65532:"
BASE_FILES=(--add "$IMAGES/passwd:/etc/passwd:0644" --add "$IMAGES/group:/etc/group:0644"
  --add /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644
  --dir /tmp:1777 --dir /home/nonroot:0700:65532:65532 --dir /root:0700)

# image REF ARGS...: builds and pushes REF from nodetool image ARGS, unless unchanged since the last push.
image() {
  local ref=$1; shift
  local repo=${ref#*/}; repo=${repo%%:*}
  local tag=${ref##*:}
  local stampfile=$IMAGES/$repo-$tag.stamp
  # The stamp covers the arguments and the size and time of every input file.
  local stamp
  stamp=$( {
    echo "$*"
    local prev=
    for a in "$@"; do
      if [ "$prev" = --add ]; then stat -L -c '%n %s %Y' "${a%%:*}"; fi
      prev=$a
    done
  } | sha256sum | cut -c1-32)
  if [ "$(cat "$stampfile" 2>/dev/null)" = "$stamp" ] &&
    curl -sf -o /dev/null -I -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REGISTRY/v2/$repo/manifests/$tag"; then
    return 0
  fi
  "$NODETOOL" image --ref "$ref" "$@"
  echo "$stamp" >"$stampfile"
}

# The operator, built as the Dockerfile builds it.
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$IMAGES/manager.tmp" ./cmd)
if cmp -s "$IMAGES/manager.tmp" "$IMAGES/manager"; then rm "$IMAGES/manager.tmp"; else mv "$IMAGES/manager.tmp" "$IMAGES/manager"; fi
op_ref=$REGISTRY/etcd-operator:v$VERSION-$(sha256sum "$IMAGES/manager" | cut -c1-12)
image "$op_ref" "${BASE_FILES[@]}" --add "$IMAGES/manager:/manager:0755" \
  --user 65532:65532 --entrypoint /manager --workdir /
echo "$op_ref" >"$NODE_DIR/operator-image"

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

log "images ready in $REGISTRY (operator: $op_ref)"
