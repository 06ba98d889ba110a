# OLM packaging: the ClusterServiceVersion bundle, the file-based catalog and the scorecard.
# Included by the top Makefile; uses its VERSION, IMG, BUNDLE_IMG, CATALOG_IMG, CHANNELS, DEFAULT_CHANNEL,
# BUNDLE_METADATA_OPTS, LOCALBIN, KUSTOMIZE and CONTROLLER_GEN.

# operator-sdk and opm are pinned by their wrapper modules under hack/tools (one place to change them): opm is the
# operator-registry release OLM pins (hack/tools/olm), built static as the OLM harness builds it for its images, so
# that one compilation serves both (only file-based catalogs are used: opm's sqlite paths, which need cgo, are not).
OPERATOR_SDK_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/operator-framework/operator-sdk" {print $$3}' hack/tools/operator-sdk/go.mod)
OPM_VERSION := $(shell awk '$$1=="github.com/operator-framework/operator-registry" {print $$2; exit}' hack/tools/olm/go.mod)
OPERATOR_SDK ?= $(LOCALBIN)/operator-sdk-$(OPERATOR_SDK_VERSION)
OPM ?= $(LOCALBIN)/opm-$(OPM_VERSION)

# The commits the upstream tags point at, and the Kubernetes version operator-sdk's own Makefile stamps in.
OPERATOR_SDK_COMMIT ?= 2016cae87253bef07444dd47c463bdbb27c44c48
OPERATOR_SDK_K8S_VERSION ?= v1.33.1
OPM_COMMIT ?= 19af4a361697de502ae43b0ab5b072973cbe4655

# The file-based catalog: package etcd-operator, one directory per package under catalog/.
PACKAGE_NAME ?= etcd-operator
CATALOG_DIR ?= catalog
BUNDLE_DIR ?= bundle
# The catalog image serves catalog/ with `opm serve`; its base image carries opm.
OPM_BASE_IMG ?= quay.io/operator-framework/opm:$(OPM_VERSION)

##@ OLM packaging

# createdAt is the release date kept in the CSV base (update it when cutting a release); operator-sdk stamps the
# current time into the generated CSV, so `make bundle` puts the pinned value back and reruns leave bundle/ as is.
CSV_BASE := config/manifests/bases/$(PACKAGE_NAME).clusterserviceversion.yaml
BUNDLE_CSV := $(BUNDLE_DIR)/manifests/$(PACKAGE_NAME).clusterserviceversion.yaml

.PHONY: bundle
bundle: manifests chart kustomize operator-sdk ## Generate bundle/ (CSV, CRD, metadata, scorecard config) from config/ and validate it; the Helm chart's generated files with it.
	$(OPERATOR_SDK) generate kustomize manifests -q --interactive=false
	@# Start from an empty bundle/manifests so objects dropped from config/ leave the bundle too. The image is set
	@# on a throwaway copy of config/ so the tree stays as committed whatever IMG is.
	rm -rf $(BUNDLE_DIR)/manifests
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp -r config "$$tmp/" && \
	  (cd "$$tmp/config/manifests" && $(KUSTOMIZE) edit set image controller=$(IMG)) && \
	  $(KUSTOMIZE) build "$$tmp/config/manifests" | \
	  $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS)
	created=$$(awk '$$1=="createdAt:" {print $$2; exit}' $(CSV_BASE)) && [ -n "$$created" ] && \
	  sed -i "s/^    createdAt: .*/    createdAt: $$created/" $(BUNDLE_CSV)
	@# The deprecated API version's owned entries get the current version's resources and descriptors.
	go run ./hack/csvdeprecated $(BUNDLE_CSV)
	$(OPERATOR_SDK) bundle validate ./$(BUNDLE_DIR)

.PHONY: bundle-validate
bundle-validate: operator-sdk opm ## Validate bundle/ with the community catalogs' checks (warnings fail) and catalog/ with opm (offline).
	hack/olm/validate-bundle.sh $(OPERATOR_SDK) ./$(BUNDLE_DIR)
	$(OPM) validate $(CATALOG_DIR)

