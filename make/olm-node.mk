# OLM v0 on the local node (hack/olm): OLM built from its pinned module, the operator installed through it in every
# install mode, upgraded through a manual InstallPlan, and through `operator-sdk run bundle`. Included by the top
# Makefile; uses its VERSION, LOCALBIN, KUBECTL and the node settings of make/node.mk.

OLM_WORK ?= $(NODE_DIR)/olm
# Ginkgo label filter of `make test-olm` (labels: install-modes, upgrade, kustomize, operator-sdk; olmv1 is `make test-olmv1`).
OLM_LABEL_FILTER ?= !olmv1
OLM_TEST_TIMEOUT ?= 60m
OLM_TEST_ARGS ?=
# The release the upgrade scenarios start from: the newest frozen release under releases/ older than VERSION.
OLM_PREVIOUS_VERSION ?= $(shell ls releases | grep -v '^$(VERSION)$$' | sort -V | tail -1)

##@ OLM on the local node

.PHONY: olm-build
olm-build: ## Build OLM v0, opm/grpc_health_probe for images and crane from hack/tools (cold: ~10 min on a busy machine).
	hack/olm/build.sh

.PHONY: olm-render
olm-render: ## Render OLM's chart into hack/olm/olm.yaml (committed; builds helm): after changing the OLM version or hack/olm/values.yaml.
	hack/olm/render-chart.sh

.PHONY: olm-render-check
olm-render-check: ## Check (no helm) that hack/olm/olm.yaml is the render of the pinned OLM version's chart; part of make test.
	hack/olm/render-check.sh

.PHONY: olm-images
olm-images: ## Build and push OLM, opm, bundle (every release and VERSION) and catalog images to the node's registry.
	VERSION=$(VERSION) hack/olm/images.sh

.PHONY: olm-up
olm-up: cluster-up ## Install OLM v0 on the local node and serve the local catalog (CatalogSource olm/etcd-operator-catalog).
	VERSION=$(VERSION) hack/olm/olm-up.sh

.PHONY: olm-down
olm-down: ## Remove every OLM install, the catalog, OLM and its CRDs from the local node.
	hack/olm/olm-down.sh

.PHONY: olmv1-up
olmv1-up: olm-up kustomize ## Install OLM v1 (catalogd, operator-controller) next to OLM v0 and serve the catalog as a ClusterCatalog.
	VERSION=$(VERSION) KUSTOMIZE=$(KUSTOMIZE) hack/olm/olmv1-up.sh

.PHONY: olmv1-down
olmv1-down: ## Remove OLM v1 (ClusterExtensions, ClusterCatalogs, its namespace and CRDs) from the local node.
	hack/olm/olmv1-down.sh

##@ Test

.PHONY: test-olmv1
test-olmv1: olmv1-up ## Install the bundle through OLM v1 (ClusterExtension from the ClusterCatalog) on the local node.
	$(MAKE) --no-print-directory test-olm-run OLM_LABEL_FILTER=olmv1

.PHONY: test-olm
test-olm: olm-up ## Install, upgrade and remove the operator through OLM v0 and operator-sdk on the local node (tests/olm).
	$(MAKE) --no-print-directory test-olm-run

.PHONY: test-olm-run
# test-olm-run runs tests/olm on a node where OLM is already up (test-olm and test-olmv1 bring it up first).
test-olm-run: operator-sdk kustomize
	@# An operator from `make deploy` would reconcile the same clusters: remove its deployment (not its CRD, which
	@# EtcdClusters of others depend on).
	$(KUBECTL) --kubeconfig $(NODE_KUBECONFIG) -n etcd-operator-system delete deployment --all --ignore-not-found --wait=true
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) OPERATOR_SDK=$(OPERATOR_SDK) \
	  OLM_IMAGES_ENV=$(OLM_WORK)/images.env OLM_CURRENT_VERSION=$(VERSION) OLM_PREVIOUS_VERSION=$(OLM_PREVIOUS_VERSION) \
	  OLM_REGISTRY_TLS_BUNDLE=$(NODE_DIR)/registry-tls/ca-bundle.crt \
	  OLM_RELEASE_SOURCES=$(OLM_WORK)/src KUSTOMIZE=$(KUSTOMIZE) \
	  go test -tags olm ./tests/olm/... -count=1 -timeout $(OLM_TEST_TIMEOUT) -v \
	    -ginkgo.v -ginkgo.label-filter='$(OLM_LABEL_FILTER)' $(OLM_TEST_ARGS)
