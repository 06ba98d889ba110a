#!/usr/bin/env bash
# Starts the node's image registry (Debian's docker-registry, plain HTTP on :5000, data in bin/node/registry)
# unless it already runs. containerd pulls from it at localhost:5000; pods reach it at <node IP>:5000.
# A second instance serves the same storage over TLS on :5443 (certificates from a CA of its own in
# bin/node/registry-tls): `operator-sdk run bundle` reads index images over TLS only. Tools trust that CA per process
# with SSL_CERT_FILE=bin/node/registry-tls/ca-bundle.crt (the system CAs plus this one); containerd through
# certs.d/localhost:5443 (cluster-up.sh). Nothing is added to the machine's trust store.
source "$(dirname "$0")/lib.sh"

REGISTRY_TLS=localhost:5443
registry_up() { curl -sf -o /dev/null "http://$REGISTRY/v2/"; }
TLS_DIR=$NODE_DIR/registry-tls
registry_tls_up() { curl -sf -o /dev/null --cacert "$TLS_DIR/ca.crt" "https://$REGISTRY_TLS/v2/"; }

if registry_up && registry_tls_up; then exit 0; fi
command -v docker-registry >/dev/null || die "docker-registry is missing: run hack/node/deps.sh"
mkdir -p "$REGISTRY_DATA" "$RUN_DIR"

# The certificate names the node IP too: pods (OLM v1's catalogd and operator-controller pull images themselves)
# reach the registry there. Regenerated when the node IP changes.
if [ ! -f "$TLS_DIR/registry.crt" ] || [ "$(cat "$TLS_DIR/node-ip" 2>/dev/null)" != "$(node_ip)" ]; then
  mkdir -p "$TLS_DIR"
  openssl ecparam -name prime256v1 -genkey -noout -out "$TLS_DIR/ca.key"
  openssl req -x509 -new -key "$TLS_DIR/ca.key" -subj "/CN=etcd-operator-node-registry-ca" -days 3650 \
    -out "$TLS_DIR/ca.crt"
  openssl ecparam -name prime256v1 -genkey -noout -out "$TLS_DIR/registry.key"
  openssl req -new -key "$TLS_DIR/registry.key" -subj "/CN=localhost" -out "$TLS_DIR/registry.csr"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:%s\n' \
    "$(node_ip)" >"$TLS_DIR/registry.ext"
  openssl x509 -req -in "$TLS_DIR/registry.csr" -CA "$TLS_DIR/ca.crt" -CAkey "$TLS_DIR/ca.key" -CAcreateserial \
    -days 3650 -extfile "$TLS_DIR/registry.ext" -out "$TLS_DIR/registry.crt" 2>/dev/null
  rm -f "$TLS_DIR/registry.csr" "$TLS_DIR/registry.ext"
  node_ip >"$TLS_DIR/node-ip"
fi
cat /etc/ssl/certs/ca-certificates.crt "$TLS_DIR/ca.crt" >"$TLS_DIR/ca-bundle.crt"

cat >"$RUN_DIR/registry.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $REGISTRY_DATA
  delete:
    enabled: true
http:
  addr: :5000
YAML
sed -e 's/^  addr: :5000$/  addr: :5443/' "$RUN_DIR/registry.yml" >"$RUN_DIR/registry-tls.yml"
cat >>"$RUN_DIR/registry-tls.yml" <<YAML
  tls:
    certificate: $TLS_DIR/registry.crt
    key: $TLS_DIR/registry.key
YAML
start registry docker-registry serve "$RUN_DIR/registry.yml"
start registry-tls docker-registry serve "$RUN_DIR/registry-tls.yml"
wait_for "the registry at $REGISTRY" 30 registry_up
wait_for "the TLS registry at $REGISTRY_TLS" 30 registry_tls_up
log "registry ready at $REGISTRY (TLS: $REGISTRY_TLS)"
