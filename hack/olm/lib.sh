# Shared settings of the OLM harness; sourced by the scripts in hack/olm (after the node's lib.sh, whose paths,
# registry and kubectl it uses). Everything it builds lives under bin/olm (binaries) and bin/node/olm (rendered
# manifests, local bundles and catalog, image references).
source "$(dirname "${BASH_SOURCE[0]}")/../node/lib.sh"
OLM_HACK=$ROOT/hack/olm
OLM_TOOLS=$ROOT/hack/tools/olm

# Versions come from the wrapper modules (one place to change them).
modver() { awk -v m="$2" '$1=="require" && $2==m {print $3} $1==m {print $2}' "$ROOT/hack/tools/$1/go.mod" | head -1; }
OLM_VERSION=$(modver olm github.com/operator-framework/operator-lifecycle-manager)
OPM_VERSION=$(modver olm github.com/operator-framework/operator-registry)
HELM_VERSION=$(modver helm helm.sh/helm/v3)
CRANE_VERSION=$(modver crane github.com/google/go-containerregistry)
OPERATOR_SDK_VERSION=$(modver operator-sdk github.com/operator-framework/operator-sdk)

OLM_BIN=$ROOT/bin/olm/$OLM_VERSION          # olm, catalog, package-server, copy-content, cpb, opm, grpc_health_probe
HELM=$ROOT/bin/helm-$HELM_VERSION
CRANE=$ROOT/bin/crane-$CRANE_VERSION
OPERATOR_SDK=$ROOT/bin/operator-sdk-$OPERATOR_SDK_VERSION
OLM_WORK=$NODE_DIR/olm                      # rendered manifests, local bundles/catalog, images.env
OLM_NAMESPACE=olm                           # OLM's own namespace and the global catalog namespace
CATALOG_SOURCE=etcd-operator-catalog
PACKAGE=etcd-operator

# The TLS endpoint of the node's registry (hack/node/registry.sh), for `operator-sdk run bundle`: it reads the
# index image over TLS only. Its CA is trusted per process through SSL_CERT_FILE=$REGISTRY_TLS_BUNDLE.
REGISTRY_TLS=localhost:5443
REGISTRY_TLS_DIR=$NODE_DIR/registry-tls
REGISTRY_TLS_BUNDLE=$REGISTRY_TLS_DIR/ca-bundle.crt

# release_commit VERSION: the commit of a release's source, named in releases/<v>/source-commit: a clone of main
# alone carries no tags, but the commit is in main's history. The tag, when present, must agree.
release_commit() {
  local rel=$1 commit tagged
  commit=$(cat "$ROOT/releases/$rel/source-commit")
  if ! git -C "$ROOT" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "release $rel: commit $commit (releases/$rel/source-commit) is not in this clone's history (shallow clone?)" >&2
    return 1
  fi
  if tagged=$(git -C "$ROOT" rev-parse -q --verify "refs/tags/v$rel^{commit}"); then
    [ "$tagged" = "$commit" ] || { echo "release $rel: tag v$rel is $tagged, releases/$rel/source-commit says $commit" >&2; return 1; }
  fi
  echo "$commit"
}

# release_source VERSION: the directory holding a release's source tree (extracted from its commit once).
release_source() {
  local rel=$1 src=$OLM_WORK/src/v$1 commit
  commit=$(release_commit "$rel") || return 1
  if [ "$(cat "$src.commit" 2>/dev/null)" != "$commit" ]; then
    rm -rf "$src" && mkdir -p "$src"
    git -C "$ROOT" archive "$commit" | tar -x -C "$src"
    echo "$commit" >"$src.commit"
  fi
  echo "$src"
}

# The OLM module's source directory (deploy/chart, CRDs), from the module cache (downloaded alone: no build).
olm_module_dir() {
  (cd "$OLM_TOOLS" && GOWORK=off go mod download -json "github.com/operator-framework/operator-lifecycle-manager@$OLM_VERSION" |
    awk -F'"' '$2=="Dir" {print $4}')
}

# OLM's chart rendered by `make olm-render` (hack/olm/render-chart.sh) from the pinned module with OLM's upstream
# values and hack/olm/values.yaml, committed; its header names the OLM version and the digest of what produced it.
OLM_RENDER=$OLM_HACK/olm.yaml
OLM_VALUES=$OLM_HACK/values.yaml
# chart_digest MODULE_DIR: the digest of the chart (Chart.yaml, values, templates), OLM's upstream values and ours.
chart_digest() {
  local templates
  mapfile -t templates < <(cd "$1" && LC_ALL=C ls deploy/chart/templates/* | LC_ALL=C sort)
  (cd "$1" && cat deploy/chart/Chart.yaml deploy/chart/values.yaml "${templates[@]}" deploy/upstream/values.yaml) |
    cat - "$OLM_VALUES" | sha256sum | cut -c1-16
}
# render_header KEY: a value of the committed render's header ("# KEY: value").
render_header() { sed -n "s/^# $1: //p" "$OLM_RENDER" | head -1; }

# wait_watching DESCRIPTION TIMEOUT STATE_FN DIAGNOSE_FN CMD...: polls CMD every second until it succeeds, printing the
# one-line state STATE_FN reports whenever it changes (progress on a slow, loaded node); on timeout runs DIAGNOSE_FN
# (events, logs, conditions of what was waited on) and fails.
wait_watching() {
  local what=$1 timeout=$2 state_fn=$3 diag_fn=$4; shift 4
  local deadline=$((SECONDS + timeout)) last="" now start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    now=$("$state_fn" 2>/dev/null || true)
    if [ "$now" != "$last" ]; then log "waiting for $what: $now"; last=$now; fi
    if [ $SECONDS -ge $deadline ]; then
      log "timed out after ${timeout}s waiting for $what; diagnostics:"
      "$diag_fn" >&2 || true
      die "timed out after ${timeout}s waiting for $what ($now)"
    fi
    sleep 1
  done
  log "waited $((SECONDS - start))s for $what"
}
