# Prometheus alerting rules (config/prometheus/alerts.yaml, runbooks in docs/alerts.md) and the Grafana
# dashboard (config/grafana). Included by the top Makefile.

# promtool of Prometheus 3.16.0 (its Go module versions are v0.3xy.z for Prometheus 3.xy.z).
PROMETHEUS_VERSION ?= v0.316.0
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMETHEUS_VERSION)
# The Prometheus server of the same release: the e2e suite runs it beside the local node (tests/e2e/prometheus_test.go).
PROMETHEUS ?= $(LOCALBIN)/prometheus-$(PROMETHEUS_VERSION)
# Prometheus's build tags for its service discovery: the e2e needs only Kubernetes discovery and promtool none, and
# leaving out the cloud providers' SDKs (AWS, Azure, GCE, ...) saves about a fifth of the packages of a cold build.
PROMTOOL_TAGS ?= remove_all_sd
PROMETHEUS_TAGS ?= remove_all_sd,enable_kubernetes_sd

##@ Test

.PHONY: test-alerts
test-alerts: promtool etcd ## Check the alerting rules and run their promtool unit tests, also on the PrometheusRule a cluster gets; check that the rules and the Grafana dashboard query metrics the operator or a real etcd exports, with PromQL that parses.
	$(PROMTOOL) check rules config/prometheus/alerts.yaml
	$(PROMTOOL) test rules tests/prometheus/alerts_test.yaml
	PROMTOOL=$(PROMTOOL) ETCD_BIN_DIR="$(ETCD_BIN)" go test -tags promtool -count=1 ./tests/prometheus/

##@ Tools (built from pinned sources into ./bin)

.PHONY: prometheus
prometheus: $(PROMETHEUS) ## Build the Prometheus server from its pinned module (the e2e suite scrapes the node with it; without the web UI's assets).
$(PROMETHEUS): | $(LOCALBIN)
	tmp=$$(mktemp -d) && GOBIN=$$tmp CGO_ENABLED=0 go install -tags $(PROMETHEUS_TAGS) github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION) && mv $$tmp/prometheus $@ && rm -rf $$tmp

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool from its pinned module (cold: ~5 min).
$(PROMTOOL): | $(LOCALBIN)
	@# Static (CGO_ENABLED=0), like the other tools built from the proxy.
	tmp=$$(mktemp -d) && GOBIN=$$tmp CGO_ENABLED=0 go install -tags $(PROMTOOL_TAGS) github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION) && mv $$tmp/promtool $@ && rm -rf $$tmp
