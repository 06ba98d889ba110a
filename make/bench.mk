# Benchmarks beyond the Go benchmarks of `make bench`: the operator at scale on envtest (no node), etcd
# members served as the operator configures them (no node), the operator against a bare StatefulSet on the
# local node, and the report (docs/benchmarks.md + PNG chart).
# Benchmarks, not tests: nothing here fails on a figure. Results land in bin/bench/<part>/results.json.

BENCH_DIR ?= $(LOCALBIN)/bench
# envtest part: clusters created at once, unrelated ConfigMaps/Secrets/Pods, runs (the median is reported).
BENCH_CLUSTERS ?= 1000
BENCH_UNRELATED ?= 10000
BENCH_RUNS ?= 3
# the same run at a larger size, once, to show how time and memory grow with the number of clusters.
BENCH_LARGE_CLUSTERS ?= 5000
# ... with the operator's container limit raised for that fleet, as docs/operations.md advises.
BENCH_LARGE_MEMORY_LIMIT ?= 1Gi
# the same run with another memory limit on the operator's container (its soft limit is half of it).
BENCH_ALT_MEMORY_LIMIT ?= 256Mi
# CRD directories of the envtest scale run; add controllers/testdata/crds to install prometheus-operator's kinds.
BENCH_CRDS ?= config/crd/bases
# node part: runs per scenario, and the scenarios (regexp over Available, Scale, Heal, QuorumLoss, Upgrade, NoSpace, Defragment,
# ServedLoad: a load generator in a pod drives a bare StatefulSet and the operator's clusters, TLS off and on,
# through the client Service and every member: writes/s, reads/s, p50/p99 as ratios to the bare one;
# `make bench-node BENCH_NODE_RUN=ServedLoad`, tests/bench/notes.md).
BENCH_NODE_RUNS ?= 3
BENCH_NODE_RUN ?= .
# The served load adds ~25 min at BENCH_NODE_RUNS=3 (six Jobs of ~75 s per round) to the other scenarios.
BENCH_NODE_TIMEOUT ?= 150m
NODE_LOCK ?= /tmp/etcd-operator-node.lock
# served part (three etcd members on localhost, no node): rounds, measured phases, variants (`-list` names
# them), and the most CPU other processes may take during a run before it is repeated (0: keep every run).
BENCH_SERVED_ROUNDS ?= 3
BENCH_SERVED_DURATION ?= 10s
BENCH_SERVED_GET_DURATION ?= 4s
BENCH_SERVED_VARIANTS ?= plain,tls,tls-shared
BENCH_SERVED_MAX_OTHERS ?= 0
# restore part (one etcd on localhost, no node): database size, minutes of changes captured after its full
# snapshot, and their rate.
BENCH_RESTORE_DB_MIB ?= 1024
BENCH_RESTORE_CHANGE_MINUTES ?= 2
BENCH_RESTORE_WRITES_PER_SEC ?= 100

##@ Benchmarks

.PHONY: bench-envtest
bench-envtest: envtest ## 1,000 EtcdClusters at once among 10,000 unrelated objects on envtest: time, reconciles/s, writes at rest, RSS/heap, pprof.
	go build -o $(BENCH_DIR)/envtest-bench ./tests/bench/envtest
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(BENCH_DIR)/envtest-bench -clusters $(BENCH_CLUSTERS) \
		-unrelated $(BENCH_UNRELATED) -runs $(BENCH_RUNS) -crds $(BENCH_CRDS) -out $(BENCH_DIR)/envtest
	@echo "profiles: go tool pprof -top $(BENCH_DIR)/envtest-bench $(BENCH_DIR)/envtest/cpu-0.pprof (heap-0.pprof)"

.PHONY: bench-envtest-large
bench-envtest-large: envtest ## The envtest scale run once with BENCH_LARGE_CLUSTERS (5,000) clusters, container limit BENCH_LARGE_MEMORY_LIMIT: how time, RSS and reconciles/s grow.
	go build -o $(BENCH_DIR)/envtest-bench ./tests/bench/envtest
	BENCH_OPERATOR_MEMORY_LIMIT=$(BENCH_LARGE_MEMORY_LIMIT) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(BENCH_DIR)/envtest-bench -clusters $(BENCH_LARGE_CLUSTERS) \
		-unrelated $(BENCH_UNRELATED) -runs 1 -crds $(BENCH_CRDS) -out $(BENCH_DIR)/envtest-large

