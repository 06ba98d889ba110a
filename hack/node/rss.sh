#!/usr/bin/env bash
# Prints the resident memory of the local cluster: each component started by cluster-up (each node's containerd,
# kubelet and kube-proxy under node-<i>/ when there are several), the containerd shims, and the containers (every
# process in the nodes' kubepods cgroups), with the total. With CPU_SECONDS=N, each row also shows the CPU it used
# over the next N seconds, in thousandths of a core (the cost at rest when nothing else changes meanwhile).
source "$(dirname "$0")/lib.sh"
source "$HACK/nodes.sh"

rss_kb() { local v; v=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null); echo "${v:-0}"; }
# CPU ticks (user + system) a process has used so far.
ticks() { local v; v=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null); echo "${v:-0}"; }
CPU_SECONDS=${CPU_SECONDS:-0}
HZ=$(getconf CLK_TCK)

# rows: one line per component, "name pid pid ...".
rows=()
for f in $(cd "$PIDS" && find . -name '*.pid' | sort); do
  name=${f#./}
  rows+=("${name%.pid} $(cat "$PIDS/$f")")
done
shims=""
for i in $(node_indexes); do
  select_node "$i"
  shims+=" $(node_shims "$N_SOCK" | tr '\n' ' ')"
done
rows+=("containerd-shims $shims")
containers=$(find /sys/fs/cgroup/memory/kubepods* /sys/fs/cgroup/memory/etcdop-node-* -name cgroup.procs 2>/dev/null |
  xargs cat 2>/dev/null | sort -u | tr '\n' ' ' || true)
rows+=("containers(kubepods) $containers")

sum() { local f=$1 n=0 pid; shift; for pid in "$@"; do n=$((n + $($f "$pid"))); done; echo $n; }
declare -a before=()
if [ "$CPU_SECONDS" -gt 0 ]; then
  for i in "${!rows[@]}"; do before[i]=$(sum ticks ${rows[i]#* }); done
  sleep "$CPU_SECONDS"
fi
total=0 total_cpu=0
mib() { awk -v kb="$1" 'BEGIN {printf "%8.1f MiB", kb / 1024}'; }
for i in "${!rows[@]}"; do
  set -- ${rows[i]}
  name=$1; shift
  kb=$(sum rss_kb "$@")
  total=$((total + kb))
  if [ "$CPU_SECONDS" -gt 0 ]; then
    used=$(( $(sum ticks "$@") - before[i] ))
    [ "$used" -ge 0 ] || used=0 # a process that ended meanwhile took its ticks with it
    total_cpu=$((total_cpu + used))
    printf '%-26s %s %6d m\n' "$name" "$(mib "$kb")" $((used * 1000 / HZ / CPU_SECONDS))
  else
    printf '%-26s %s\n' "$name" "$(mib "$kb")"
  fi
done
if [ "$CPU_SECONDS" -gt 0 ]; then
  printf '%-26s %s %6d m (thousandths of a core over %ss)\n' total "$(mib "$total")" $((total_cpu * 1000 / HZ / CPU_SECONDS)) "$CPU_SECONDS"
  exit 0
fi
printf '%-26s %s\n' total "$(mib "$total")"
