#!/usr/bin/env bash
# Builds the scorecard's images offline (no base image is pulled) and pushes them to the node's registry:
#   scorecard-test:<sdk version>-<hash>                operator-sdk's basic and olm tests, built from the pinned
#                                                      operator-sdk module (images/scorecard-test)
#   etcd-operator-scorecard-tests:v<VERSION>-<hash>    the project's custom tests (tests/scorecard)
#   scorecard-untar:<busybox version>                  the test pods' init container (`tar xvzf` of the bundle)
#   etcd:v<version>                                    each etcd version the CSV's alm-examples run from the
#                                                      default repository that images.sh does not build, from
#                                                      tests/scorecard/etcd-v<version>
# Every image runs as 65532:65532 (the scorecard's --pod-security=restricted needs a numeric non-root user).
# Tags carry the binary's hash: pods pull IfNotPresent, so a rebuilt binary needs a new tag to be run.
# Writes bin/node/scorecard-images.env (the local references) and bin/node/scorecard-related-images
# (RELATED_IMAGE_ETCD_<version>=<local image> for the operator, as a disconnected install mirrors them).
# With --build-only, only the binaries are built (no registry, no node: .ci/run builds them ahead of time).
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.3.0}
IMAGES=$NODE_DIR/images
mkdir -p "$IMAGES"

# build NAME DIR PACKAGE [go build flags]: builds a static binary into $IMAGES/NAME; the file is replaced
# only when its content changed, so image stamps (size and time of inputs) stay valid on a warm run.
build() {
  local name=$1 dir=$2 pkg=$3; shift 3
  (cd "$dir" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" "$@" -o "$IMAGES/$name.tmp" "$pkg")
  replace_if_changed "$IMAGES/$name.tmp" "$IMAGES/$name"
}
hash12() { sha256sum "$1" | cut -c1-12; }

# The binaries: operator-sdk's scorecard-test, from the wrapper module that pins operator-sdk (same module graph);
# the custom tests and scorecard-local from the main module; etcd for each version the alm-examples run that has a
# wrapper module tests/scorecard/etcd-v<version>.
build_binaries() {
  build scorecard-test "$ROOT/hack/tools/operator-sdk" github.com/operator-framework/operator-sdk/images/scorecard-test \
    -tags containers_image_openpgp
  build etcd-operator-scorecard-tests "$ROOT" ./tests/scorecard/cmd/etcd-operator-scorecard-tests
  build scorecard-local "$ROOT" ./tests/scorecard/cmd/scorecard-local
  local v
  for v in $("$IMAGES/scorecard-local" etcd-versions "$ROOT/bundle"); do
    if [ -d "$ROOT/tests/scorecard/etcd-v$v" ]; then
      build_etcd "$ROOT/tests/scorecard/etcd-v$v" "$ROOT/bin/etcd/v$v"
    fi
  done
}
build_binaries
[ "${1:-}" = --build-only ] && exit 0

"$HACK/registry.sh"
source "$HACK/imagelib.sh"

sdk_version=$(awk '$1=="require" && $2=="github.com/operator-framework/operator-sdk" {print $3}' "$ROOT/hack/tools/operator-sdk/go.mod")
sdk_ref=$REGISTRY/scorecard-test:$sdk_version-$(hash12 "$IMAGES/scorecard-test")
image "$sdk_ref" "${BASE_FILES[@]}" --add "$IMAGES/scorecard-test:/usr/local/bin/scorecard-test:0755" \
  --user 65532:65532 --env HOME=/home/nonroot --workdir /home/nonroot

tests_ref=$REGISTRY/etcd-operator-scorecard-tests:v$VERSION-$(hash12 "$IMAGES/etcd-operator-scorecard-tests")
image "$tests_ref" "${BASE_FILES[@]}" \
  --add "$IMAGES/etcd-operator-scorecard-tests:/usr/local/bin/etcd-operator-scorecard-tests:0755" \
  --user 65532:65532 --env HOME=/home/nonroot --workdir /home/nonroot

# The untar init container: busybox (its tar handles gzip), as the non-root user.
busybox_args
untar_ref=$REGISTRY/scorecard-untar:$BB_VERSION
image "$untar_ref" "${BASE_FILES[@]}" "${BB_ARGS[@]}" \
  --user 65532:65532 --env HOME=/home/nonroot --workdir /home/nonroot --cmd sh

# The etcd images the alm-examples need: the operator maps the default repository's versions to these.
related=()
for v in $("$IMAGES/scorecard-local" etcd-versions "$ROOT/bundle"); do
  tag=v$v
  if [ -d "$ROOT/tests/scorecard/etcd-$tag" ]; then
    etcd_image "$tag" "$ROOT/bin/etcd/$tag"
  elif ! image_exists "$REGISTRY/etcd:$tag"; then
    die "the alm-examples run etcd $v from the default repository and $REGISTRY/etcd:$tag does not exist:" \
      "add a wrapper module tests/scorecard/etcd-$tag (as tests/scorecard/etcd-v3.5.9), or run hack/node/images.sh if it builds $tag"
  fi
  related+=("RELATED_IMAGE_ETCD_${v//./_}=$REGISTRY/etcd:$tag")
done

write_file "$NODE_DIR/scorecard-images.env" <<EOF
SCORECARD_TEST_IMAGE=$sdk_ref
SCORECARD_TESTS_IMAGE=$tests_ref
SCORECARD_UNTAR_IMAGE=$untar_ref
EOF
printf '%s\n' "${related[@]}" | write_file "$NODE_DIR/scorecard-related-images"
log "scorecard images ready in $REGISTRY: $sdk_ref $tests_ref $untar_ref; etcd mirrors: ${related[*]}"
