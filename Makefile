# etcd-operator Makefile. Every tool is pinned and built into ./bin from the Go module proxy on first use;
# no target downloads anything else.

VERSION ?= 0.3.0
IMAGE_TAG_BASE ?= ghcr.io/seedops/etcd-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
CHANNELS ?= stable,candidate
DEFAULT_CHANNEL ?= stable
BUNDLE_CHANNELS := --channels=$(CHANNELS)
BUNDLE_DEFAULT_CHANNEL := --default-channel=$(DEFAULT_CHANNEL)
BUNDLE_METADATA_OPTS ?= $(BUNDLE_CHANNELS) $(BUNDLE_DEFAULT_CHANNEL)
CONTAINER_TOOL ?= docker

# Every Go build here (tests, tools, the operator's images) uses the images' flags: static, paths trimmed.
# Builds with other flags share no compiled package (CGO_ENABLED changes package net, on which nearly everything
# depends), so on an empty build cache each dependency would be compiled once per set of flags. No DWARF is
# compiled: the tools and images are linked stripped (-s -w) anyway, the tests are never run under a debugger,
# and a cold build takes ~15% less time (stack traces and profiles use the symbol table, which stays).
export CGO_ENABLED ?= 0
export GOFLAGS ?= -trimpath -gcflags=all=-dwarf=false

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

LOCALBIN ?= $(shell pwd)/bin
# bin/ holds tools and the node's state (container snapshots come and go): a go.mod there makes it a module
# of its own, so `./...` (go vet, controller-gen) never walks into it.
_ := $(shell mkdir -p $(LOCALBIN) && { [ -f $(LOCALBIN)/go.mod ] || echo 'module bin' > $(LOCALBIN)/go.mod; })
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

