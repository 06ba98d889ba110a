#!/usr/bin/env bash
# Starts the node's image registry (Debian's docker-registry, plain HTTP on :5000, data in bin/node/registry)
# unless it already runs. containerd pulls from it at localhost:5000; pods reach it at <node IP>:5000.
source "$(dirname "$0")/lib.sh"

registry_up() { curl -sf -o /dev/null "http://$REGISTRY/v2/"; }

if registry_up; then exit 0; fi
command -v docker-registry >/dev/null || die "docker-registry is missing: run hack/node/deps.sh"
mkdir -p "$REGISTRY_DATA" "$RUN_DIR"
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
start registry docker-registry serve "$RUN_DIR/registry.yml"
wait_for "the registry at $REGISTRY" 30 registry_up
log "registry ready at $REGISTRY"
