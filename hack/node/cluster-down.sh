#!/usr/bin/env bash
# Stops the local node and undoes what cluster-up changed on the machine:
#   pods (through the CRI, so CNI removes their network), every process the harness started (by the PID it
#   recorded), mounts under the node's directories, kubepods cgroups, KUBE-*/CNI-* iptables chains, the cni0
#   bridge, and the sysctls it (or the kubelet) changed.
# The cluster's state (certificates, etcd data, volumes) is removed. Built binaries, the registry's images and
# containerd's image store stay as a cache; PURGE=1 removes them too.
source "$(dirname "$0")/lib.sh"
source "$HACK/nodes.sh"
[ "$(id -u)" = 0 ] || die "run as root"

# stop NAME: SIGTERM to the recorded PID, SIGKILL after 15 s.
stop() {
  local name=$1 pidfile=$PIDS/$1.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if pid_alive "$name"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 150); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      log "$name ($pid) ignored SIGTERM: killing"
      kill -9 "$pid" 2>/dev/null || true
    fi
    log "stopped $name ($pid)"
  fi
  rm -f "$pidfile"
}

# 1. No new pods, then remove every pod sandbox while each node's containerd still runs (a node powered off by a
# test has none running: its processes are killed below).
for i in $(node_indexes); do select_node "$i"; stop "${N_P}kubelet"; done
stop local-path-provisioner
for i in $(node_indexes); do
  select_node "$i"
  if pid_alive "${N_P}containerd" && [ -x "$TOOLS_BIN/nodetool" ]; then
    "$TOOLS_BIN/nodetool" cri-cleanup --endpoint "unix://$N_SOCK" || log "CRI cleanup of $N_NAME incomplete; continuing"
  fi
done

# 2. The other processes, in reverse order of start.
for i in $(node_indexes); do select_node "$i"; stop "${N_P}kube-proxy"; done
[ "$NODES" = 1 ] || stop kube-proxy
for p in coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p"; done
for i in $(node_indexes); do select_node "$i"; stop "${N_P}containerd"; done
for p in registry-tls registry; do stop "$p"; done

# 3. Anything left of the containers: shims of the nodes' containerd, then processes in the kubepods cgroups.
for i in $(node_indexes); do
  select_node "$i"
  for pid in $(node_shims "$N_SOCK"); do
    log "killing leftover shim $pid"
    kill -9 "$pid" 2>/dev/null || true
  done
done
for f in $(find /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*/etcdop-node-* -name cgroup.procs 2>/dev/null); do
  for pid in $(cat "$f" 2>/dev/null); do
    log "killing leftover container process $pid"
    kill -9 "$pid" 2>/dev/null || true
  done
done

# 4. Mounts under the node's directories (deepest first): pod volumes, container rootfs, network namespaces.
for prefix in "$STATE" "$RUN_DIR" "$CONTAINERD_ROOT"; do
  findmnt -rn -o TARGET | awk -v p="$prefix/" 'index($0, p) == 1' | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done
done

# 5. cgroups the kubelet created (empty now), deepest first, in every v1 hierarchy (and the unified one).
for h in /sys/fs/cgroup/*/; do
  for top in "$h"kubepods* "$h"etcdop-node-*; do
    [ -d "$top" ] || continue
    for _ in 1 2 3 4 5; do
      find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$top" ] || break
      sleep 0.5
    done
    [ -d "$top" ] && log "could not remove cgroup $top"
  done
done

# 6. iptables: kube-proxy removes its own rules; then every remaining KUBE-* or CNI-* chain and the rules
# jumping to them (kubelet's canary chains, the portmap plugin's chains).
if [ -x "$KUBE_BIN/kube-proxy" ]; then
  mkdir -p "$LOGS"
  "$KUBE_BIN/kube-proxy" --cleanup >"$LOGS/kube-proxy-cleanup.log" 2>&1 || true
fi
for ipt in iptables ip6tables; do
  command -v "$ipt" >/dev/null || continue
  for table in filter nat mangle raw; do
    { "$ipt-save" -t "$table" 2>/dev/null | grep -E -- '^-A .* -j (KUBE|CNI)-' || true; } | sed 's/^-A //' |
      while read -r rule; do eval "$ipt -t $table -D $rule" 2>/dev/null || true; done
    for chain in $("$ipt-save" -t "$table" 2>/dev/null | awk '/^:(KUBE|CNI)-/ {print substr($1, 2)}'); do
      "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
    done
    for chain in $("$ipt-save" -t "$table" 2>/dev/null | awk '/^:(KUBE|CNI)-/ {print substr($1, 2)}'); do
      "$ipt" -t "$table" -X "$chain" 2>/dev/null || log "could not delete $ipt $table chain $chain"
    done
  done
done

# 7. The pods' bridge, the Service range's route, CNI's result cache for this network, kubelet's log links.
if ip link show cni0 >/dev/null 2>&1; then ip link delete cni0 && log "deleted bridge cni0"; fi
# The nodes' network namespaces (their veths and bridges go with them) and the host bridge.
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^etcdop-node-/ {print $1}'); do
  ip netns delete "$ns" && log "deleted network namespace $ns"
done
if ip link show "$HOST_BRIDGE" >/dev/null 2>&1; then ip link delete "$HOST_BRIDGE" && log "deleted bridge $HOST_BRIDGE"; fi
if ip link show "$SERVICE_DEVICE" >/dev/null 2>&1; then
  ip link delete "$SERVICE_DEVICE" && log "deleted $SERVICE_DEVICE (the route of the Service range)"
fi
rm -f /var/lib/cni/results/etcd-operator-node-* 2>/dev/null || true
if [ -d /var/log/containers ]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
fi
# The directories containerd and the kubelet create there, when nothing else uses them.
rmdir /var/lib/cni/results /var/lib/cni /var/log/containers 2>/dev/null || true

# 8. Kernel settings back to what they were before the first cluster-up.
if [ -f "$RUN_DIR/sysctl.saved" ]; then
  while IFS= read -r kv; do sysctl -q -w "$kv" 2>/dev/null || log "could not restore $kv"; done <"$RUN_DIR/sysctl.saved"
  log "restored sysctls"
fi

# 9. State. Refuse to delete while anything is still mounted there.
if findmnt -rn -o TARGET | grep -q -F -e "$STATE/" -e "$RUN_DIR/"; then
  die "mounts remain under $STATE or $RUN_DIR; not removing them"
fi
rm -rf "$STATE" "$RUN_DIR" "$KUBECONFIG_PATH"
if [ "${PURGE:-0}" = 1 ]; then
  if findmnt -rn -o TARGET | grep -q -F "$CONTAINERD_ROOT/"; then die "mounts remain under $CONTAINERD_ROOT"; fi
  rm -rf "$NODE_DIR"
  log "purged $NODE_DIR"
fi
log "cluster down"
