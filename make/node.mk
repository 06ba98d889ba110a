# The local Kubernetes cluster of three nodes (built from sources, no registry pulls) and the e2e suite on it.
# Included by the top Makefile; uses its LOCALBIN, VERSION and KUBECTL. The harness lives in hack/node/
# (see hack/node/README.md); everything it writes is under bin/node and /run/etcd-operator-node.

NODE_DIR ?= $(LOCALBIN)/node
NODE_KUBECONFIG ?= $(NODE_DIR)/kubeconfig
# Ginkgo label filter of `make test-e2e`; the default runs every scenario but the chaos run (label "chaos",
# `make test-chaos`), the monitoring one (label "prometheus", `make test-monitoring`: it needs a Prometheus
# server, the longest build of the suite) and the node events (label "nodes", `make test-nodes`). On a cluster of
# three nodes or more it also runs the placement specs (labels "nodes" and "placement"), which take nothing away
# from the nodes. The scaling, upgrade, healing and operator-failover scenarios carry the label "membership":
# E2E_LABEL_FILTER=membership runs only them, E2E_LABEL_FILTER='!membership && !chaos && !prometheus && !nodes'
# the others (~2 min).
E2E_LABEL_FILTER ?=
# Ginkgo label filter of `make test-nodes`: the node events, which take nodes away; the placement specs run in
# `make test-e2e` (NODES_LABEL_FILTER=nodes runs them here too).
NODES_LABEL_FILTER ?= nodes && !placement
E2E_TIMEOUT ?= 60m
# Parallel Ginkgo processes: the specs mostly wait for pods, so three at a time take about a third of the time; the specs
# that change the operator itself are Serial and run alone, after the others.
E2E_PROCS ?= 3
# More ginkgo CLI flags, e.g. E2E_ARGS='--focus="heals a member"'.
E2E_ARGS ?=

##@ Local node and e2e

# Nodes of the local cluster: 3 by default, or 2-9, each a network namespace of its own with its own containerd,
# kubelet and kube-proxy, labelled zone-<i>; or 1, the machine itself (hack/node/nodes.sh). Empty: a running
# cluster keeps its count, a new one has three.
NODES ?=

.PHONY: cluster-up
cluster-up: ## Start the local cluster (cold: builds Kubernetes, etcd, CoreDNS, images; warm: <1 min); three nodes, NODES=1 for one. KUBECONFIG=bin/node/kubeconfig
	NODES=$(NODES) hack/node/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local node and undo its processes, mounts, iptables chains, bridge, cgroups and sysctls (PURGE=1: drop caches too).
	hack/node/cluster-down.sh

.PHONY: cert-manager-node
cert-manager-node: ## Install cert-manager's CRDs and its CA issuer controller (built offline) on the running local node; before the operator starts.
	hack/node/cert-manager.sh

.PHONY: images
images: ## Build the operator, etcd, pause and busybox images offline and push them to the node's registry (localhost:5000); test-e2e adds MinIO.
	VERSION=$(VERSION) hack/node/images.sh

##@ Test

.PHONY: test-e2e
test-e2e: cluster-up minio ginkgo ## Install cert-manager (hack/node/cert-manager.sh), deploy the operator (make deploy) on the local node and run the e2e suite (tests/e2e) but the chaos and monitoring scenarios.
	VERSION=$(VERSION) MINIO_BIN=$(MINIO) FAILPOINT_IMAGE=1 hack/node/images.sh
	hack/node/cert-manager.sh
	KUBECONFIG=$(NODE_KUBECONFIG) $(MAKE) deploy IMG=$$(cat $(NODE_DIR)/operator-image)
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) \
		E2E_FAILPOINT_IMAGE=$$(cat $(NODE_DIR)/operator-image-failpoints) E2E_KUBELET_ROOT=$$(ls -d $(NODE_DIR)/state/kubelet $(NODE_DIR)/state/nodes/node-*/kubelet 2>/dev/null | paste -sd:) \
		$(GINKGO) run --tags e2e --procs $(E2E_PROCS) --timeout $(E2E_TIMEOUT) -v \
		--label-filter="$$(hack/node/e2e-label-filter.sh '$(E2E_LABEL_FILTER)')" $(E2E_ARGS) ./tests/e2e

.PHONY: test-nodes
test-nodes: ginkgo ## The node events (label "nodes", one at a time) on a local cluster of three nodes in three zones (a running cluster of another size is taken down first): drains, partitions, a node powered off, two nodes lost. The placement specs run in test-e2e.
	@if [ -f $(NODE_DIR)/state/node-count ] && [ "$$(cat $(NODE_DIR)/state/node-count)" != 3 ]; then \
		echo "test-nodes: the running cluster has $$(cat $(NODE_DIR)/state/node-count) node(s): taking it down for three"; \
		hack/node/cluster-down.sh; fi
	NODES=3 hack/node/cluster-up.sh
	VERSION=$(VERSION) hack/node/images.sh
	KUBECONFIG=$(NODE_KUBECONFIG) $(MAKE) deploy IMG=$$(cat $(NODE_DIR)/operator-image)
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) \
		E2E_NODE_FAULT=$(CURDIR)/hack/node/fault.sh \
		$(GINKGO) run --tags e2e --procs 1 --timeout 40m -v --label-filter='$(NODES_LABEL_FILTER)' $(E2E_ARGS) ./tests/e2e

.PHONY: test-monitoring
test-monitoring: cluster-up ginkgo prometheus ## The monitoring e2e scenario: a real Prometheus server beside the local node scrapes a cluster's members and the operator, with the alerting rules loaded.
	VERSION=$(VERSION) hack/node/images.sh
	KUBECONFIG=$(NODE_KUBECONFIG) $(MAKE) deploy IMG=$$(cat $(NODE_DIR)/operator-image)
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) \
		E2E_PROMETHEUS=$(PROMETHEUS) \
		$(GINKGO) run --tags e2e --timeout 20m -v --label-filter='prometheus' $(E2E_ARGS) ./tests/e2e

# The Helm chart on the local node (tests/helm, build tag helm): the chart packaged at its version and the next patch
# version, pushed to the node's registry over TLS (oci://localhost:5443/charts), installed, upgraded under a running
# 3-member EtcdCluster, uninstalled. Assumes the node is up (make cluster-up). Like test-olm-run, it first removes the
# deployment of an operator from `make deploy` (two operators would reconcile the same clusters) and does not put it
# back; the suite also replaces the project's CRDs with the chart's (once no EtcdCluster or EtcdBackup is left on the
# node) and leaves them installed.
HELM_NODE_TIMEOUT ?= 20m
HELM_NODE_ARGS ?=

.PHONY: test-helm-node
test-helm-node: helm ## The Helm chart from the node's OCI registry on a running local node (make cluster-up): install, upgrade to the next chart version under a running cluster (no member restarted), uninstall (CRDs and EtcdClusters stay).
	VERSION=$(VERSION) hack/node/images.sh
	$(KUBECTL) --kubeconfig $(NODE_KUBECONFIG) -n etcd-operator-system delete deployment --all --ignore-not-found --wait=true
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) HELM=$(HELM) HELM_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) \
	  HELM_REGISTRY=localhost:5443 HELM_REGISTRY_TLS_BUNDLE=$(NODE_DIR)/registry-tls/ca-bundle.crt \
	  HELM_ETCD_VERSION=$(ETCD_VERSION:v%=%) \
	  go test -tags helm ./tests/helm/... -count=1 -timeout $(HELM_NODE_TIMEOUT) -v -ginkgo.v $(HELM_NODE_ARGS)
