# The node or nodes of the local cluster; sourced after lib.sh by cluster-up.sh, cluster-down.sh, fault.sh, rss.sh.
#
# NODES=3 (the default), or any count from 2 to 9: each node is a network namespace of its own (etcdop-node-<i>),
# as kind makes a node without a container image: its own node IP on a host bridge, pod CIDR, containerd (root, state, socket), runc root,
# cgroup root, kubelet and kube-proxy, labelled with its hostname and the zone zone-<i>. The control plane,
# CoreDNS, the registry and local-path-provisioner stay host processes; the host routes every node's pod CIDR
# to that node, so pods reach each other, the host's services and the API server through the host bridge, and a
# node is cut off (partitioned) by taking its end of the bridge down.
#
# NODES=1: one node, the machine itself: kubelet, kube-proxy and containerd run in the host's network namespace
# and the node IP is the default route's address (lighter, but nothing can fail apart from the rest).
#
# The number of nodes is fixed for the life of the cluster's state: a running cluster keeps its count unless
# NODES says otherwise (then cluster-up refuses, and cluster-down must come first).

NODES_FILE=$STATE/node-count
if [ -z "${NODES:-}" ]; then
  NODES=$(cat "$NODES_FILE" 2>/dev/null || echo 3)
fi
case $NODES in [1-9]) ;; *) die "NODES must be 1 to 9, not '$NODES'" ;; esac

HOST_BRIDGE=etcdop-br0             # the nodes' network: each node's eth0 is a veth into this bridge
HOST_BRIDGE_CIDR=10.250.0.1/24
HOST_BRIDGE_IP=10.250.0.1

# node_indexes: 0 for the single node in the host's namespaces, 1..NODES otherwise.
node_indexes() { if [ "$NODES" = 1 ]; then echo 0; else seq 1 "$NODES"; fi; }

# select_node I: sets the N_* variables of node I (see node_indexes).
#   N_NAME node name, N_IP node IP, N_NETNS network namespace ("" = the host's), N_IN command prefix that runs
#   a program in it, N_STATE its state directory, N_RUN its runtime directory, N_SOCK its containerd socket,
#   N_CTRD_ROOT containerd's root, N_POD_CIDR, N_ZONE, N_CGROUP kubelet's cgroup root, N_API the API server's
#   address seen from the node, N_REGISTRY_HOST the host:port its containerd pulls localhost:5000 and
#   localhost:5443 from, N_P the prefix of its processes' names (pid files and logs).
select_node() {
  local i=$1
  if [ "$i" = 0 ]; then
    N_NAME=$NODE_NAME N_IP=$(node_ip) N_NETNS="" N_IN=() N_STATE=$STATE N_RUN=$RUN_DIR
    N_SOCK=$CONTAINERD_SOCK N_CTRD_ROOT=$CONTAINERD_ROOT N_POD_CIDR=$POD_CIDR N_ZONE="" N_CGROUP=""
    N_API=https://127.0.0.1:$APISERVER_PORT N_REGISTRY_HOST=localhost N_P=""
  else
    N_NAME=$NODE_NAME-$i N_IP=10.250.0.$((10 + i)) N_NETNS=etcdop-node-$i N_IN=(nsenter "--net=/run/netns/etcdop-node-$i")
    N_STATE=$STATE/nodes/node-$i N_RUN=$RUN_DIR/nodes/node-$i N_SOCK=$RUN_DIR/nodes/node-$i/containerd/containerd.sock
    N_CTRD_ROOT=$CONTAINERD_ROOT/node-$i N_POD_CIDR=10.244.$i.0/24 N_ZONE=zone-$i N_CGROUP=/etcdop-node-$i
    N_API=https://$(node_ip):$APISERVER_PORT N_REGISTRY_HOST=$(node_ip) N_P=node-$i/
  fi
  mkdir -p "$PIDS/$N_P" "$LOGS/$N_P" 2>/dev/null || true
}

# node_index NAME: the index of the node named NAME (node_indexes), or fails.
node_index() {
  local i
  for i in $(node_indexes); do
    select_node "$i"
    if [ "$N_NAME" = "$1" ]; then echo "$i"; return 0; fi
  done
  die "no node named '$1' (nodes: $(for i in $(node_indexes); do select_node "$i"; printf '%s ' "$N_NAME"; done))"
}

# node_cgroup_dirs I: node I's cgroup root in every cgroup v1 hierarchy.
node_cgroup_dirs() {
  select_node "$1"
  local h
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$N_CGROUP" ] && echo "$h${N_CGROUP#/}"
  done
}

# node_shims SOCK: the PIDs of the containerd shims started by the containerd listening on SOCK.
node_shims() {
  local d
  for d in /proc/[0-9]*; do
    if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q -- "-address $1"; then echo "${d#/proc/}"; fi
  done
}

# kill_node_processes I: SIGKILL to node I's kubelet, kube-proxy, containerd, shims and every process of its
# containers, as a power cut does: nothing is cleaned up (mounts, network namespaces, data stay).
kill_node_processes() {
  select_node "$1"
  local p pid f
  for p in kubelet kube-proxy containerd; do
    if pid_alive "$N_P$p"; then kill -9 "$(cat "$PIDS/$N_P$p.pid")" 2>/dev/null || true; fi
  done
  for pid in $(node_shims "$N_SOCK"); do kill -9 "$pid" 2>/dev/null || true; done
  if [ -n "$N_CGROUP" ]; then
    for f in $(find $(node_cgroup_dirs "$1") -name cgroup.procs 2>/dev/null); do
      for pid in $(cat "$f" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    done
  fi
}
