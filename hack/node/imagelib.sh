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

