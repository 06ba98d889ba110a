#!/usr/bin/env bash
# Builds OLM v0 and the tools the OLM harness needs, from their pinned Go modules (no other downloads):
#   bin/olm/<OLM version>/{olm,catalog,package-server,copy-content,cpb}  hack/tools/olm (CGO_ENABLED=0 -tags json1)
#   bin/olm/<OLM version>/{opm,grpc_health_probe}  the operator-registry and grpc-health-probe versions OLM itself
#     pins, static (CGO_ENABLED=0: the images have no libc; opm's sqlite paths are unused by `opm serve` and
#     `opm alpha bundle extract`, the two commands the images run)
#   bin/helm-<version>   renders OLM's chart (deploy/chart in the OLM module), as OLM's release does
#   bin/crane-<version>  sets OLM's image labels on images built by nodetool
# Each group is rebuilt only when its wrapper module (go.mod/go.sum) changed.
source "$(dirname "$0")/lib.sh"

# built DIR-OR-FILE MODULE_DIR: true when the outputs exist and were built from the module's current go.sum.
stamp_of() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }
fresh() { [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$(stamp_of "$2")" ]; }

gobuild() { # MODULE_DIR CGO OUT_DIR_OR_FILE TAGS LDFLAGS PKG...
  local dir=$1 cgo=$2 out=$3 tags=$4 ldflags=$5; shift 5
  (cd "$dir" && CGO_ENABLED=$cgo GOWORK=off go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out" "$@")
}

OLM_PKG=github.com/operator-framework/operator-lifecycle-manager
if ! fresh "$OLM_BIN" "$OLM_TOOLS"; then
  log "building OLM $OLM_VERSION, opm $OPM_VERSION and grpc_health_probe (cold: ~10 min on a busy machine)"
  mkdir -p "$OLM_BIN"
  gobuild "$OLM_TOOLS" 0 "$OLM_BIN/" json1 \
    "-X $OLM_PKG/pkg/version.GitCommit=$OLM_VERSION -X $OLM_PKG/pkg/version.OLMVersion=${OLM_VERSION#v}" \
    $OLM_PKG/cmd/olm $OLM_PKG/cmd/catalog $OLM_PKG/cmd/package-server $OLM_PKG/cmd/copy-content $OLM_PKG/util/cpb
  gobuild "$OLM_TOOLS" 0 "$OLM_BIN/opm" json1,containers_image_openpgp \
    "-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$OPM_VERSION" \
    github.com/operator-framework/operator-registry/cmd/opm
  gobuild "$OLM_TOOLS" 0 "$OLM_BIN/grpc_health_probe" "" "" github.com/grpc-ecosystem/grpc-health-probe
  stamp_of "$OLM_TOOLS" >"$OLM_BIN.stamp"
fi

if ! fresh "$HELM" "$ROOT/hack/tools/helm"; then
  log "building helm $HELM_VERSION"
  gobuild "$ROOT/hack/tools/helm" 0 "$HELM" "" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    helm.sh/helm/v3/cmd/helm
  stamp_of "$ROOT/hack/tools/helm" >"$HELM.stamp"
fi

if ! fresh "$CRANE" "$ROOT/hack/tools/crane"; then
  log "building crane $CRANE_VERSION"
  gobuild "$ROOT/hack/tools/crane" 0 "$CRANE" "" "" github.com/google/go-containerregistry/cmd/crane
  stamp_of "$ROOT/hack/tools/crane" >"$CRANE.stamp"
fi