.PHONY: bundle-check
bundle-check: generate manifests bundle ## Regenerate deepcopy, CRDs, RBAC and bundle/; fail if anything differs from what git has (run in CI).
	@changed=$$(git status --porcelain -- api config $(BUNDLE_DIR) bundle.Dockerfile) && \
	  if [ -n "$$changed" ]; then echo "make generate manifests bundle changed these files; run it and commit the result:"; \
	  echo "$$changed"; git --no-pager diff --stat -- api config $(BUNDLE_DIR) bundle.Dockerfile; exit 1; fi

.PHONY: bundle-build
bundle-build: ## Build the bundle image (needs a container engine).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

# The catalog keeps every released bundle: catalog/etcd-operator/bundles/<csv name>.yaml is rendered once by
# `make catalog` when a version is cut and never rewritten afterwards. channels.yaml is rebuilt from those files:
# every channel in CHANNELS lists every release, each one replacing the release before it and skipping all older
# ones (olm.skipRange), so any installed version upgrades straight to the newest.
CATALOG_PKG_DIR := $(CATALOG_DIR)/$(PACKAGE_NAME)

.PHONY: catalog
catalog: opm ## Render bundle/ into catalog/ as the bundle of VERSION (image BUNDLE_IMG) and rebuild the channels.
	@# opm renders a bundle directory with an empty image: set BUNDLE_IMG, then render once more to replace the
	@# base64 bundle objects with the readable olm.csv.metadata property (the bundle image carries the manifests).
	mkdir -p $(CATALOG_PKG_DIR)/bundles
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(OPM) render ./$(BUNDLE_DIR) -o yaml | sed 's|^image: .*|image: $(BUNDLE_IMG)|' > "$$tmp/bundle.yaml" && \
	  $(OPM) render "$$tmp" -o yaml --migrate-level=bundle-object-to-csv-metadata \
	  > $(CATALOG_PKG_DIR)/bundles/$(PACKAGE_NAME).v$(VERSION).yaml
	printf -- '---\nschema: olm.package\nname: %s\ndefaultChannel: %s\n' $(PACKAGE_NAME) $(DEFAULT_CHANNEL) \
	  > $(CATALOG_PKG_DIR)/package.yaml
	versions=$$(ls $(CATALOG_PKG_DIR)/bundles | sed -n 's/^$(PACKAGE_NAME)\.v\(.*\)\.yaml$$/\1/p' | sort -V) && \
	for channel in $$(echo $(CHANNELS) | tr , ' '); do \
	  printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n' $(PACKAGE_NAME) $$channel; \
	  first=; prev=; \
	  for v in $$versions; do \
	    printf -- '- name: %s.v%s\n' $(PACKAGE_NAME) $$v; \
	    if [ -n "$$prev" ]; then \
	      printf -- '  replaces: %s.v%s\n  skipRange: \x27>=%s <%s\x27\n' $(PACKAGE_NAME) $$prev $$first $$v; \
	    fi; \
	    first=$${first:-$$v}; prev=$$v; \
	  done; \
	done > $(CATALOG_PKG_DIR)/channels.yaml
	$(OPM) validate $(CATALOG_DIR)

# The community catalogs' submission (k8s-operatorhub/community-operators, community-operators-prod): every
# bundle the catalog lists, as released, with ci.yaml, the catalog as a basic template, and the catalog rendered
# for each catalog the template maps to (internal/operatorhub). Copy its operators/ and catalogs/ into a fork.
OPERATORHUB_DIR ?= $(LOCALBIN)/operatorhub
# Catalogs the template maps to, comma-separated; empty: the OpenShift release of the bundle's minKubeVersion.
OPERATORHUB_CATALOGS ?=

