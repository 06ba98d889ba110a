#!/usr/bin/env bash
# Builds helm from the pinned wrapper module hack/tools/helm into bin/helm-<version> (make helm): the chart checks
# (make helm-lint, tests/chart) and the render of OLM's chart (make olm-render) use the same binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
mod=$ROOT/hack/tools/helm
version=$(awk '$1=="require" && $2=="helm.sh/helm/v3" {print $3} $1=="helm.sh/helm/v3" {print $2}' "$mod/go.mod" | head -1)
LDFLAGS="-X helm.sh/helm/v3/internal/version.version=$version" \
  go_build_stale "${OUT:-$ROOT/bin/helm-$version}" "$(stamp_of "$mod/go.mod" "$mod/go.sum")" "$mod" helm.sh/helm/v3/cmd/helm
