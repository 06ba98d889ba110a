#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl from the pinned wrapper module into $OUT (default bin/etcd/<version>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/hack/tools/etcd
version=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$mod/go.mod")
out=${OUT:-$root/bin/etcd/$version}
mkdir -p "$out"
declare -A pkgs=(
  [etcd]=github.com/seedops/etcd-operator/hack/tools/etcd/cmd/etcd
  [etcdctl]=go.etcd.io/etcd/etcdctl/v3
  [etcdutl]=go.etcd.io/etcd/etcdutl/v3
)
for cmd in "${@:-etcd etcdctl etcdutl}"; do
  for c in $cmd; do
    if [ -x "$out/$c" ]; then continue; fi
    echo "building $c $version" >&2
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/$c.tmp" "${pkgs[$c]}")
    mv "$out/$c.tmp" "$out/$c"
  done
done