## Pinned versions.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
# MinIO, the S3-compatible server the object-store backup tests run against (it has no semver tags).
MINIO_VERSION ?= v0.0.0-20260212201848-7aac2a2c5b7c
# The ginkgo CLI (it runs the node suites' specs in parallel processes) matches the Ginkgo library of go.mod.
GINKGO_VERSION := $(shell awk '$$1=="github.com/onsi/ginkgo/v2" {print $$2}' go.mod)
# Kubernetes and etcd versions come from the wrapper modules under hack/tools (one place to change them).
K8S_VERSION := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/tools/kubernetes/go.mod)
ETCD_VERSION := $(shell awk '$$1=="go.etcd.io/etcd/server/v3" {print $$2}' hack/tools/etcd/go.mod)
# cert-manager, whose controller the envtest suites run (hack/certmanager wraps its library module).
CERT_MANAGER_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/cert-manager/cert-manager" {print $$3}' hack/certmanager/go.mod)
# crdify, the CRD upgrade checker of OLM v1's upgrade-safety preflight (the version operator-controller runs).
CRDIFY_VERSION := $(shell awk '$$1=="require" && $$2=="sigs.k8s.io/crdify" {print $$3}' hack/tools/crdify/go.mod)
HELM_VERSION := $(shell awk '$$1=="require" && $$2=="helm.sh/helm/v3" {print $$3} $$1=="helm.sh/helm/v3" {print $$2}' hack/tools/helm/go.mod | head -1)

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
MINIO ?= $(LOCALBIN)/minio-$(MINIO_VERSION)
GINKGO ?= $(LOCALBIN)/ginkgo-$(GINKGO_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
CRDIFY ?= $(LOCALBIN)/crdify-$(CRDIFY_VERSION)
KUBE_BIN := $(LOCALBIN)/k8s/$(K8S_VERSION)
ETCD_BIN := $(LOCALBIN)/etcd/$(ETCD_VERSION)
# The newest of the node's further etcd versions (hack/node/tools/etcd-<version>).
ETCD_NEXT_VERSION := $(shell ls hack/node/tools | sed -n 's/^etcd-//p' | sort -V | tail -1)
ETCD_NEXT_BIN := $(LOCALBIN)/etcd/$(ETCD_NEXT_VERSION)
KUBECTL ?= $(KUBE_BIN)/kubectl
# The cert-manager controller built from hack/certmanager, and that version's CRDs (crds/).
CERT_MANAGER_DIR := $(LOCALBIN)/cert-manager-$(CERT_MANAGER_VERSION)
# envtest finds kube-apiserver and etcd here (a directory of links to the binaries built from source).
ENVTEST_ASSETS := $(LOCALBIN)/envtest/$(K8S_VERSION)-etcd-$(ETCD_VERSION)
# How long envtest waits for its etcd and kube-apiserver to start (its own default is 20 s). CI runs the envtest
# suites beside the node stages at the lowest CPU weight, where a kube-apiserver took longer than that.
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 2m

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help (targets of the same section are listed together, whichever file defines them).
	@awk 'BEGIN {FS = ":.*##"} \
	  /^##@/ { sec = substr($$0, 5); if (!(sec in seen)) { seen[sec] = 1; order[++n] = sec }; next } \
	  /^[a-zA-Z_0-9-]+:.*?##/ { lines[sec] = lines[sec] sprintf("  \033[36m%-18s\033[0m %s\n", $$1, $$2) } \
	  END { printf "\nUsage:\n  make \033[36m<target>\033[0m\n"; \
	        for (i = 1; i <= n; i++) if (lines[order[i]] != "") printf "\n\033[1m%s\033[0m\n%s", order[i], lines[order[i]] }' $(MAKEFILE_LIST)

##@ Development

# The markers live in api/ (CRDs, DeepCopy) and controllers/ (RBAC). Named, not ./...: controller-gen walks
# every directory of a ./... pattern, bin/ included, where the local node's kubelet unmounts pod volumes
# while the walk reads them.
CONTROLLER_GEN_PATHS ?= ./api/...;./controllers/...

# Generated into a scratch directory, then each file is renamed over the committed one only when its content
# changed: a file is never half-written while a concurrent reader (envtest loading the CRDs, kustomize, a Go
# build) reads it, and an unchanged file keeps its time.
.PHONY: manifests
manifests: controller-gen | $(LOCALBIN) ## Generate CRDs and RBAC from markers (api/v1alpha1's types copied from api/v1beta1's first).
	@hack/api-copy.sh
	@tmp=$$(mktemp -d $(LOCALBIN)/manifests.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="$(CONTROLLER_GEN_PATHS)" \
		output:crd:artifacts:config=$$tmp/crd output:rbac:artifacts:config=$$tmp/rbac && \
	for f in $$tmp/crd/*.yaml; do cmp -s $$f config/crd/bases/$${f##*/} || mv $$f config/crd/bases/; done && \
	{ cmp -s $$tmp/rbac/role.yaml config/rbac/role.yaml || mv $$tmp/rbac/role.yaml config/rbac/; }

.PHONY: generate
generate: controller-gen | $(LOCALBIN) ## Generate api/v1alpha1's types from api/v1beta1's, then DeepCopy methods (as manifests: renamed into place when changed).
	@hack/api-copy.sh
	@tmp=$$(mktemp -d $(LOCALBIN)/generate.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	for pkg in $$(go list -f '{{.Dir}}' ./api/...); do dir=$${pkg#$(CURDIR)/}; \
		$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./$$dir" output:object:dir=$$tmp/$$dir && \
		{ [ ! -f $$tmp/$$dir/zz_generated.deepcopy.go ] || cmp -s $$tmp/$$dir/zz_generated.deepcopy.go $$dir/zz_generated.deepcopy.go || \
			mv $$tmp/$$dir/zz_generated.deepcopy.go $$dir/; } || exit 1; done

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## golangci-lint with the bug-finding linters of .golangci.yml (every build tag's files).
	$(GOLANGCI_LINT) run --timeout 10m --max-issues-per-linter 0 --max-same-issues 0 ./...

##@ Test

.PHONY: test
test: manifests generate fmt vet envtest etcd etcd-next minio helm kustomize cert-manager ## Unit, golden-file, real-etcd, real-S3, envtest and Helm chart suites, then the OLM render check and helm lint (offline).
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" ETCD_BIN_DIR="$(ETCD_BIN)" ETCD_NEXT_BIN_DIR="$(ETCD_NEXT_BIN)" MINIO_BIN="$(MINIO)" CERT_MANAGER_DIR="$(CERT_MANAGER_DIR)" \
	  HELM="$(HELM)" KUSTOMIZE="$(KUSTOMIZE)" VERSION="$(VERSION)" go test -tags failpoints $$(go list ./... | grep -v /tests/e2e) -coverprofile cover.out
	$(MAKE) olm-render-check helm-lint crdify-check

.PHONY: test-chart
test-chart: helm kustomize ## The Helm chart alone: its generated files are current and it renders what config/default installs (tests/chart).
	HELM="$(HELM)" KUSTOMIZE="$(KUSTOMIZE)" VERSION="$(VERSION)" go test ./tests/chart -count=1

.PHONY: helm-lint
helm-lint: helm ## helm lint the chart (strict, at the oldest Kubernetes the operator supports).
	$(HELM) lint --strict --kube-version 1.30.0 charts/etcd-operator

# The release OLM upgrades from: the newest frozen release under releases/ older than VERSION.
CRDIFY_PREVIOUS_VERSION ?= $(shell ls releases | grep -v '^$(VERSION)$$' | sort -V | tail -1)

.PHONY: crdify-check
crdify-check: crdify ## bundle/'s CRDs pass OLM v1's CRD upgrade-safety check (crdify, configured as operator-controller) from the previous release's (offline).
	@prev=releases/$(CRDIFY_PREVIOUS_VERSION)/bundle/manifests; fail=0; \
	for old in $$(grep -l '^kind: CustomResourceDefinition' $$prev/*.yaml); do \
		new=bundle/manifests/$${old##*/}; \
		if [ ! -f $$new ]; then echo "crdify-check: $$new missing: the CRD of $$old was removed"; fail=1; continue; fi; \
		if ! out=$$($(CRDIFY) --config hack/tools/crdify/config.yaml file://$$old file://$$new); then \
			echo "$$out" | grep -v '✓'; \
			echo "crdify-check: $$new: OLM v1 refuses this upgrade from $(CRDIFY_PREVIOUS_VERSION) (unsafe changes above)"; fail=1; \
		else echo "crdify-check: $${old##*/} from $(CRDIFY_PREVIOUS_VERSION): safe"; fi; \
	done; exit $$fail

.PHONY: test-bundle
test-bundle: bundle-check bundle-validate operatorhub ## bundle/ regenerates unchanged from config/ and the API markers, and it and catalog/ pass the OperatorHub, community and opm checks; the community submission tree builds and validates (offline).

##@ Benchmarks

.PHONY: bench
bench: etcd ## Benchmarks (not tests): Go benchmarks against real etcd, point-in-time restore of 1 GiB (bench-restore), the envtest scale run, served load (bench-served), the node figures (bench-node), then the report (~1 h warm).
	mkdir -p $(BENCH_DIR)
	{ ETCD_BIN_DIR="$(ETCD_BIN)" go test -run '^$$' -bench . -benchtime 3x ./internal/membership/ && \
	  ETCD_BIN_DIR="$(ETCD_BIN)" go test -run '^$$' -bench BackupRestore -benchtime 1x -timeout 30m ./internal/backup/ && \
	  ETCD_BIN_DIR="$(ETCD_BIN)" go test -run '^$$' -bench CaptureThroughput -benchtime 20000x -timeout 30m ./internal/backup/continuous/ && \
	  echo "load: $$(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"; } | tee $(BENCH_DIR)/go-bench.txt
	$(MAKE) --no-print-directory bench-restore bench-envtest bench-envtest-limit bench-envtest-large bench-served bench-node bench-report

##@ Development

.PHONY: update-golden
update-golden: ## Rewrite golden files from the builders.
	go test ./internal/resources/... -update

##@ Build

.PHONY: chart
chart: manifests ## Regenerate the Helm chart's generated files: crds/ (config/crd/bases), the RBAC rules (config/rbac) and the version (VERSION).
	VERSION="$(VERSION)" go test ./tests/chart -run '^TestGenerated$$' -count=1 -update

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary.
	go build -o bin/manager ./cmd

.PHONY: run
run: manifests generate fmt vet ## Run the controller from your host against the current kubeconfig.
	go run ./cmd

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine and internet).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

# The platforms the CSV declares (operatorframework.io/arch.* labels); offline, hack/node/images.sh builds the same
# image index for the local node.
PLATFORMS ?= linux/amd64,linux/arm64
.PHONY: docker-buildx
docker-buildx: ## Build and push the operator image for every platform of PLATFORMS as one image index (needs docker buildx and internet).
	$(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) --tag $(IMG) .

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: manifests kustomize kubectl ## Install CRDs into the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: uninstall
uninstall: manifests kustomize kubectl ## Remove CRDs.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: manifests kustomize kubectl ## Deploy the operator with kustomize (image IMG).
	@# The image is set on a throwaway copy of config/, so the tree stays as committed even if apply fails.
	@# --force-conflicts: these manifests are the source of truth, also for CRDs an earlier OLM install applied.
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -r config "$$tmp/" && \
	  (cd "$$tmp/config/manager" && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	  $(KUSTOMIZE) build "$$tmp/config/default" | $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: kustomize kubectl ## Remove the operator.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

##@ Demo

.PHONY: demo
demo: ## Local node + operator (make deploy) + the sample EtcdCluster, waited for until Available.
	hack/demo.sh

.PHONY: print-kubectl
print-kubectl: kubectl
	@echo $(KUBECTL)

##@ Tools (built from pinned sources into ./bin)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN)
$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT)
$(GOLANGCI_LINT): | $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

.PHONY: crdify
crdify: ## Build crdify from its pinned wrapper module (hack/tools/crdify) into bin/ (make crdify-check).
	OUT=$(CRDIFY) hack/build-crdify.sh

.PHONY: helm
helm: ## Build helm from its pinned wrapper module (hack/tools/helm) into bin/ (the chart checks and make olm-render).
	OUT=$(HELM) hack/build-helm.sh

.PHONY: ginkgo
ginkgo: $(GINKGO)
$(GINKGO): | $(LOCALBIN)
	$(call go-install-tool,$(GINKGO),github.com/onsi/ginkgo/v2/ginkgo,$(GINKGO_VERSION))

.PHONY: kustomize
kustomize: $(KUSTOMIZE)
$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: minio
minio: $(MINIO) ## Build the MinIO server (S3-compatible, for the backup tests) from its pinned module (cold: ~5 min).
$(MINIO): | $(LOCALBIN)
	@# Static (CGO_ENABLED=0): the same binary runs on the host for tests and in the node's MinIO image. Locked as
	@# go-install-tool.
	flock $@.lock sh -c '[ -x $@ ] || { tmp=$$(mktemp -d) && GOBIN=$$tmp CGO_ENABLED=0 go install github.com/minio/minio@$(MINIO_VERSION) && mv $$tmp/minio $@ && rm -rf $$tmp; }'

.PHONY: kubectl
kubectl: $(KUBECTL)
$(KUBECTL):
	hack/build-kube.sh kubectl

.PHONY: etcd
etcd: $(ETCD_BIN)/etcd ## Build etcd, etcdctl and etcdutl from the pinned etcd modules.
$(ETCD_BIN)/etcd:
	hack/build-etcd.sh

.PHONY: etcd-next
etcd-next: $(ETCD_NEXT_BIN)/etcd ## Build the newest etcd the node also runs, for the real-etcd tests of what only it has.
$(ETCD_NEXT_BIN)/etcd:
	ETCD_MODULE=hack/node/tools/etcd-$(ETCD_NEXT_VERSION) OUT=$(ETCD_NEXT_BIN) hack/build-etcd.sh etcd

.PHONY: cert-manager
cert-manager: ## Build the cert-manager controller (CA issuers) from hack/certmanager and copy its CRDs, into bin/cert-manager-<version>.
	hack/build-certmanager.sh

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd ## Build envtest's kube-apiserver and etcd from source (cold: ~15 min).
$(KUBE_BIN)/kube-apiserver:
	hack/build-kube.sh kube-apiserver
$(ENVTEST_ASSETS)/kube-apiserver: $(KUBE_BIN)/kube-apiserver
	mkdir -p $(ENVTEST_ASSETS) && ln -sf $< $@
$(ENVTEST_ASSETS)/etcd: $(ETCD_BIN)/etcd
	mkdir -p $(ENVTEST_ASSETS) && ln -sf $< $@

# go-install-tool installs a pinned Go tool as <name>-<version> so a version bump rebuilds it. Under a lock on
# <name>-<version>.lock: two makes at once (CI runs make test beside the node stages) build a tool once, the
# second waits for the first and finds it built.
define go-install-tool
@flock "$(1).lock" sh -c '[ -f "$(1)" ] || { \
set -e; \
echo "Installing $(2)@$(3)" ;\
tmp=$$(mktemp -d) ;\
GOBIN=$$tmp go install $(2)@$(3) ;\
mv $$tmp/* $(1) ;\
rm -rf $$tmp ;\
}'
endef

# Further targets, one file per area: OLM packaging (bundle, catalog, scorecard) and the local node / e2e.
-include make/*.mk
