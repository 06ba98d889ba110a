#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl (or the commands named) from the pinned wrapper module into $OUT (default
# bin/etcd/<version>).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
mod=$ROOT/hack/tools/etcd
version=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$mod/go.mod")
ETCD_MAIN=github.com/seedops/etcd-operator/hack/tools/etcd/cmd/etcd build_etcd "$mod" "${OUT:-$ROOT/bin/etcd/$version}" "$@"
