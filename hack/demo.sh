#!/usr/bin/env bash
# make demo: from a fresh machine, bring up the local cluster (three nodes), deploy the operator with kustomize, create the
# design's EtcdCluster and wait until it is Available; then print what to do next.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export KUBECONFIG="$root/bin/node/kubeconfig"
kubectl=$(make -s --no-print-directory print-kubectl)
started=$(date +%s)
step() { printf '\n==> [%ss] %s\n' "$(($(date +%s) - started))" "$*"; }

step "local cluster of three nodes: etcd, Kubernetes v1.33.13, containerd, CoreDNS, storage, registry (cold: ~30 min of builds; warm: ~1 min)"
make --no-print-directory cluster-up
step "images: operator and etcd, built offline and pushed to localhost:5000"
make --no-print-directory images
image=$(cat bin/node/operator-image)
step "operator: make deploy IMG=$image"
make --no-print-directory deploy IMG="$image"
"$kubectl" -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=5m

# The README's sample cluster; offline, the etcd image comes from the node's registry instead of gcr.io.
step "EtcdCluster prod-etcd: 3 members of etcd 3.5.35, 1Gi each, backups at 02:00"
"$kubectl" apply --server-side -f - <<'YAML'
apiVersion: etcd.seedops.io/v1beta1
kind: EtcdCluster
metadata:
  name: prod-etcd
  namespace: default
spec:
  version: 3.5.35
  replicas: 3
  storageSize: 1Gi
  backupSchedule: "0 2 * * *"
  repository: localhost:5000/etcd
YAML
step "waiting until prod-etcd is Available"
"$kubectl" wait --for=condition=Available etcdcluster/prod-etcd --timeout=10m
"$kubectl" get etcdcluster,statefulset,pods,pdb,cronjob,svc -l app.kubernetes.io/instance=prod-etcd
"$kubectl" get etcdcluster prod-etcd

step "done in $(($(date +%s) - started)) s"
cat <<EOF

What next:
  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$kubectl
  kubectl get etcdcluster prod-etcd -o yaml            # status: conditions, members, leader, versions
  kubectl exec prod-etcd-0 -- /usr/local/bin/etcdctl member list -w table
  kubectl exec prod-etcd-0 -- /usr/local/bin/etcdctl put hello world; kubectl exec prod-etcd-1 -- /usr/local/bin/etcdctl get hello
  kubectl patch etcdcluster prod-etcd --type merge -p '{"spec":{"replicas":5}}'        # scale through learners
  kubectl patch etcdcluster prod-etcd --type merge -p '{"spec":{"version":"3.6.16"}}'  # rolling upgrade
  kubectl describe etcdcluster prod-etcd                # events for every step
  Clients in the cluster: https://prod-etcd-client.default.svc.cluster.local:2379 with the client
  certificate in Secret prod-etcd-client-tls (tls.crt, tls.key, ca.crt; see docs/tls.md)
Tear down:
  make cluster-down
EOF
