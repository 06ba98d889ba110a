# The chaos run on the local node: a 3-member cluster with a writer while member pods are
# killed, the operator is killed and one member's network is cut and restored, for CHAOS_DURATION.
# Included by the top Makefile; uses node.mk's NODE_DIR and NODE_KUBECONFIG. Needs root (nsenter, iptables
# into pod network namespaces), like the node itself; run it under the node lock as the other node targets.

CHAOS_DURATION ?= 2m
# CHAOS_SEED replays a fault schedule (the run prints its seed); empty picks one.
CHAOS_SEED ?=

##@ Test

.PHONY: test-chaos
test-chaos: cluster-up ginkgo ## Chaos e2e on the local node for CHAOS_DURATION (default 2m): prints availability and the longest unavailable window.
	VERSION=$(VERSION) hack/node/images.sh
	KUBECONFIG=$(NODE_KUBECONFIG) $(MAKE) deploy IMG=$$(cat $(NODE_DIR)/operator-image)
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) \
		CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) E2E_NODE_FAULT=$(CURDIR)/hack/node/fault.sh \
		$(GINKGO) run --tags e2e --timeout 90m -v --label-filter='chaos' $(E2E_ARGS) ./tests/e2e
