#!/usr/bin/env bash
# Builds the OLM harness's images offline (nodetool, no base image) and pushes them to the node's registry:
#   olm:<OLM version>-<hash>      /bin/{olm,catalog,package-server,copy-content,cpb} and /bin/cp (busybox): OLM's
#                                 bundle-unpack and catalog pods run `/bin/cp` from this image (the --util-image)
#   opm:<opm version>-<hash>      /bin/opm, /bin/grpc_health_probe and busybox (sh, cat, gzip: operator-sdk's
#                                 registry pod runs `sh -c "opm serve ..."` and decompresses with gzip); an empty
#                                 /configs with the index label, so it also serves as an empty index image
#   etcd-operator:v0.1.0-<hash>   the previous release's operator, built from releases/0.1.0/source-commit's tree
#   etcd-operator-bundle:v<X>-<hash>  every release's bundle (releases/X/bundle) and the one in development
#                                 (bundle/), with image references rewritten to the node's images
#   etcd-operator-catalog:<hash>  catalog/ rewritten the same way (a local variant: catalog/ is left alone),
#                                 served by `opm serve /configs`
# The references are written to bin/node/olm/images.env. The node's own images (the operator of VERSION, etcd,
# busybox) come from hack/node/images.sh.
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.3.0}

"$OLM_HACK/build.sh"
VERSION=$VERSION "$HACK/images.sh"
source "$HACK/imagelib.sh"
mkdir -p "$OLM_WORK"

