#!/usr/bin/env bash
# Builds Kubernetes binaries from the pinned wrapper module into $OUT (default bin/k8s/<version>).
# Usage: hack/build-kube.sh kube-apiserver [kubelet ...]
# KUBE_MODULE names another wrapper module (hack/tools/kube-apiserver/<minor>: the compatibility suites' versions);
# KUBE_BUILD_TAGS, Go build tags (the compatibility suites build with Kubernetes' `providerless`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
mod=${KUBE_MODULE:-$ROOT/hack/tools/kubernetes}
version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$mod/go.mod")
out=${OUT:-$ROOT/bin/k8s/$version}
minor=$(echo "$version" | cut -d. -f2)
LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
export LDFLAGS
for cmd in "$@"; do
  go_build_stale "$out/$cmd" "" "$mod" "k8s.io/kubernetes/cmd/$cmd" ${KUBE_BUILD_TAGS:+-tags "$KUBE_BUILD_TAGS"}
done
