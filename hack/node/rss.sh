#!/usr/bin/env bash
# Prints the resident memory of the node: each component started by cluster-up, containerd's shims, and the
# containers (every process in the kubepods cgroups), with the total.
source "$(dirname "$0")/lib.sh"

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

total=0
mib() { awk -v kb="$1" 'BEGIN {printf "%8.1f MiB", kb / 1024}'; }
row() { printf '%-26s %s\n' "$1" "$(mib "$2")"; total=$((total + $2)); }

for f in "$PIDS"/*.pid; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .pid)
  row "$name" "$(rss_kb "$(cat "$f")")"
done
shims=0
for d in /proc/[0-9]*; do
  if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q -- "-address $CONTAINERD_SOCK"; then
    shims=$((shims + $(rss_kb "${d#/proc/}")))
  fi
done
row "containerd shims" "$shims"
containers=0
for pid in $(cat /sys/fs/cgroup/memory/kubepods*/cgroup.procs /sys/fs/cgroup/memory/kubepods*/*/cgroup.procs \
  /sys/fs/cgroup/memory/kubepods*/*/*/cgroup.procs /sys/fs/cgroup/memory/kubepods*/*/*/*/cgroup.procs 2>/dev/null | sort -u); do
  containers=$((containers + $(rss_kb "$pid")))
done
row "containers (kubepods)" "$containers"
printf '%-26s %s\n' total "$(mib "$total")"