.PHONY: operatorhub
operatorhub: opm operator-sdk ## Write the community catalogs' submission tree into OPERATORHUB_DIR (operators/etcd-operator/<version>, ci.yaml, catalog template, rendered catalogs) and validate it.
	catalogs=$$(go run ./hack/operatorhub -version $(VERSION) -package $(PACKAGE_NAME) -out $(OPERATORHUB_DIR) 	  -catalogs '$(OPERATORHUB_CATALOGS)') && 	for c in $$catalogs; do 	  mkdir -p $(OPERATORHUB_DIR)/catalogs/$$c/$(PACKAGE_NAME) && 	  $(OPM) render $(CATALOG_PKG_DIR) -o yaml > $(OPERATORHUB_DIR)/catalogs/$$c/$(PACKAGE_NAME)/catalog.yaml && 	  $(OPM) validate $(OPERATORHUB_DIR)/catalogs/$$c || exit 1; 	done
	for d in $(OPERATORHUB_DIR)/operators/$(PACKAGE_NAME)/*/manifests; do 	  $(OPERATOR_SDK) bundle validate $$(dirname $$d) || exit 1; 	done
	@echo "submission for the catalogs $$(ls $(OPERATORHUB_DIR)/catalogs) in $(OPERATORHUB_DIR)"

.PHONY: catalog-validate
catalog-validate: opm ## Validate the file-based catalog.
	$(OPM) validate $(CATALOG_DIR)

.PHONY: catalog-build
catalog-build: catalog-validate ## Build the catalog image that serves catalog/ with `opm serve` (needs a container engine).
	$(CONTAINER_TOOL) build -f catalog.Dockerfile --build-arg OPM_IMAGE=$(OPM_BASE_IMG) -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image.
	$(CONTAINER_TOOL) push $(CATALOG_IMG)

# Scorecard: the tests in bundle/tests/scorecard/config.yaml run as pods in the cluster of the current kubeconfig
# (no OLM needed). Pass e.g. SCORECARD_ARGS="--untar-image=... --storage-image=..." to use locally built images.
SCORECARD_NAMESPACE ?= default
SCORECARD_WAIT ?= 300s
SCORECARD_ARGS ?=

.PHONY: scorecard
scorecard: operator-sdk ## Run the scorecard tests of bundle/ against the current kubeconfig's cluster.
	$(OPERATOR_SDK) scorecard ./$(BUNDLE_DIR) --namespace=$(SCORECARD_NAMESPACE) --wait-time=$(SCORECARD_WAIT) $(SCORECARD_ARGS)

##@ OLM tools (built from pinned sources into ./bin)

.PHONY: operator-sdk
operator-sdk: $(OPERATOR_SDK) ## Build operator-sdk from hack/tools/operator-sdk (cold: ~5 min idle, ~15 min on a busy machine).
$(OPERATOR_SDK): | $(LOCALBIN)
	@echo "Building operator-sdk $(OPERATOR_SDK_VERSION)"
	flock $@.lock sh -c '[ -x $@ ] || { cd hack/tools/operator-sdk && CGO_ENABLED=0 GOWORK=off go build -trimpath -tags containers_image_openpgp \
	  -ldflags "-s -w \
	    -X github.com/operator-framework/operator-sdk/internal/version.Version=$(OPERATOR_SDK_VERSION) \
	    -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(OPERATOR_SDK_VERSION) \
	    -X github.com/operator-framework/operator-sdk/internal/version.GitCommit=$(OPERATOR_SDK_COMMIT) \
	    -X github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=$(OPERATOR_SDK_K8S_VERSION) \
	    -X github.com/operator-framework/operator-sdk/internal/version.ImageVersion=$(OPERATOR_SDK_VERSION)" \
	  -o $@.tmp github.com/operator-framework/operator-sdk/cmd/operator-sdk && \
	  mv $@.tmp $@; }'

.PHONY: opm
opm: $(OPM) ## Build opm from hack/tools/olm (~5 min cold; locked as go-install-tool: make test and the OLM stages both need it).
$(OPM): | $(LOCALBIN)
	@echo "Building opm $(OPM_VERSION)"
	flock $@.lock sh -c '[ -x $@ ] || { cd hack/tools/olm && CGO_ENABLED=0 GOWORK=off go build -trimpath -tags json1,containers_image_openpgp \
	  -ldflags "-s -w \
	    -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION) \
	    -X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=$(OPM_COMMIT)" \
	  -o $@.tmp github.com/operator-framework/operator-registry/cmd/opm && \
	  mv $@.tmp $@; }'