.PHONY: bench-envtest-limit
bench-envtest-limit: envtest ## The envtest scale run with the operator's container limit at BENCH_ALT_MEMORY_LIMIT (256Mi): what memory buys in GC work.
	go build -o $(BENCH_DIR)/envtest-bench ./tests/bench/envtest
	BENCH_OPERATOR_MEMORY_LIMIT=$(BENCH_ALT_MEMORY_LIMIT) KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(BENCH_DIR)/envtest-bench -clusters $(BENCH_CLUSTERS) \
		-unrelated $(BENCH_UNRELATED) -runs 2 -crds $(BENCH_CRDS) -out $(BENCH_DIR)/envtest-limit

.PHONY: bench-served
bench-served: etcd ## Three etcd members on localhost with the operator's configuration, plain, TLS and TLS before the HTTP split: writes/s, reads/s, latency, CPU per request, beside the previous report's ratios.
	go build -o $(BENCH_DIR)/served-bench ./tests/bench/served
	$(BENCH_DIR)/served-bench -etcd $(ETCD_BIN)/etcd -rounds $(BENCH_SERVED_ROUNDS) -duration $(BENCH_SERVED_DURATION) \
		-get-duration $(BENCH_SERVED_GET_DURATION) -variants $(BENCH_SERVED_VARIANTS) -max-others $(BENCH_SERVED_MAX_OTHERS) \
		-before tests/bench/served/before.json -out $(BENCH_DIR)/served
	@echo "table: $(BENCH_DIR)/served/table.md; with the profiles' breakdown: $(BENCH_DIR)/served/report.md"

.PHONY: bench-restore
bench-restore: etcd ## Point-in-time restore of a 1 GiB etcd plus 2 minutes of changes, as the product runs it (no node): capture, replay Job, member restore, etcd serving, HashKV = source's.
	@mkdir -p $(BENCH_DIR)
	BENCH_RESTORE_DB_MIB=$(BENCH_RESTORE_DB_MIB) BENCH_RESTORE_CHANGE_MINUTES=$(BENCH_RESTORE_CHANGE_MINUTES) \
		BENCH_RESTORE_WRITES_PER_SEC=$(BENCH_RESTORE_WRITES_PER_SEC) ETCD_BIN_DIR="$(ETCD_BIN)" \
		go test -run '^$$' -bench PointInTimeRestore -benchtime 1x -timeout 60m ./internal/backup/continuous/ | tee $(BENCH_DIR)/restore.txt

.PHONY: bench-node
bench-node: kubectl ## Operator vs a bare etcd StatefulSet on the local cluster (holds the node lock; deploys the operator), to bin/bench/node, or node-N on N>1 nodes; BENCH_NODE_RUN=ServedLoad: served load from a pod.
	@# -o: the lock is not inherited by processes the node starts (they would hold it forever).
	flock -o -w 3600 $(NODE_LOCK) $(MAKE) bench-node-locked

.PHONY: bench-node-locked
bench-node-locked: cluster-up
	VERSION=$(VERSION) LOADGEN_IMAGE=1 hack/node/images.sh
	@# An OLM install elsewhere may own the CRDs' fields (apply conflict): the rest still applies, and the
	@# benchmark itself checks that our Deployment runs the new image and no all-namespace operator is present.
	KUBECONFIG=$(NODE_KUBECONFIG) $(MAKE) deploy IMG=$$(cat $(NODE_DIR)/operator-image) || echo "bench-node: make deploy reported conflicts; continuing"
	@# A trial must not overlap the old operator's exit and the new one's leader election.
	$(KUBECTL) --kubeconfig $(NODE_KUBECONFIG) -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=5m
	@# A cluster of N>1 nodes (hack/node NODES=N; its count is known only once cluster-up ran) writes to node-N,
	@# so its samples never mix with one node's and the report shows both. Results are appended per sample; a
	@# run of every scenario starts afresh in that directory, so no older build's sample counts.
	n=$$(cat $(NODE_DIR)/state/node-count 2>/dev/null || echo 1); out=$(BENCH_DIR)/node$$([ "$$n" = 1 ] || echo "-$$n"); \
	echo "bench-node: $$n node(s), samples to $$out"; \
	$(if $(filter .,$(BENCH_NODE_RUN)),rm -f $$out/*.json;) \
	KUBECONFIG=$(NODE_KUBECONFIG) KUBECTL=$(KUBECTL) BENCH_OPERATOR_IMAGE=$$(cat $(NODE_DIR)/operator-image) BENCH_OUT=$$out BENCH_RUNS=$(BENCH_NODE_RUNS) \
		go test -tags bench ./tests/bench/node/ -count=1 -v -timeout $(BENCH_NODE_TIMEOUT) -run 'Test.*($(BENCH_NODE_RUN))'

.PHONY: bench-report
bench-report: ## Table on stdout, docs/benchmarks.md and docs/benchmarks.png from bin/bench/*/results.json.
	go run ./tests/bench/report -in $(BENCH_DIR) -md docs/benchmarks.md -png docs/benchmarks.png
