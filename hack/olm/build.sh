#!/usr/bin/env bash
# Builds OLM v0 and the tools the OLM harness needs, from their pinned Go modules (no other downloads):
#   bin/olm/<OLM version>/{olm,catalog,package-server,copy-content,cpb}  hack/tools/olm (CGO_ENABLED=0 -tags json1)
#   bin/olm/<OLM version>/{opm,grpc_health_probe}  the operator-registry and grpc-health-probe versions OLM itself
#     pins, static (CGO_ENABLED=0: the images have no libc; opm's sqlite paths are unused by `opm serve` and
#     `opm alpha bundle extract`, the two commands the images run)
#   bin/crane-<version>  sets OLM's image labels on images built by nodetool
# Each is rebuilt only when its wrapper module (go.mod/go.sum) changed. OLM's chart is not rendered here: olm-up
# installs the committed render (hack/olm/olm.yaml, `make olm-render`, the only user of helm).
source "$(dirname "$0")/lib.sh"

OLM_PKG=github.com/operator-framework/operator-lifecycle-manager
olm_stamp=$(stamp_of "$OLM_TOOLS/go.mod" "$OLM_TOOLS/go.sum")
LDFLAGS="-X $OLM_PKG/pkg/version.GitCommit=$OLM_VERSION -X $OLM_PKG/pkg/version.OLMVersion=${OLM_VERSION#v}" \
  go_build_stale "$OLM_BIN/" "$olm_stamp" "$OLM_TOOLS" \
  "$OLM_PKG/cmd/olm $OLM_PKG/cmd/catalog $OLM_PKG/cmd/package-server $OLM_PKG/cmd/copy-content $OLM_PKG/util/cpb" -tags json1
LDFLAGS="-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$OPM_VERSION" \
  go_build_stale "$OLM_BIN/opm" "$olm_stamp" "$OLM_TOOLS" github.com/operator-framework/operator-registry/cmd/opm \
  -tags json1,containers_image_openpgp
go_build_stale "$OLM_BIN/grpc_health_probe" "$olm_stamp" "$OLM_TOOLS" github.com/grpc-ecosystem/grpc-health-probe
go_build_stale "$CRANE" "$(stamp_of "$ROOT/hack/tools/crane/go.mod" "$ROOT/hack/tools/crane/go.sum")" \
  "$ROOT/hack/tools/crane" github.com/google/go-containerregistry/cmd/crane

# Every earlier release's operator, compiled with the flags images.sh builds its image with (operator_image), so
# that the Go build cache holds it: built here, ahead of the node stages (.ci/run), images.sh only links it.
for rel in $(cd "$ROOT/releases" && ls | sort -V); do
  [ "$rel" = "${VERSION:-}" ] && continue
  src=$(release_source "$rel")
  (cd "$src" && CGO_ENABLED=0 GOWORK=off go build -trimpath -o /dev/null ./cmd)
done
