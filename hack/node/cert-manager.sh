#!/usr/bin/env bash
# Installs cert-manager on the running local node: its CRDs (deploy/crds of the pinned module) and its controller
# (the CA issuer's control loops, hack/certmanager, built by hack/build-certmanager.sh) as a Deployment in the
# namespace cert-manager, from an image built offline like the node's others. cert-manager's webhook and cainjector
# are left out: the suites create only valid objects, and nothing here injects CA bundles. The operator watches
# Certificates only when the API server serves them at its start: one deployed earlier (make deploy, by another
# stage) is restarted, as its status asks a human to. Idempotent.
source "$(dirname "$0")/lib.sh"
[ -f "$KUBECONFIG_PATH" ] || die "no node: run make cluster-up"
source "$HACK/imagelib.sh"

"$ROOT/hack/build-certmanager.sh"
CM_VERSION=$(awk '$1=="require" && $2=="github.com/cert-manager/cert-manager" {print $3}' "$ROOT/hack/certmanager/go.mod")
CM_DIR=$ROOT/bin/cert-manager-$CM_VERSION
ref=$REGISTRY/cert-manager-controller:$CM_VERSION-$(sha256sum "$CM_DIR/controller" | cut -c1-12)
image "$ref" "${BASE_FILES[@]}" --add "$CM_DIR/controller:/controller:0755" --user 65532:65532 --entrypoint /controller --workdir /

kc apply --server-side --force-conflicts -f "$CM_DIR/crds" >/dev/null
kc apply --server-side --force-conflicts -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: cert-manager
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cert-manager
  namespace: cert-manager
---
# What the controllers of hack/certmanager use: cert-manager's own objects, the Secrets they write and read
# (certificates, CA key pairs), and events.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-controller
rules:
- apiGroups: [cert-manager.io]
  resources: [certificates, certificates/status, certificates/finalizers, certificaterequests, certificaterequests/status,
    certificaterequests/finalizers, issuers, issuers/status, clusterissuers, clusterissuers/status]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [cert-manager.io]
  resources: [signers]
  verbs: [approve]
  resourceNames: ["issuers.cert-manager.io/*", "clusterissuers.cert-manager.io/*"]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-controller
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cert-manager-controller
subjects:
- kind: ServiceAccount
  name: cert-manager
  namespace: cert-manager
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cert-manager
  namespace: cert-manager
spec:
  replicas: 1
  selector:
    matchLabels: {app: cert-manager}
  template:
    metadata:
      labels: {app: cert-manager}
    spec:
      serviceAccountName: cert-manager
      securityContext:
        runAsNonRoot: true
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: controller
        image: $ref
        args: [--cluster-resource-namespace=cert-manager]
        resources:
          requests: {cpu: 10m, memory: 64Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
YAML
kc -n cert-manager rollout status deployment/cert-manager --timeout=3m

# An operator (make deploy) whose pod started before the Certificate kind existed watches no Certificates. Both
# times are RFC 3339 in UTC, which compare as text.
OPERATOR_NS=etcd-operator-system OPERATOR_DEPLOYMENT=etcd-operator-controller-manager
operator_started=$(kc -n "$OPERATOR_NS" get pods -l control-plane=controller-manager \
  -o jsonpath='{range .items[*]}{.status.startTime}{"\n"}{end}' 2>/dev/null | sort | head -n 1)
certificates_since=$(kc get crd certificates.cert-manager.io -o jsonpath='{.metadata.creationTimestamp}')
if [ -n "$operator_started" ] && [[ ! "$operator_started" > "$certificates_since" ]]; then
  log "the operator started before cert-manager's Certificate kind existed: restarting it"
  kc -n "$OPERATOR_NS" rollout restart "deployment/$OPERATOR_DEPLOYMENT" >/dev/null
  kc -n "$OPERATOR_NS" rollout status "deployment/$OPERATOR_DEPLOYMENT" --timeout=3m
fi
echo "cert-manager $CM_VERSION: controller $ref"
