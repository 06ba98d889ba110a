#!/usr/bin/env bash
# Builds Kubernetes binaries from the pinned wrapper module into $OUT (default bin/k8s/<version>).
# Usage: hack/build-kube.sh kube-apiserver [kubelet ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/hack/tools/kubernetes
version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$mod/go.mod")
out=${OUT:-$root/bin/k8s/$version}
mkdir -p "$out"
minor=$(echo "$version" | cut -d. -f2)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
for cmd in "$@"; do
  if [ -x "$out/$cmd" ]; then continue; fi
  echo "building $cmd $version (cold build: minutes)" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out/$cmd.tmp" "$out/$cmd"
done
