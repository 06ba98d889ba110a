# Kubernetes compatibility: the API validation and envtest suites against every supported Kubernetes minor, each
# kube-apiserver built from its own pinned wrapper module (hack/tools/kube-apiserver/<minor>, written by
# hack/compat/wrapper.sh). The main suites (make test) run on K8S_VERSION; these add the rest of the range.
# Included by the top Makefile.

# Every minor of the supported range but K8S_VERSION's, oldest first (one wrapper module each); the oldest is the
# bundle's minKubeVersion.
COMPAT_VERSIONS ?= $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/tools/kube-apiserver/*/go.mod | sort -V)
# The ends of the range: what the README's test command and .ci/run run.
COMPAT_ENDS := $(firstword $(COMPAT_VERSIONS)) $(lastword $(COMPAT_VERSIONS))
# The packages with envtest suites: the CRD's validation, the controllers (with real etcd), the kubectl plugin.
COMPAT_PACKAGES ?= ./api/... ./controllers/... ./internal/kubectlplugin/...

# Minors run at once: the suites mostly wait (on etcd, on timers), so two take little longer than one.
COMPAT_JOBS ?= 2

compat-minor = $(shell echo $(1) | cut -d. -f1,2)

# Kubernetes' build tag for binaries without the in-tree cloud providers: on the minors that still link them
# (1.30), it leaves out the GCE and vSphere SDKs, a large part of a cold build; envtest uses no cloud provider.
COMPAT_BUILD_TAGS ?= providerless

##@ Test

.PHONY: test-compat
test-compat: etcd minio cert-manager ## The validation and envtest suites against every Kubernetes minor of COMPAT_VERSIONS (cold: ~12 min per kube-apiserver build).
	$(MAKE) --no-print-directory -j$(COMPAT_JOBS) --output-sync=target $(addprefix compat-run-,$(COMPAT_VERSIONS))

compat-run-%:
	$(MAKE) --no-print-directory test-compat-one COMPAT_VERSION=$*

.PHONY: test-compat-ends
test-compat-ends: ## test-compat on the oldest and the newest supported Kubernetes only.
	$(MAKE) --no-print-directory test-compat COMPAT_VERSIONS="$(COMPAT_ENDS)"

.PHONY: compat-build
compat-build: ## Build the kube-apiserver of every COMPAT_VERSIONS minor (what test-compat needs, nothing run).
	@for v in $(COMPAT_VERSIONS); do KUBE_MODULE=$(CURDIR)/hack/tools/kube-apiserver/$$(echo $$v | cut -d. -f1,2) KUBE_BUILD_TAGS=$(COMPAT_BUILD_TAGS) hack/build-kube.sh kube-apiserver || exit 1; done

.PHONY: test-compat-one
test-compat-one: etcd minio cert-manager
	@test -n "$(COMPAT_VERSION)" || { echo "COMPAT_VERSION is not set"; exit 1; }
	KUBE_MODULE=$(CURDIR)/hack/tools/kube-apiserver/$(call compat-minor,$(COMPAT_VERSION)) KUBE_BUILD_TAGS=$(COMPAT_BUILD_TAGS) hack/build-kube.sh kube-apiserver
	mkdir -p $(LOCALBIN)/envtest/$(COMPAT_VERSION)-etcd-$(ETCD_VERSION)
	ln -sf $(LOCALBIN)/k8s/$(COMPAT_VERSION)/kube-apiserver $(LOCALBIN)/envtest/$(COMPAT_VERSION)-etcd-$(ETCD_VERSION)/kube-apiserver
	ln -sf $(ETCD_BIN)/etcd $(LOCALBIN)/envtest/$(COMPAT_VERSION)-etcd-$(ETCD_VERSION)/etcd
	@echo "=== Kubernetes $(COMPAT_VERSION): $(COMPAT_PACKAGES)"
	KUBEBUILDER_ASSETS="$(LOCALBIN)/envtest/$(COMPAT_VERSION)-etcd-$(ETCD_VERSION)" ETCD_BIN_DIR="$(ETCD_BIN)" MINIO_BIN="$(MINIO)" CERT_MANAGER_DIR="$(CERT_MANAGER_DIR)" \
	  go test -tags failpoints -count=1 $(COMPAT_PACKAGES)

.PHONY: print-compat-ends
print-compat-ends:
	@echo $(COMPAT_ENDS)
