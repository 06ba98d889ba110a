#!/usr/bin/env bash
# Builds crdify from the pinned wrapper module hack/tools/crdify into bin/crdify-<version> (make crdify): make
# crdify-check runs it on the previous release's CRDs and bundle/'s.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
mod=$ROOT/hack/tools/crdify
version=$(awk '$1=="require" && $2=="sigs.k8s.io/crdify" {print $3} $1=="sigs.k8s.io/crdify" {print $2}' "$mod/go.mod" | head -1)
go_build_stale "${OUT:-$ROOT/bin/crdify-$version}" "$(stamp_of "$mod/go.mod" "$mod/go.sum")" "$mod" sigs.k8s.io/crdify
