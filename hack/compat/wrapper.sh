#!/usr/bin/env bash
# Writes the wrapper module that builds kube-apiserver VERSION (vX.Y.Z) for the compatibility suites:
# hack/tools/kube-apiserver/<minor>/{go.mod,go.sum,tools.go}. k8s.io/kubernetes replaces its staging modules with
# local paths, which do not apply to a module requiring it: each becomes the staging module's release of the same
# patch (v0.Y.Z). Run once per version, then commit the result: the build itself (hack/compat/build.sh) is offline
# but for the module proxy.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && cd .. && pwd)
version=${1:?usage: wrapper.sh vX.Y.Z}
minor=$(echo "$version" | cut -d. -f1,2)
staging=v0.${version#v1.}
dir=$ROOT/hack/tools/kube-apiserver/$minor
mkdir -p "$dir"
modfile=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
gover=$(awk '$1=="go" {print $2; exit}' "$modfile")
{
  echo "// Wrapper module: builds kube-apiserver from k8s.io/kubernetes $version for the compatibility suites"
  echo "// (make test-compat). Written by hack/compat/wrapper.sh."
  echo "module github.com/seedops/etcd-operator/hack/tools/kube-apiserver/$minor"
  echo
  echo "go $gover"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  awk '$2=="=>" && $3 ~ /^\.\/staging\/src\// {print "\t" $1 " => " $1 " '"$staging"'"}' "$modfile"
  echo ")"
} >"$dir/go.mod"
cat >"$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the command this wrapper module builds.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy)
echo "$dir"
