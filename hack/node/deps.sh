#!/usr/bin/env bash
# Installs the Debian packages the node needs, when any is missing: containerd, runc, the CNI plugins,
# iptables, conntrack, docker-registry (the local registry), busybox-static (local-path helper image),
# openssl (certificates), curl, and gcc with a static libc (the pause binary).
source "$(dirname "$0")/lib.sh"

missing() {
  local c
  for c in containerd ctr runc iptables ip6tables conntrack docker-registry openssl curl gcc; do
    command -v "$c" >/dev/null || return 0
  done
  [ -x "$CNI_BIN_DIR/bridge" ] && [ -x "$CNI_BIN_DIR/host-local" ] && [ -x "$CNI_BIN_DIR/portmap" ] || return 0
  [ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] || return 0
  # The helper image copies /bin/busybox alone, so it must be the static build.
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || return 0
  return 1
}

if missing; then
  log "installing Debian packages: $APT_PACKAGES"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $APT_PACKAGES >/dev/null
  missing && die "packages still missing after apt-get install"
fi
exit 0
