# The scorecard on the local node, offline: operator-sdk's basic and olm tests and the project's custom tests
# (tests/scorecard) from images built without a container engine. Included by the top Makefile; uses its
# VERSION, IMAGE_TAG_BASE, LOCALBIN; make/node.mk's NODE_DIR, NODE_KUBECONFIG; make/olm.mk's OPERATOR_SDK.
# See docs/scorecard.md. Both targets touch the shared node: run them under the node lock, e.g.
#   flock -w 3600 /tmp/etcd-operator-node.lock make scorecard-node

# Total time the scorecard may take (the custom tests bound each of their waits well below it).
SCORECARD_NODE_WAIT ?= 20m

##@ Scorecard on the local node

.PHONY: scorecard-images
scorecard-images: ## Build the scorecard images (scorecard-test, the custom tests, untar, the alm-examples' etcd) offline and push them to localhost:5000.
	VERSION=$(VERSION) hack/node/scorecard-images.sh

##@ Test

.PHONY: scorecard-node
scorecard-node: cluster-up operator-sdk kustomize kubectl ## Deploy the operator on the local node and run every scorecard test (basic, olm, custom); fails unless all pass.
	VERSION=$(VERSION) IMAGE_TAG_BASE=$(IMAGE_TAG_BASE) OPERATOR_SDK=$(OPERATOR_SDK) KUSTOMIZE=$(KUSTOMIZE) \
	  SCORECARD_NODE_WAIT=$(SCORECARD_NODE_WAIT) tests/scorecard/run-node.sh
