#!/usr/bin/env bash
# Builds the cert-manager controller of the wrapper module hack/certmanager (the CA issuer's control loops, from
# the cert-manager library module) into bin/cert-manager-<version>/controller, and copies that version's CRDs
# (deploy/crds of the module) next to it, into crds/: the envtest suites run both against their API server.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
mod=$ROOT/hack/certmanager
version=$(awk '$1=="require" && $2=="github.com/cert-manager/cert-manager" {print $3}' "$mod/go.mod")
out=${OUT:-$ROOT/bin/cert-manager-$version}
go_build_stale "$out/controller" "$(stamp_of "$mod/go.mod" "$mod/go.sum" "$mod/main.go")" "$mod" .
if [ ! -f "$out/crds/cert-manager.io_certificates.yaml" ]; then
  src=$(cd "$mod" && GOWORK=off go mod download -json github.com/cert-manager/cert-manager | awk -F'"' '$2=="Dir" {print $4}')
  tmp=$(mktemp -d "$out/crds.XXXXXX")
  cp "$src"/deploy/crds/*.yaml "$tmp"/ && chmod 0755 "$tmp" && chmod 0644 "$tmp"/*.yaml && mv -T "$tmp" "$out/crds"
fi
