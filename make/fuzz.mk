# Fuzzing (`go test -fuzz`) of the spec -> manifests builders, the CRD's validation rules and every parser.
# Included by the top Makefile. Each target runs for FUZZ_TIME, one after the other (go test fuzzes one
# target of one package at a time); the first crash fails the run and leaves the failing input under the
# package's testdata/fuzz/<Target>/ (commit it as a seed once fixed). `make test` already runs every
# target's seed corpus as ordinary tests.

FUZZ_TIME ?= 10s
# Fuzzing workers per target (go test -parallel); empty: GOMAXPROCS.
FUZZ_PARALLEL ?=

# package:Target, in the order they run.
FUZZ_TARGETS := \
	./internal/resources:FuzzBuilders \
	./internal/resources:FuzzBackupJobName \
	./internal/resources:FuzzRelatedImagesFromEnv \
	./internal/resources:FuzzMemberOrdinal \
	./internal/resources:FuzzRestoreFailure \
	./internal/crdtest:FuzzBackupScheduleRule \
	./internal/crdtest:FuzzVersionRules \
	./internal/crdtest:FuzzStorageSizeRule \
	./internal/membership:FuzzPlan \
	./internal/membership:FuzzVersionLess \
	./internal/backup:FuzzFileName \
	./internal/backup:FuzzDirStoreKey \
	./internal/backup:FuzzClusterPrefix \
	./internal/watchnamespace:FuzzParse

##@ Test

# Go's fuzzing engine can stop with "context deadline exceeded" when -fuzztime ends while a worker starts
# up (more often on a busy machine); that writes no failing input, and the target is run again (three tries in
# all). A crash always writes one: it fails at once.
.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZ_TIME each (default 10s; 14 targets), sequentially; fails on the first crash.
	@set -e; start=$$(date +%s); for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; dir=$$pkg/testdata/fuzz/$$name; \
	  for attempt in 1 2 3; do \
	    echo "=== fuzz $$name ($$pkg, $(FUZZ_TIME))"; before=$$(ls $$dir 2>/dev/null | wc -l || true); \
	    if go test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_TIME) $(if $(FUZZ_PARALLEL),-parallel $(FUZZ_PARALLEL)) 2>&1 | tee $(LOCALBIN)/fuzz.out; then break; fi; \
	    after=$$(ls $$dir 2>/dev/null | wc -l || true); \
	    if [ $$attempt != 3 ] && [ $$after = $$before ] && grep -q 'context deadline exceeded' $(LOCALBIN)/fuzz.out; then \
	      echo "fuzz: $$name: the engine stopped without a failing input (context deadline exceeded); running it again"; continue; fi; \
	    echo "fuzz: $$name found a failing input (see $$dir/)"; exit 1; \
	  done; \
	done; echo "fuzz: $(words $(FUZZ_TARGETS)) targets passed in $$(( $$(date +%s) - start ))s"

.PHONY: fuzz-build
fuzz-build: ## Compile every fuzz package's instrumented test binary into the build cache (no fuzzing), so `make fuzz` starts at once.
	@for pkg in $(sort $(foreach t,$(FUZZ_TARGETS),$(firstword $(subst :, ,$(t))))); do \
	  go test -c -fuzz . -o /dev/null $$pkg || exit 1; done

.PHONY: fuzz-list
fuzz-list: ## Print the fuzz targets (package:Target) `make fuzz` runs.
	@for t in $(FUZZ_TARGETS); do echo $$t; done
