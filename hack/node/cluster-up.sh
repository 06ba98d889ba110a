#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster from binaries built from source, as local processes:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy (Kubernetes from
#   hack/tools/kubernetes), containerd + runc + CNI bridge (Debian), CoreDNS (host process, serves
#   cluster.local on the node IP), local-path-provisioner (host process, default StorageClass), and a
#   local image registry on :5000 holding images built offline (hack/node/images.sh).
# Idempotent: what already runs is left alone; a second run on a built machine only checks and waits.
# The admin kubeconfig is written to bin/node/kubeconfig. `hack/node/cluster-down.sh` undoes it all.
# Organised as hack/local-up-cluster.sh upstream: one function per component, and main at the bottom.
source "$(dirname "$0")/lib.sh"
source "$HACK/nodes.sh"

# claim_node: one node per machine, and it belongs to one NODE_DIR: pid files and sockets live in $RUN_DIR, shared
# by every checkout. A node another checkout left up is taken down first (with the node lock held, as every make
# target on the node takes it, such a node is a leftover); starting ours beside it would restart some of its
# processes with our flags and leave the rest running: a mixed node.
claim_node() {
  if [ -f "$RUN_DIR/node-dir" ] && [ "$(cat "$RUN_DIR/node-dir")" != "$NODE_DIR" ]; then
    other=$(cat "$RUN_DIR/node-dir")
    log "the node of $other is up: taking it down first (one node per machine)"
    NODE_DIR=$other "$HACK/cluster-down.sh"
  elif [ ! -f "$RUN_DIR/node-dir" ] && pid_alive kube-apiserver; then
    die "a node of another checkout is up (no $RUN_DIR/node-dir): run that checkout's make cluster-down first"
  fi
  mkdir -p "$RUN_DIR" && echo "$NODE_DIR" >"$RUN_DIR/node-dir"
}

# prepare_state: the node's IP (fixed for the life of its state) and its directories.
prepare_state() {
  NODE_IP=$(node_ip)
  PKI=$STATE/pki
  mkdir -p "$STATE" "$PKI" "$LOGS" "$PIDS" "$RUN_DIR/containerd" "$CONTAINERD_ROOT"
  if [ -f "$STATE/node-ip" ] && [ "$(cat "$STATE/node-ip")" != "$NODE_IP" ]; then
    die "the node IP changed from $(cat "$STATE/node-ip") to $NODE_IP: run hack/node/cluster-down.sh first"
  fi
  echo "$NODE_IP" >"$STATE/node-ip"
  if [ -f "$NODES_FILE" ] && [ "$(cat "$NODES_FILE")" != "$NODES" ]; then
    die "the cluster has $(cat "$NODES_FILE") node(s), not NODES=$NODES: run hack/node/cluster-down.sh first"
  fi
  echo "$NODES" >"$NODES_FILE"
  if [ "$NODES" = 1 ]; then
    log "node $NODE_NAME at $NODE_IP, Kubernetes $K8S_VERSION, etcd $ETCD_VERSION"
  else
    log "$NODES nodes ($NODE_NAME-1..$NODES) behind $HOST_BRIDGE, control plane at $NODE_IP, Kubernetes $K8S_VERSION, etcd $ETCD_VERSION"
  fi
}

