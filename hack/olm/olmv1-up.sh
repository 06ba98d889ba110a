#!/usr/bin/env bash
# Installs OLM v1 (catalogd and operator-controller, one pinned module: hack/tools/olmv1) on the running local node
# from images built offline, with manifests rendered by kustomize from the module's own config: the standard
# overlay's pieces (standard CRDs and RBAC, and the TLS wiring of its cert-manager component), with the certificates
# cert-manager would issue made here by openssl instead (the node has no cert-manager). Then a ClusterCatalog serving
# the OLM v1 variant of the local catalog. Needs olm-up's images (images.sh). Idempotent.
source "$(dirname "$0")/lib.sh"
VERSION=${VERSION:-0.3.0}
[ -f "$KUBECONFIG_PATH" ] || die "no node: run make cluster-up"
source "$HACK/imagelib.sh"
# kustomize: the Makefile's pinned one (make olmv1-up passes it).
KUSTOMIZE=${KUSTOMIZE:?KUSTOMIZE is not set: run make olmv1-up}

"$OLM_HACK/olmv1-build.sh"
OLMV1_VERSION=$(modver olmv1 github.com/operator-framework/operator-controller)
OLMV1_BIN=$ROOT/bin/olmv1/$OLMV1_VERSION
OLMV1_TOOLS=$ROOT/hack/tools/olmv1
[ -f "$OLM_WORK/images.env" ] || VERSION=$VERSION "$OLM_HACK/images.sh"
source "$OLM_WORK/images.env"

declare -A REF
for c in catalogd operator-controller; do
  REF[$c]=$REGISTRY/$c:$OLMV1_VERSION-$(sha256sum "$OLMV1_BIN/$c" | cut -c1-12)
  image "${REF[$c]}" "${BASE_FILES[@]}" --add "$OLMV1_BIN/$c:/$c:0755" --user 65532:65532 --entrypoint "/$c" --workdir /
done

# --- Certificates, as the cert-manager component would issue them: one CA, a serving certificate for each service.
# Both components trust that CA and the registry's (pull-cas-dir, catalogd-cas-dir): ca.crt holds both.
W=$OLM_WORK/olmv1
mkdir -p "$W/pki"
if [ ! -f "$W/pki/ca.crt" ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$W/pki/ca.key"
  openssl req -x509 -new -key "$W/pki/ca.key" -subj "/CN=olmv1-ca" -days 3650 -out "$W/pki/ca.crt"
fi
cert() { # NAME DNS...
  local name=$1; shift
  [ -f "$W/pki/$name.crt" ] && return 0
  openssl ecparam -name prime256v1 -genkey -noout -out "$W/pki/$name.key"
  openssl req -new -key "$W/pki/$name.key" -subj "/CN=$1" -out "$W/pki/$name.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
    "$(printf 'DNS:%s,' "$@" | sed 's/,$//')" >"$W/pki/$name.ext"
  openssl x509 -req -in "$W/pki/$name.csr" -CA "$W/pki/ca.crt" -CAkey "$W/pki/ca.key" -CAcreateserial -days 3650 \
    -extfile "$W/pki/$name.ext" -out "$W/pki/$name.crt" 2>/dev/null
  rm -f "$W/pki/$name.csr" "$W/pki/$name.ext"
}
cert catalogd localhost catalogd-service.olmv1-system.svc catalogd-service.olmv1-system.svc.cluster.local \
  catalogd-webhook-service.olmv1-system.svc
cert operator-controller operator-controller-service.olmv1-system.svc operator-controller-service.olmv1-system.svc.cluster.local
cat "$W/pki/ca.crt" "$REGISTRY_TLS_DIR/ca.crt" >"$W/pki/trust.crt"

# --- Manifests: the module's config, its cert-manager resources replaced by the Secrets above.
rm -rf "$W/render" && mkdir -p "$W/render"
cp -r "$(cd "$OLMV1_TOOLS" && GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/operator-framework/operator-controller)/config" "$W/render/"
chmod -R u+w "$W/render"
secret() { # NAME CERT
  cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: olmv1-system
type: kubernetes.io/tls
data:
  ca.crt: $(base64 -w0 <"$W/pki/trust.crt")
  tls.crt: $(base64 -w0 <"$W/pki/$2.crt")
  tls.key: $(base64 -w0 <"$W/pki/$2.key")
YAML
}
{ secret catalogd-service-cert-git-version catalogd; secret olmv1-cert operator-controller; } >"$W/render/secrets.yaml"
cat >"$W/render/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- secrets.yaml
components:
- config/components/base/standard
- config/components/cert-manager/catalogd
- config/components/cert-manager/operator-controller
images:
- name: quay.io/operator-framework/catalogd
  newName: ${REF[catalogd]%:*}
  newTag: "${REF[catalogd]##*:}"
- name: quay.io/operator-framework/operator-controller
  newName: ${REF[operator-controller]%:*}
  newTag: "${REF[operator-controller]##*:}"
patches:
- target: {group: cert-manager.io, kind: Certificate}
  patch: |
    \$patch: delete
    apiVersion: cert-manager.io/v1
    kind: Certificate
    metadata:
      name: unused
- target: {group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration}
  patch: |
    - op: add
      path: /webhooks/0/clientConfig/caBundle
      value: $(base64 -w0 <"$W/pki/ca.crt")
YAML
"$KUSTOMIZE" build "$W/render" >"$W/olmv1.yaml"
# Container images only (the CRDs' descriptions have "image:" lines without a value).
if grep -E '^\s+(- )?image: \S' "$W/olmv1.yaml" | grep -qv "$REGISTRY/"; then
  die "public image references left in $W/olmv1.yaml"
fi

log "installing OLM v1 $OLMV1_VERSION"
kc apply --server-side --force-conflicts --field-manager=olmv1-up -f "$W/olmv1.yaml" >/dev/null
kc -n olmv1-system rollout status deployment/catalogd-controller-manager --timeout=180s >/dev/null
kc -n olmv1-system rollout status deployment/operator-controller-controller-manager --timeout=180s >/dev/null
warnings=$(kc label --dry-run=server --overwrite ns olmv1-system pod-security.kubernetes.io/enforce=restricted 2>&1 >/dev/null || true)
[ -z "$warnings" ] || die "pods in olmv1-system violate the restricted Pod Security Standard: $warnings"

log "serving the catalog $CATALOG_OLMV1_IMAGE as ClusterCatalog $CATALOG_SOURCE"
kc apply --server-side --force-conflicts --field-manager=olmv1-up -f - >/dev/null <<YAML
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: $CATALOG_SOURCE
spec:
  source:
    type: Image
    image:
      ref: $REGISTRY_POD/${CATALOG_OLMV1_IMAGE#*/}
YAML
kc wait --for=condition=Serving --timeout=180s "clustercatalog/$CATALOG_SOURCE" >/dev/null
log "OLM v1 ready: ClusterCatalog $CATALOG_SOURCE serving"
