#!/usr/bin/env bash
# Prints the resident memory of the local cluster: each component started by cluster-up (each node's containerd,
# kubelet and kube-proxy under node-<i>/ when there are several), the containerd shims, and the containers (every
# process in the nodes' kubepods cgroups), with the total.
source "$(dirname "$0")/lib.sh"
source "$HACK/nodes.sh"

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

total=0
mib() { awk -v kb="$1" 'BEGIN {printf "%8.1f MiB", kb / 1024}'; }
row() { printf '%-26s %s\n' "$1" "$(mib "$2")"; total=$((total + $2)); }

for f in $(cd "$PIDS" && find . -name '*.pid' | sort); do
  name=${f#./}
  row "${name%.pid}" "$(rss_kb "$(cat "$PIDS/$f")")"
done
shims=0
for i in $(node_indexes); do
  select_node "$i"
  for pid in $(node_shims "$N_SOCK"); do shims=$((shims + $(rss_kb "$pid"))); done
done
row "containerd shims" "$shims"
containers=0
for pid in $(find /sys/fs/cgroup/memory/kubepods* /sys/fs/cgroup/memory/etcdop-node-* -name cgroup.procs 2>/dev/null |
  xargs cat 2>/dev/null | sort -u); do
  containers=$((containers + $(rss_kb "$pid")))
done
row "containers (kubepods)" "$containers"
printf '%-26s %s\n' total "$(mib "$total")"
