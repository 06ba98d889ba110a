#!/usr/bin/env bash
# Prints the Ginkgo label filter of `make test-e2e`: its argument when not empty, else every spec but the chaos
# run, the monitoring scenario and the node events, with the placement specs (which need three nodes and take
# nothing away from them) when the running cluster has three nodes or more.
source "$(dirname "$0")/lib.sh"
source "$HACK/nodes.sh"

if [ -n "${1:-}" ]; then
  echo "$1"
elif [ "$NODES" -ge 3 ]; then
  echo '!chaos && !prometheus && (!nodes || placement)'
else
  echo '!chaos && !prometheus && !nodes'
fi
