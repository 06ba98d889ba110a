#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl (or the commands named) from the pinned wrapper module into $OUT (default
# bin/etcd/<version>). ETCD_MODULE names another wrapper module (hack/node/tools/etcd-<version>).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/hack/lib/build.sh"
if [ -n "${ETCD_MODULE:-}" ]; then
  mod=$(cd "$ETCD_MODULE" && pwd) main=./cmd/etcd
else
  mod=$ROOT/hack/tools/etcd main=github.com/seedops/etcd-operator/hack/tools/etcd/cmd/etcd
fi
version=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$mod/go.mod")
ETCD_MAIN=$main build_etcd "$mod" "${OUT:-$ROOT/bin/etcd/$version}" "$@"
