##@ kubectl plugin

PLUGIN_DIST ?= dist/krew

.PHONY: kubectl-etcd
kubectl-etcd: ## Build the kubectl plugin into bin/kubectl-etcd (put it on the PATH to use `kubectl etcd`).
	go build -ldflags "-X main.version=v$(VERSION)" -o $(LOCALBIN)/kubectl-etcd ./cmd/kubectl-etcd

.PHONY: krew-manifest
krew-manifest: ## Build the plugin's release archives and render their krew manifest into $(PLUGIN_DIST).
	hack/krew/release.sh $(VERSION) $(PLUGIN_DIST)
