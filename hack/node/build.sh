#!/usr/bin/env bash
# Builds every host binary the node needs, each only when missing or stale (a warm run does nothing):
#   kube     Kubernetes v1.33 (hack/build-kube.sh): kube-apiserver, kube-controller-manager, kube-scheduler,
#            kubelet, kube-proxy, kubectl
#   etcd     etcd for the control plane and the images (hack/build-etcd.sh)
#   node     what `make test` does not build: the Kubernetes binaries but kube-apiserver (node-kube), and
#            nodetool, CoreDNS, local-path-provisioner, the further etcd versions of the upgrade tests
#            (hack/node/tools/etcd-*) and pause (node-tools, which share no package with the operator or Kubernetes)
# Usage: hack/node/build.sh [kube|etcd|node|node-kube|node-tools ...] (default: kube, etcd and node).
source "$(dirname "$0")/lib.sh"
mkdir -p "$TOOLS_BIN"

# The Kubernetes binaries of the node besides kube-apiserver (envtest's, built by `make test` too).
NODE_KUBE="kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"

# go_tool NAME MODULE_DIR PACKAGE: a command of a wrapper module, rebuilt when the module (go.mod, *.go) changes.
go_tool() {
  local dir=$2
  go_build_stale "$TOOLS_BIN/$1" "$(stamp_of "$dir"/go.mod "$dir"/*.go)" "$dir" "$3"
}

# The pause container, from the C source shipped in the k8s.io/kubernetes module (as upstream builds it).
build_pause() {
  [ -x "$TOOLS_BIN/pause" ] && return 0
  local src
  src=$(cd "$ROOT/hack/tools/kubernetes" && go mod download -json k8s.io/kubernetes | awk -F'"' '$2=="Dir" {print $4}')
  log "building pause $PAUSE_TAG"
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG" -o "$TOOLS_BIN/pause.tmp" "$src/build/pause/linux/pause.c"
  strip "$TOOLS_BIN/pause.tmp"
  mv "$TOOLS_BIN/pause.tmp" "$TOOLS_BIN/pause"
}

build_node_tools() {
  go_tool nodetool "$HACK/tools/nodetool" .
  go_tool coredns "$HACK/tools/coredns" .
  go_tool local-path-provisioner "$HACK/tools/local-path-provisioner" github.com/rancher/local-path-provisioner
  local v
  for v in $EXTRA_ETCD_VERSIONS; do
    build_etcd "$HACK/tools/etcd-$v" "$ROOT/bin/etcd/$v"
  done
  build_pause
}

for part in "${@:-kube etcd node}"; do
  for p in $part; do
    # shellcheck disable=SC2086 # a list of commands
    case $p in
      kube) "$ROOT/hack/build-kube.sh" kube-apiserver $NODE_KUBE ;;
      etcd) "$ROOT/hack/build-etcd.sh" ;;
      node) "$ROOT/hack/build-kube.sh" $NODE_KUBE && build_node_tools ;;
      node-kube) "$ROOT/hack/build-kube.sh" $NODE_KUBE ;;
      node-tools) build_node_tools ;;
      *) die "unknown part $p (kube, etcd, node, node-kube, node-tools)" ;;
    esac
  done
done
