#!/usr/bin/env bash
# Runs the checks the OperatorHub and community catalog pipelines run on a bundle: operator-sdk's
# operatorframework suite (OperatorHub metadata, capabilities, categories, good practices, deprecated APIs)
# and the community validator, each for the CSV's minKubeVersion. A warning fails the check as an error
# would, since the pipelines flag both; only the notices that a validator itself is deprecated pass.
# The multiarch validator is not run: it runs `docker pull` and `docker manifest inspect` (or podman) on every image,
# and neither is on this machine; the e2e suite checks the same promise on the node's registry (tests/e2e/image_test.go:
# an image index with a linux image for each operatorframework.io/arch.* label, each binary built for it).
set -euo pipefail
operator_sdk=$1 bundle_dir=$2

csv=$(ls "$bundle_dir"/manifests/*.clusterserviceversion.yaml)
min_kube=$(awk '$1=="minKubeVersion:" {print $2; exit}' "$csv")
[ -n "$min_kube" ] || { echo "$csv has no spec.minKubeVersion"; exit 1; }

for selector in suite=operatorframework name=community; do
	echo "=== operator-sdk bundle validate --select-optional $selector (k8s-version=$min_kube)"
	if ! out=$("$operator_sdk" bundle validate "$bundle_dir" --select-optional "$selector" \
		--optional-values="k8s-version=$min_kube" 2>&1); then
		echo "$out"; exit 1
	fi
	echo "$out"
	if warnings=$(grep 'level=warning' <<<"$out" | grep -v 'validator is deprecated'); then
		echo "=== the bundle validation above warned; fix the bundle (warnings fail the check):"
		echo "$warnings"
		exit 1
	fi
done
