#!/usr/bin/env bash
# Injects a node fault into the local cluster (hack/node/nodes.sh), or takes it back:
#   fault.sh power-off NODE   kubelet, kube-proxy, containerd, the shims and every container process of NODE
#                             killed at once; nothing cleaned up (mounts, volumes, data stay): the Node goes
#                             NotReady, its pods stay bound to it
#   fault.sh power-on NODE    its containerd, kubelet and kube-proxy started again, on the same disk
#   fault.sh partition NODE   its end of the host bridge taken down: its kubelet and pods keep running but reach
#                             nothing (no peer, no API server), and nothing reaches them
#   fault.sh heal NODE        the bridge link up again
#   fault.sh nodes            the nodes' names, one per line
# Partitions need NODES>1 (a node in the host's own namespace cannot be cut off from it).
source "$(dirname "$0")/cluster-up.sh"
[ "$(id -u)" = 0 ] || die "run as root"

cmd=${1:-} name=${2:-}
if [ "$cmd" = nodes ]; then
  for i in $(node_indexes); do select_node "$i"; echo "$N_NAME"; done
  exit 0
fi
[ -n "$name" ] || die "usage: $0 power-off|power-on|partition|heal NODE, or $0 nodes"
i=$(node_index "$name")
select_node "$i"
case $cmd in
  power-off)
    kill_node_processes "$i"
    log "$name powered off"
    ;;
  power-on)
    NODE_IP=$(node_ip) PKI=$STATE/pki
    start_containerd "$i"
    start_kubelet "$i"
    start_kube_proxy "$i"
    log "$name powered on"
    ;;
  partition | heal)
    [ "$i" != 0 ] || die "$name is the host's own namespace: partitions need NODES>1"
    if [ "$cmd" = partition ]; then ip link set "etcdop-veth-$i" down; else ip link set "etcdop-veth-$i" up; fi
    log "$name $([ "$cmd" = partition ] && echo partitioned || echo healed)"
    ;;
  *) die "unknown fault '$cmd' (power-off, power-on, partition, heal, nodes)" ;;
esac
