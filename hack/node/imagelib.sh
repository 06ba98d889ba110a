# Building images without a base image or a container engine; sourced (after lib.sh) by the scripts that push
# images to the node's registry. Defines IMAGES (the build cache), BASE_FILES (what distroless would give:
# /etc/passwd and group with nonroot 65532, the CA bundle, /tmp, home directories) and image REF ARGS...
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

# image_exists REF: the registry has REF.
image_exists() {
  local repo=${1#*/}; repo=${repo%%:*}
  curl -sf -o /dev/null -I -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REGISTRY/v2/$repo/manifests/${1##*:}"
}

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
  if [ "$(cat "$stampfile" 2>/dev/null)" = "$stamp" ] && image_exists "$ref"; then
    return 0
  fi
  "$NODETOOL" image --ref "$ref" "$@"
  echo "$stamp" >"$stampfile"
}

# operator_image NAME SRC_DIR TAG_PREFIX [go build flags...]: builds the operator of the source tree SRC_DIR as the
# Dockerfile builds it (./cmd, static) into $IMAGES/NAME and pushes $REGISTRY/etcd-operator:TAG_PREFIX-<binary
# hash>, /manager as user 65532:65532 (as the Dockerfile's distroless:nonroot image). Sets OPERATOR_REF.
# OPERATOR_ARCHES (GOARCH names, default this machine's) builds one image per architecture, TAG-<arch>, and pushes
# TAG as their image index, as `make docker-buildx` does (the node pulls its own architecture's image from it).
operator_image() {
  local name=$1 src=$2 prefix=$3; shift 3
  local host arch bin sums="" refs=()
  host=$(go env GOARCH)
  local arches=${OPERATOR_ARCHES:-$host}
  for arch in $arches; do
    bin=$IMAGES/$name-$arch
    [ "$arch" != "$host" ] || bin=$IMAGES/$name
    (cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOWORK=off go build -trimpath "$@" -o "$bin.tmp" ./cmd)
    replace_if_changed "$bin.tmp" "$bin"
    sums+=$(sha256sum "$bin" | cut -c1-64)
  done
  if [ "$arches" = "$host" ]; then
    OPERATOR_REF=$REGISTRY/etcd-operator:$prefix-$(sha256sum "$IMAGES/$name" | cut -c1-12)
    image "$OPERATOR_REF" "${BASE_FILES[@]}" --add "$IMAGES/$name:/manager:0755" \
      --user 65532:65532 --entrypoint /manager --workdir /
    return
  fi
  OPERATOR_REF=$REGISTRY/etcd-operator:$prefix-$(echo "$sums" | sha256sum | cut -c1-12)
  for arch in $arches; do
    bin=$IMAGES/$name-$arch
    [ "$arch" != "$host" ] || bin=$IMAGES/$name
    image "$OPERATOR_REF-$arch" "${BASE_FILES[@]}" --add "$bin:/manager:0755" \
      --user 65532:65532 --entrypoint /manager --workdir / --arch "$arch"
    refs+=("$OPERATOR_REF-$arch")
  done
  "$NODETOOL" index --ref "$OPERATOR_REF" "${refs[@]}" >/dev/null
}

# etcd_image TAG DIR: $REGISTRY/etcd:TAG from DIR/{etcd,etcdctl,etcdutl}, the official image's layout.
etcd_image() {
  local d=$2
  image "$REGISTRY/etcd:$1" "${BASE_FILES[@]}" \
    --add "$d/etcd:/usr/local/bin/etcd:0755" --add "$d/etcdctl:/usr/local/bin/etcdctl:0755" \
    --add "$d/etcdutl:/usr/local/bin/etcdutl:0755" --dir /var/etcd:0700 --dir /var/lib/etcd:0700 \
    --cmd /usr/local/bin/etcd
}

# busybox_args: BB_VERSION (Debian's static busybox) and BB_ARGS, the nodetool arguments adding /bin/busybox and
# a /bin/<applet> link for each of its applets.
BB=/bin/busybox
busybox_args() {
  BB_VERSION=$({ "$BB" 2>&1 || true; } | sed -n '1s/^BusyBox v\([0-9.]*\).*/\1/p')
  [ -n "$BB_VERSION" ] || die "cannot tell the version of $BB"
  BB_ARGS=(--add "$BB:/bin/busybox:0755")
  local applet
  for applet in $("$BB" --list); do
    [ "$applet" = busybox ] || BB_ARGS+=(--symlink "/bin/$applet:/bin/busybox")
  done
}