# hash FILES-OR-DIRS...: a short digest of the content (paths relative to each argument) for image tags.
hash() {
  local p
  for p in "$@"; do
    if [ -d "$p" ]; then (cd "$p" && find . -type f | LC_ALL=C sort | xargs -r sha256sum); else sha256sum <"$p"; fi
  done | sha256sum | cut -c1-12
}
# tree_args SRC_DIR DEST_DIR: nodetool --add arguments for every file under SRC_DIR.
tree_args() {
  local f
  (cd "$1" && find . -type f | LC_ALL=C sort) | while read -r f; do
    f=${f#./}; printf -- '--add\n%s:%s:0644\n' "$1/$f" "$2/$f"
  done
}
# labelled REF LABELS_FILE NODETOOL_ARGS...: builds REF-base with nodetool, then REF = REF-base plus the labels
# (k=v per line): nodetool writes no labels, OLM tooling reads bundle and index labels.
labelled() {
  local ref=$1 labels=$2; shift 2
  # Tags carry a content hash, so an existing tag is the right image.
  image_exists "$ref" && return 0
  "$NODETOOL" image --ref "$ref-base" "$@" >/dev/null
  local args=() l
  while IFS= read -r l; do [ -n "$l" ] && args+=(--label "$l"); done <"$labels"
  "$CRANE" mutate --insecure "$ref-base" "${args[@]}" -t "$ref" >/dev/null 2>"$OLM_WORK/crane.log" ||
    { cat "$OLM_WORK/crane.log" >&2; die "crane mutate $ref failed"; }
}

# --- OLM
olm_ref=$REGISTRY/olm:$OLM_VERSION-$(hash "$OLM_BIN/olm" "$OLM_BIN/catalog" "$OLM_BIN/package-server" \
  "$OLM_BIN/copy-content" "$OLM_BIN/cpb" "$BB")
image "$olm_ref" "${BASE_FILES[@]}" --add "$BB:/bin/busybox:0755" --symlink /bin/cp:/bin/busybox \
  --add "$OLM_BIN/olm:/bin/olm:0755" --add "$OLM_BIN/catalog:/bin/catalog:0755" \
  --add "$OLM_BIN/package-server:/bin/package-server:0755" --add "$OLM_BIN/copy-content:/bin/copy-content:0755" \
  --add "$OLM_BIN/cpb:/bin/cpb:0755" --user 65532:65532 --workdir /
log "OLM image $olm_ref"

# --- opm (also the empty index image of `operator-sdk run bundle`)
INDEX_LABEL=operators.operatorframework.io.index.configs.v1=/configs
echo "$INDEX_LABEL" >"$OLM_WORK/index.labels"
busybox_args
# opm resolves names through /etc/nsswitch.conf (upstream's opm image ships this one).
put "$IMAGES/nsswitch.conf" "hosts: files dns"
OPM_ARGS=("${BASE_FILES[@]}" --add "$IMAGES/nsswitch.conf:/etc/nsswitch.conf:0644" "${BB_ARGS[@]}"
  --add "$OLM_BIN/opm:/bin/opm:0755" --add "$OLM_BIN/grpc_health_probe:/bin/grpc_health_probe:0755"
  --user 65532:65532 --workdir /)
echo "${OPM_ARGS[*]}" >"$OLM_WORK/opm.args"
opm_ref=$REGISTRY/opm:$OPM_VERSION-$(hash "$OLM_BIN/opm" "$OLM_BIN/grpc_health_probe" "$BB" "$OLM_WORK/index.labels" "$OLM_WORK/opm.args")
labelled "$opm_ref" "$OLM_WORK/index.labels" "${OPM_ARGS[@]}" --dir /configs --entrypoint /bin/opm \
  --cmd serve,/configs
log "opm image $opm_ref"

# --- Operator images: VERSION from hack/node/images.sh; each release from its source commit's tree.
declare -A OP_IMAGE
OP_IMAGE[$VERSION]=$(cat "$NODE_DIR/operator-image")
for rel in $(cd "$ROOT/releases" && ls | sort -V); do
  [ "$rel" = "$VERSION" ] && continue
  src=$(release_source "$rel")
  operator_image "manager-v$rel" "$src" "v$rel"
  OP_IMAGE[$rel]=$OPERATOR_REF
done

# --- Bundles, rewritten to the node's images: the operator of that version and the mirrored etcd repository.
declare -A BUNDLE_IMAGE
rewrite_images() { # FILES...: sed the public references to the node's ones
  local args=(-e "s|gcr.io/etcd-development/etcd|$REGISTRY/etcd|g") v
  for v in "${!OP_IMAGE[@]}"; do
    args+=(-e "s|ghcr.io/seedops/etcd-operator:v$v\b|${OP_IMAGE[$v]}|g")
  done
  for v in "${!BUNDLE_IMAGE[@]}"; do
    args+=(-e "s|ghcr.io/seedops/etcd-operator-bundle:v$v\b|${BUNDLE_IMAGE[$v]}|g")
  done
  sed -i "${args[@]}" "$@"
}
for rel in "${!OP_IMAGE[@]}"; do
  if [ "$rel" = "$VERSION" ]; then from=$ROOT; else from=$ROOT/releases/$rel; fi
  dir=$OLM_WORK/bundles/$rel
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$from/bundle/manifests" "$from/bundle/metadata" "$dir/"
  mkdir -p "$dir/tests" && cp -r "$from/bundle/tests/scorecard" "$dir/tests/"
  rewrite_images "$dir"/manifests/*.yaml
  # The labels of bundle.Dockerfile (LABEL k=v lines).
  sed -n 's/^LABEL \(.*\)$/\1/p' "$from/bundle.Dockerfile" >"$OLM_WORK/bundle-$rel.labels"
  ref=$REGISTRY/etcd-operator-bundle:v$rel-$(hash "$dir" "$OLM_WORK/bundle-$rel.labels")
  mapfile -t tree < <(tree_args "$dir" "")
  labelled "$ref" "$OLM_WORK/bundle-$rel.labels" "${tree[@]}"
  BUNDLE_IMAGE[$rel]=$ref
  log "bundle $rel: $ref"
done

# --- The catalog: catalog/ with the node's bundle and operator images, validated.
cat_dir=$OLM_WORK/catalog
rm -rf "$cat_dir" && mkdir -p "$cat_dir"
cp -r "$ROOT/catalog/." "$cat_dir/configs/"
rewrite_images $(find "$cat_dir/configs" -name '*.yaml')
if grep -rq -e 'ghcr.io/' -e 'gcr.io/' "$cat_dir/configs"; then
  die "the local catalog still references public images: $(grep -rl -e 'ghcr.io/' -e 'gcr.io/' "$cat_dir/configs")"
fi
"$OLM_BIN/opm" validate "$cat_dir/configs"
# No --cache-dir: opm builds its cache in a temporary directory at start (a cache baked into the image would be
# checked for integrity and, with --cache-dir, required to be writable by whatever user OLM runs the pod as).
CATALOG_CMD=serve,/configs
echo "${OPM_ARGS[*]} $CATALOG_CMD" >"$OLM_WORK/catalog.args"
cat_ref=$REGISTRY/etcd-operator-catalog:$VERSION-$(hash "$cat_dir" "$OLM_BIN/opm" "$OLM_WORK/index.labels" "$OLM_WORK/catalog.args")
mapfile -t configs < <(tree_args "$cat_dir/configs" /configs)
labelled "$cat_ref" "$OLM_WORK/index.labels" "${OPM_ARGS[@]}" "${configs[@]}" \
  --entrypoint /bin/opm --cmd "$CATALOG_CMD"
log "catalog image $cat_ref"

# --- The same catalog for OLM v1: catalogd and operator-controller pull catalog and bundle images themselves, from
# inside their pods, where localhost is the pod: they use the registry's TLS endpoint at the node IP.
REGISTRY_POD=$(node_ip):5443
v1_dir=$OLM_WORK/catalog-olmv1
rm -rf "$v1_dir" && mkdir -p "$v1_dir"
cp -r "$cat_dir/configs" "$v1_dir/"
sed -i "s|^image: $REGISTRY/|image: $REGISTRY_POD/|" $(find "$v1_dir/configs" -name '*.yaml')
"$OLM_BIN/opm" validate "$v1_dir/configs"
cat_v1_ref=$REGISTRY/etcd-operator-catalog:olmv1-$VERSION-$(hash "$v1_dir" "$OLM_BIN/opm" "$OLM_WORK/index.labels" "$OLM_WORK/catalog.args")
mapfile -t configs < <(tree_args "$v1_dir/configs" /configs)
labelled "$cat_v1_ref" "$OLM_WORK/index.labels" "${OPM_ARGS[@]}" "${configs[@]}" \
  --entrypoint /bin/opm --cmd "$CATALOG_CMD"
log "OLM v1 catalog image $cat_v1_ref"

{
  echo "OLM_IMAGE=$olm_ref"
  echo "CATALOG_OLMV1_IMAGE=$cat_v1_ref"
  echo "REGISTRY_POD=$REGISTRY_POD"
  echo "OPM_IMAGE=$opm_ref"
  echo "CATALOG_IMAGE=$cat_ref"
  echo "BUSYBOX_IMAGE=$REGISTRY/busybox:$(cat "$IMAGES/busybox-version")"
  for v in "${!OP_IMAGE[@]}"; do
    echo "OPERATOR_IMAGE_${v//./_}=${OP_IMAGE[$v]}"
    echo "BUNDLE_IMAGE_${v//./_}=${BUNDLE_IMAGE[$v]}"
  done | sort
} >"$OLM_WORK/images.env.tmp"
mv "$OLM_WORK/images.env.tmp" "$OLM_WORK/images.env"
log "OLM images ready ($OLM_WORK/images.env)"