# node_network: with several nodes, the host bridge, and for each node its network namespace with a veth into
# the bridge, its node IP, a default route through the host, the host's route to its pod CIDR, its own
# forwarding and bridge-netfilter settings (both are per network namespace), and its cgroup root in every
# hierarchy (cpuset's needs its CPUs and memory nodes before anything can join it).
node_network() {
  [ "$NODES" = 1 ] && return 0
  if ! ip link show "$HOST_BRIDGE" >/dev/null 2>&1; then ip link add "$HOST_BRIDGE" type bridge; fi
  ip addr replace "$HOST_BRIDGE_CIDR" dev "$HOST_BRIDGE"
  ip link set "$HOST_BRIDGE" up
  local i veth h
  for i in $(node_indexes); do
    select_node "$i"
    veth=etcdop-veth-$i
    [ -e "/run/netns/$N_NETNS" ] || ip netns add "$N_NETNS"
    if ! ip link show "$veth" >/dev/null 2>&1; then
      ip link add "$veth" type veth peer name eth0 netns "$N_NETNS"
    fi
    ip link set "$veth" master "$HOST_BRIDGE" up
    "${N_IN[@]}" ip link set lo up
    "${N_IN[@]}" ip addr replace "$N_IP/24" dev eth0
    "${N_IN[@]}" ip link set eth0 up
    "${N_IN[@]}" ip route replace default via "$HOST_BRIDGE_IP"
    ip route replace "$N_POD_CIDR" via "$N_IP"
    "${N_IN[@]}" sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
    for h in /sys/fs/cgroup/*/; do
      case $h in */unified/) continue ;; esac
      mkdir -p "$h${N_CGROUP#/}"
      if [ -f "$h${N_CGROUP#/}/cpuset.cpus" ] && [ -z "$(cat "$h${N_CGROUP#/}/cpuset.cpus")" ]; then
        cat "${h}cpuset.cpus" >"$h${N_CGROUP#/}/cpuset.cpus"
        cat "${h}cpuset.mems" >"$h${N_CGROUP#/}/cpuset.mems"
      fi
    done
  done
}

# kernel_settings: the originals are saved once and put back by cluster-down (kubelet changes some too).
kernel_settings() {
  SYSCTL_SAVED=$RUN_DIR/sysctl.saved
  if [ ! -f "$SYSCTL_SAVED" ]; then
    for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables \
      kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys \
      kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet; do
      v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
    done >"$SYSCTL_SAVED.tmp"
    mv "$SYSCTL_SAVED.tmp" "$SYSCTL_SAVED"
  fi
  sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
}

# service_route: Service IPs lead nowhere until kube-proxy translates them. Without this route a connection to a
# Service IP made before kube-proxy's rule exists follows the default route; this machine's gateway answers
# every TCP connection (HTTP 404), and the kube-apiserver kept such a connection for an APIService's
# availability check and never reached the service (OLM's packageserver stayed FailedDiscoveryCheck "404").
# A bridge without ports (this kernel has no dummy devices) drops them; kube-proxy's DNAT re-routes locally
# sent packets to the pods as before.
service_route() {
  if ! ip link show "$SERVICE_DEVICE" >/dev/null 2>&1; then ip link add "$SERVICE_DEVICE" type bridge; fi
  ip link set "$SERVICE_DEVICE" up
  ip route replace "$SERVICE_CIDR" dev "$SERVICE_DEVICE"
}

# start_registry: the registry, then the images built and pushed in the background while the control plane starts
# (wait_images waits for them).
start_registry() {
  "$HACK/registry.sh"
  "$HACK/images.sh" >"$LOGS/images.log" 2>&1 &
  images_pid=$!
}
wait_images() {
  wait "$images_pid" || { cat "$LOGS/images.log" >&2; die "building images failed (log: $LOGS/images.log)"; }
  log "images ready"
}

# certificates: one CA signs the API server's serving certificate and every client's certificate; a kubeconfig for
# each client.
gen_cert() { # NAME CN [ORG] [SANS]
  local name=$1 cn=$2 org=${3:-} sans=${4:-} subj
  [ -f "$PKI/$name.crt" ] && return 0
  subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
write_kubeconfig() { # FILE CERT_NAME [SERVER]
  local file=$1 name=$2 server=${3:-https://127.0.0.1:$APISERVER_PORT}
  write_file "$file" 600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcd-operator-node
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$name.crt")
    client-key-data: $(base64 -w0 <"$PKI/$name.key")
contexts:
- name: etcd-operator-node
  context:
    cluster: etcd-operator-node
    user: $name
current-context: etcd-operator-node
EOF
}
certificates() {
  if [ ! -f "$PKI/ca.crt" ]; then
    log "generating certificates"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key"
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=etcd-operator-node-ca" -days 3650 -out "$PKI/ca.crt"
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key"
    openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  gen_cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,DNS:$NODE_NAME,IP:127.0.0.1,IP:$NODE_IP,IP:$API_SERVICE_IP"
  gen_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  gen_cert admin admin system:masters
  gen_cert controller-manager system:kube-controller-manager
  gen_cert scheduler system:kube-scheduler
  gen_cert kube-proxy system:kube-proxy
  # The aggregation layer's client: kube-apiserver proxies to aggregated API servers (OLM's packageserver) with this
  # certificate and the requesting user in X-Remote-* headers.
  gen_cert front-proxy-client front-proxy-client

  for c in controller-manager scheduler kube-proxy; do write_kubeconfig "$STATE/$c.kubeconfig" "$c"; done
  write_kubeconfig "$KUBECONFIG_PATH" admin
  # Each node's kubelet has its own identity (the Node authorizer lets it see only its own pods' objects), and
  # the nodes in a namespace of their own reach the API server at the host's address.
  local i
  for i in $(node_indexes); do
    select_node "$i"
    mkdir -p "$N_STATE"
    if [ "$i" = 0 ]; then gen_cert kubelet "system:node:$N_NAME" system:nodes; else gen_cert "kubelet-$N_NAME" "system:node:$N_NAME" system:nodes; fi
    write_kubeconfig "$N_STATE/kubelet.kubeconfig" "$([ "$i" = 0 ] && echo kubelet || echo "kubelet-$N_NAME")" "$N_API"
    write_kubeconfig "$N_STATE/kube-proxy.kubeconfig" kube-proxy "$N_API"
  done
}

# start_containerd I: node I's containerd: CRI with the pause image from the local registry, plain HTTP to
# localhost:5000 (the host's registry: a node in a namespace of its own reaches it at the host's address),
# restrict_oom_score_adj because a VM may lack CAP_SYS_RESOURCE (runc cannot lower oom_score_adj); one CNI bridge
# for the node's pods, no masquerading (nothing outside the cluster is reachable anyway). Run in the node's
# network namespace, so that CNI puts the bridge and the pods' veths there.
start_containerd() {
  select_node "$1"
  local CD=$N_RUN/containerd
  mkdir -p "$N_STATE/cni/net.d" "$CD/certs.d/$REGISTRY" "$CD/certs.d/localhost:5443" "$N_CTRD_ROOT"
  write_file "$CD/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$N_REGISTRY_HOST:5000"
[host."http://$N_REGISTRY_HOST:5000"]
  capabilities = ["pull", "resolve"]
EOF
  # The registry's TLS endpoint (registry.sh; used by `operator-sdk run bundle`), trusted through its own CA.
  write_file "$CD/certs.d/localhost:5443/hosts.toml" <<EOF
server = "https://$N_REGISTRY_HOST:5443"
[host."https://$N_REGISTRY_HOST:5443"]
  capabilities = ["pull", "resolve"]
  ca = "$NODE_DIR/registry-tls/ca.crt"
EOF
  write_file "$CD/config.toml" <<EOF
version = 2
root = "$N_CTRD_ROOT/root"
state = "$CD/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$N_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$N_CTRD_ROOT/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$REGISTRY/pause:$PAUSE_TAG"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$N_RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$N_STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CD/certs.d"
EOF
  write_file "$N_STATE/cni/net.d/10-etcd-operator-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "etcd-operator-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$N_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$N_STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start "${N_P}containerd" "${N_IN[@]}" containerd --config "$CD/config.toml"
}

start_etcd() {
  start etcd "$ETCD_BIN/etcd" --name node --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "node=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
}

# start_apiserver: a running kube-apiserver started with other flags (an older cluster-up) is restarted, so a second
# cluster-up brings the node to what this script says.
api_ready() {
  curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/readyz"
}
start_apiserver() {
  local APISERVER_ARGS=(
    --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" --cert-dir="$STATE/apiserver"
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT"
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key"
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
    --kubelet-preferred-address-types=InternalIP,Hostname
    --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN"
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key"
    --service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC --allow-privileged=true
    --profiling=false
    --requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group
    --requestheader-extra-headers-prefix=X-Remote-Extra-
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key")
  local apiserver_args pid
  apiserver_args=$(printf '%s\n' "${APISERVER_ARGS[@]}" | sha256sum | cut -c1-16)
  if pid_alive kube-apiserver && [ "$(cat "$STATE/kube-apiserver.args" 2>/dev/null)" != "$apiserver_args" ]; then
    log "kube-apiserver flags changed: restarting it"
    pid=$(cat "$PIDS/kube-apiserver.pid")
    kill "$pid"
    for _ in $(seq 150); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then kill -9 "$pid"; fi
  fi
  start kube-apiserver "$KUBE_BIN/kube-apiserver" "${APISERVER_ARGS[@]}"
  echo "$apiserver_args" >"$STATE/kube-apiserver.args"
  wait_for "kube-apiserver" 120 api_ready
  log "kube-apiserver ready"
}

start_controller_manager() {
  start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --profiling=false --node-monitor-grace-period=20s
}

start_scheduler() {
  start kube-scheduler "$KUBE_BIN/kube-scheduler" \
    --kubeconfig="$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
}

# start_coredns: CoreDNS on the node IP answers cluster.local with a 2 s negative cache (etcd peers look each
# other up while they start); names outside the cluster get NXDOMAIN, as this node has no upstream.
start_coredns() {
  write_file "$STATE/resolv.conf" <<EOF
nameserver $NODE_IP
EOF
  write_file "$STATE/Corefile" <<EOF
$CLUSTER_DOMAIN:53 in-addr.arpa:53 ip6.arpa:53 {
    bind $NODE_IP
    errors
    ready 127.0.0.1:8181
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_PATH etcd-operator-node
        pods insecure
        ttl 5
    }
    cache 5 {
        success 9984 5
        denial 9984 2
    }
}
.:53 {
    bind $NODE_IP
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  start coredns "$TOOLS_BIN/coredns" -conf "$STATE/Corefile"
}

# start_kubelet: cgroupfs on cgroup v1, oomScoreAdj 0 as containerd. Disk-based eviction is off (thresholds of 0%, as
# kind sets them): the node shares the machine's disk, whose size and free space are the host's, and a percentage of a
# large thin-provisioned disk evicted every pod, the operator's too, with gigabytes still free; a full disk fails the
# writes themselves instead, which the stages report.
start_kubelet() {
  select_node "$1"
  # The kubelet exits when the runtime does not answer at its start (a node powered on starts both at once).
  wait_for "$N_NAME's containerd" 60 ctr --address "$N_SOCK" version
  mkdir -p "$N_STATE/kubelet" "$N_STATE/pod-logs"
  write_file "$N_STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$N_SOCK
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$NODE_IP]
resolvConf: $STATE/resolv.conf
podLogsDir: $N_STATE/pod-logs$([ -n "$N_CGROUP" ] && printf '\ncgroupRoot: %s' "$N_CGROUP")
oomScoreAdj: 0
nodeLeaseDurationSeconds: 20
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "0%"
  imagefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.inodesFree: "0%"
EOF
  start "${N_P}kubelet" "${N_IN[@]}" "$KUBE_BIN/kubelet" --config="$N_STATE/kubelet.yaml" \
    --kubeconfig="$N_STATE/kubelet.kubeconfig" --root-dir="$N_STATE/kubelet" --cert-dir="$N_STATE/kubelet/pki" \
    --node-ip="$N_IP" --hostname-override="$N_NAME" ${N_ZONE:+--node-labels=topology.kubernetes.io/zone=$N_ZONE}
}

# start_kube_proxy I: iptables mode, in node I's network namespace. With several nodes the host runs one too
# (start_kube_proxy 0, named after no node): the API server and the tests reach Service IPs from the host.
start_kube_proxy() {
  select_node "$1"
  [ "$1" = 0 ] && N_IP=$NODE_IP
  write_file "$N_STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $N_STATE/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $N_NAME
bindAddress: $N_IP
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [primary]
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  start "${N_P}kube-proxy" "${N_IN[@]}" "$KUBE_BIN/kube-proxy" --config="$N_STATE/kube-proxy.yaml"
}

# start_local_path_provisioner: local-path-provisioner as the default StorageClass. Its helper pods (busybox, from the local
# registry) create each volume's directory with mode 0777, so members running as any UID can write.
start_local_path_provisioner() {
  local LP=$STATE/local-path BUSYBOX_IMG paths="" i
  mkdir -p "$LP/volumes"
  BUSYBOX_IMG=$REGISTRY/busybox:$(cat "$NODE_DIR/images/busybox-version")
  # Each node of several has its volumes in a directory of its own (its "disk"); the volume's PV carries the
  # node's affinity either way, so a member's volume cannot follow it to another node.
  for i in $(node_indexes); do
    [ "$i" = 0 ] && continue
    select_node "$i"
    mkdir -p "$N_STATE/volumes"
    paths+="{\"node\": \"$N_NAME\", \"paths\": [\"$N_STATE/volumes\"]}, "
  done
  write_file "$LP/config.json" <<EOF
{"nodePathMap": [$paths{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$LP/volumes"]}]}
EOF
  write_file "$LP/helperPod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  priorityClassName: system-node-critical
  tolerations:
  - key: node.kubernetes.io/disk-pressure
    operator: Exists
    effect: NoSchedule
  containers:
  - name: helper-pod
    image: $BUSYBOX_IMG
    imagePullPolicy: IfNotPresent
EOF
  kc apply --server-side --field-manager=etcd-operator-node -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: local-path-storage
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: local-path-provisioner
  namespace: local-path-storage
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: local-path-config
  namespace: local-path-storage
data:
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
  start local-path-provisioner "$TOOLS_BIN/local-path-provisioner" start \
    --kubeconfig "$KUBECONFIG_PATH" --namespace local-path-storage --provisioner-name rancher.io/local-path \
    --config "$LP/config.json" --helper-pod-file "$LP/helperPod.yaml" --helper-image "$BUSYBOX_IMG" \
    --configmap-name local-path-config --service-account-name local-path-provisioner
}

# wait_ready: until the node can run pods and resolve names, and every process still runs.
node_ready() {
  [ "$(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_ready() {
  local i p
  for i in $(node_indexes); do
    select_node "$i"
    wait_for "node $N_NAME Ready" 120 node_ready "$N_NAME"
    for p in containerd kubelet kube-proxy; do
      pid_alive "$N_P$p" || die "$N_P$p is not running (log: $LOGS/$N_P$p.log)"
    done
  done
  wait_for "CoreDNS" 60 curl -sf http://127.0.0.1:8181/ready
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy coredns local-path-provisioner registry registry-tls; do
    pid_alive "$p" || die "$p is not running (log: $LOGS/$p.log)"
  done
}

main() {
  [ "$(id -u)" = 0 ] || die "the node runs containers and changes iptables and sysctls: run as root"
  claim_node
  "$HACK/deps.sh"
  log "building (cached after the first run)"
  "$HACK/build.sh"
  prepare_state
  kernel_settings
  node_network
  service_route
  start_registry
  certificates
  for i in $(node_indexes); do start_containerd "$i"; done
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  start_coredns
  for i in $(node_indexes); do start_kubelet "$i"; start_kube_proxy "$i"; done
  [ "$NODES" = 1 ] || start_kube_proxy 0
  wait_images
  start_local_path_provisioner
  wait_ready
  log "cluster up in ${SECONDS}s: export KUBECONFIG=$KUBECONFIG_PATH (operator image: $(cat "$NODE_DIR/operator-image"))"
}

# Sourced (hack/node/fault.sh starts one node's processes with these functions), main does not run.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
