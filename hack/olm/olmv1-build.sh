#!/usr/bin/env bash
# Builds OLM v1 (catalogd and operator-controller, one pinned module: hack/tools/olmv1) into bin/olmv1/<version>,
# unless the module is unchanged since the last build. olmv1-up.sh runs it; .ci/run runs it ahead, in the background.
source "$(dirname "$0")/lib.sh"
OLMV1_VERSION=$(modver olmv1 github.com/operator-framework/operator-controller)
OLMV1_BIN=$ROOT/bin/olmv1/$OLMV1_VERSION
OLMV1_TOOLS=$ROOT/hack/tools/olmv1
stamp=$(cat "$OLMV1_TOOLS/go.mod" "$OLMV1_TOOLS/go.sum" | sha256sum | cut -c1-16)
if [ "$(cat "$OLMV1_BIN.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "building OLM v1 $OLMV1_VERSION (catalogd, operator-controller; cold: ~10 min on a busy machine)"
  mkdir -p "$OLMV1_BIN"
  (cd "$OLMV1_TOOLS" && CGO_ENABLED=0 GOWORK=off go build -trimpath -tags containers_image_openpgp \
    -ldflags "-s -w -X github.com/operator-framework/operator-controller/internal/shared/version.version=$OLMV1_VERSION" \
    -o "$OLMV1_BIN/" github.com/operator-framework/operator-controller/cmd/catalogd \
    github.com/operator-framework/operator-controller/cmd/operator-controller)
  echo "$stamp" >"$OLMV1_BIN.stamp"
fi
