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
  log "node $NODE_NAME at $NODE_IP, Kubernetes $K8S_VERSION, etcd $ETCD_VERSION"
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
write_kubeconfig() { # FILE CERT_NAME
  local file=$1 name=$2
  write_file "$file" 600 <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcd-operator-node
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
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
  gen_cert kubelet "system:node:$NODE_NAME" system:nodes
  gen_cert kube-proxy system:kube-proxy
  # The aggregation layer's client: kube-apiserver proxies to aggregated API servers (OLM's packageserver) with this
  # certificate and the requesting user in X-Remote-* headers.
  gen_cert front-proxy-client front-proxy-client

  for c in controller-manager scheduler kubelet kube-proxy; do write_kubeconfig "$STATE/$c.kubeconfig" "$c"; done
  write_kubeconfig "$KUBECONFIG_PATH" admin
}

# start_containerd: CRI with the pause image from the local registry, plain HTTP to localhost:5000, and
# restrict_oom_score_adj because a VM may lack CAP_SYS_RESOURCE (runc cannot lower oom_score_adj); one CNI bridge
# for the pods, no masquerading (nothing outside the node is reachable anyway).
start_containerd() {
  mkdir -p "$STATE/cni/net.d" "$RUN_DIR/containerd/certs.d/$REGISTRY"
  write_file "$RUN_DIR/containerd/certs.d/$REGISTRY/hosts.toml" <<EOF
server = "http://$REGISTRY"
[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
  # The registry's TLS endpoint (registry.sh; used by `operator-sdk run bundle`), trusted through its own CA.
  mkdir -p "$RUN_DIR/containerd/certs.d/localhost:5443"
  write_file "$RUN_DIR/containerd/certs.d/localhost:5443/hosts.toml" <<EOF
server = "https://localhost:5443"
[host."https://localhost:5443"]
  capabilities = ["pull", "resolve"]
  ca = "$NODE_DIR/registry-tls/ca.crt"
EOF
  write_file "$RUN_DIR/containerd/config.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT/root"
state = "$RUN_DIR/containerd/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_ROOT/opt"
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
        Root = "$RUN_DIR/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$STATE/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$RUN_DIR/containerd/certs.d"
EOF
  write_file "$STATE/cni/net.d/10-etcd-operator-node.conflist" <<EOF
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
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start containerd containerd --config "$RUN_DIR/containerd/config.toml"
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
    --profiling=false
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
  mkdir -p "$STATE/kubelet" "$STATE/pod-logs"
  write_file "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
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
podLogsDir: $STATE/pod-logs
oomScoreAdj: 0
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
  start kubelet "$KUBE_BIN/kubelet" --config="$STATE/kubelet.yaml" --kubeconfig="$STATE/kubelet.kubeconfig" \
    --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" \
    --node-ip="$NODE_IP" --hostname-override="$NODE_NAME"
}

# start_kube_proxy: iptables mode.
start_kube_proxy() {
  write_file "$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
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
  start kube-proxy "$KUBE_BIN/kube-proxy" --config="$STATE/kube-proxy.yaml"
}

# start_local_path_provisioner: local-path-provisioner as the default StorageClass. Its helper pods (busybox, from the local
# registry) create each volume's directory with mode 0777, so members running as any UID can write.
start_local_path_provisioner() {
  local LP=$STATE/local-path BUSYBOX_IMG
  mkdir -p "$LP/volumes"
  BUSYBOX_IMG=$REGISTRY/busybox:$(cat "$NODE_DIR/images/busybox-version")
  write_file "$LP/config.json" <<EOF
{"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["$LP/volumes"]}]}
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
  [ "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_ready() {
  wait_for "node $NODE_NAME Ready" 120 node_ready
  wait_for "CoreDNS" 60 curl -sf http://127.0.0.1:8181/ready
  for p in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns local-path-provisioner registry registry-tls; do
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
  service_route
  start_registry
  certificates
  start_containerd
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  start_coredns
  start_kubelet
  start_kube_proxy
  wait_images
  start_local_path_provisioner
  wait_ready
  log "cluster up in ${SECONDS}s: export KUBECONFIG=$KUBECONFIG_PATH (operator image: $(cat "$NODE_DIR/operator-image"))"
}

main "$@"
