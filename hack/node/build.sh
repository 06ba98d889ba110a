#!/usr/bin/env bash
# Builds every host binary the node needs, each only when missing (a warm run does nothing):
#   Kubernetes v1.33 (hack/build-kube.sh), etcd for the control plane and the images (hack/build-etcd.sh and
#   the wrapper modules hack/node/tools/etcd-*), CoreDNS, local-path-provisioner, nodetool, and pause.
source "$(dirname "$0")/lib.sh"
mkdir -p "$TOOLS_BIN"

"$ROOT/hack/build-kube.sh" kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
"$ROOT/hack/build-etcd.sh"

# go_tool NAME MODULE_DIR PACKAGE [extra go build flags]: builds a command of a wrapper module.
go_tool() {
  local name=$1 dir=$2 pkg=$3; shift 3
  local out=$TOOLS_BIN/$name
  # Rebuild when the wrapper module changes (its go.mod pins the version).
  local stamp
  stamp=$(cat "$dir"/go.mod "$dir"/*.go 2>/dev/null | sha256sum | cut -c1-16)
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  log "building $name"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" "$@" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  echo "$stamp" >"$out.stamp"
}

go_tool nodetool "$HACK/tools/nodetool" .
go_tool coredns "$HACK/tools/coredns" .
go_tool local-path-provisioner "$HACK/tools/local-path-provisioner" github.com/rancher/local-path-provisioner

for v in $EXTRA_ETCD_VERSIONS; do
  dir=$HACK/tools/etcd-$v
  out=$ROOT/bin/etcd/$v
  mkdir -p "$out"
  for c in etcd etcdctl etcdutl; do
    [ -x "$out/$c" ] && continue
    case $c in
      etcd) pkg=./cmd/etcd ;;
      *) pkg=go.etcd.io/etcd/$c/v3 ;;
    esac
    log "building $c $v"
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/$c.tmp" "$pkg")
    mv "$out/$c.tmp" "$out/$c"
  done
done

# The pause container, from the C source shipped in the k8s.io/kubernetes module (as upstream builds it).
if [ ! -x "$TOOLS_BIN/pause" ]; then
  src=$(cd "$ROOT/hack/tools/kubernetes" && go mod download -json k8s.io/kubernetes | awk -F'"' '$2=="Dir" {print $4}')
  log "building pause $PAUSE_TAG"
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG" -o "$TOOLS_BIN/pause.tmp" "$src/build/pause/linux/pause.c"
  strip "$TOOLS_BIN/pause.tmp"
  mv "$TOOLS_BIN/pause.tmp" "$TOOLS_BIN/pause"
fi
