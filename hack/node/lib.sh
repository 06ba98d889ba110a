# Shared settings of the local node harness; sourced by the scripts in hack/node.
# Everything the node writes lives under $NODE_DIR (bin/node) and $RUN_DIR (/run/etcd-operator-node).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HACK=$ROOT/hack/node
source "$ROOT/hack/lib/build.sh"

K8S_VERSION=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$ROOT/hack/tools/kubernetes/go.mod")
ETCD_VERSION=$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2}' "$ROOT/hack/tools/etcd/go.mod")
# Further etcd versions, each from its own wrapper module hack/node/tools/etcd-<version> (upgrade tests).
EXTRA_ETCD_VERSIONS=$(cd "$HACK/tools" && ls -d etcd-v* | sed 's/^etcd-//' | sort -V | tr '\n' ' ')
PAUSE_TAG=3.10.1

NODE_DIR=${NODE_DIR:-$ROOT/bin/node}
TOOLS_BIN=$NODE_DIR/bin            # host binaries built by hack/node/build.sh
STATE=$NODE_DIR/state              # this cluster's data: certs, etcd, kubelet; removed by cluster-down
LOGS=$NODE_DIR/logs
REGISTRY_DATA=$NODE_DIR/registry   # image store; kept across cluster-down (the cache of `make images`)
CONTAINERD_ROOT=$NODE_DIR/containerd  # image content and snapshots; kept across cluster-down
RUN_DIR=/run/etcd-operator-node    # sockets, pid files, containerd state (tmpfs)
PIDS=$RUN_DIR/pids
KUBECONFIG_PATH=$NODE_DIR/kubeconfig

KUBE_BIN=$ROOT/bin/k8s/$K8S_VERSION
ETCD_BIN=$ROOT/bin/etcd/$ETCD_VERSION
KUBECTL=$KUBE_BIN/kubectl

REGISTRY=localhost:5000
CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock
CNI_BIN_DIR=/usr/lib/cni

CLUSTER_DOMAIN=cluster.local
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
SERVICE_DEVICE=etcdop-svc0           # portless bridge the Service range is routed to (cluster-up.sh)
API_SERVICE_IP=10.96.0.1
# Ports of the host control plane; etcd avoids 2379/2380 so that a developer's own etcd keeps them.
ETCD_CLIENT_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=6443
NODE_NAME=etcd-operator-node

# Debian packages the node needs (installed by `hack/node/deps.sh`).
APT_PACKAGES="containerd runc containernetworking-plugins iptables conntrack docker-registry busybox-static openssl curl gcc libc6-dev"

log() { printf '[%s %5ss] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# node_ip is the address of the interface of the default route (the hostname resolves to 127.0.0.1 here).
node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="src") {print $(i+1); exit}}')
  if [ -z "$ip" ]; then
    ip=$(ip -4 -o addr show scope global | awk '{sub("/.*","",$4); print $4; exit}')
  fi
  [ -n "$ip" ] || die "no global IPv4 address for the node"
  echo "$ip"
}

# alive PID: the process exists and is not a zombie (PID 1 here reaps orphans only every second or two).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
# pid_alive NAME: the process recorded for NAME still runs (and is still that program: PIDs get reused
# when a machine comes back with a stale /run).
pid_alive() {
  local pid
  [ -f "$PIDS/$1.pid" ] || return 1
  pid=$(cat "$PIDS/$1.pid")
  alive "$pid" && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$1"
}

# start NAME CMD...: runs CMD in its own session (it outlives the calling shell), logs to $LOGS/NAME.log,
# and records its PID in $PIDS/NAME.pid. Does nothing when NAME is already running.
start() {
  local name=$1; shift
  if pid_alive "$name"; then return 0; fi
  mkdir -p "$PIDS" "$LOGS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! >"$PIDS/$name.pid"
}

# wait_for DESCRIPTION TIMEOUT CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
  local what=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then die "timed out after ${timeout}s waiting for $what"; fi
    sleep 0.2
  done
}

kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# write_file FILE [MODE]: writes stdin to FILE only when the content differs, so that running components watching
# their files (kube-proxy exits when its configuration file changes) are left alone by a second cluster-up.
write_file() {
  local f=$1 mode=${2:-644} tmp
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else chmod "$mode" "$tmp" && mv "$tmp" "$f"; fi
}
