#!/usr/bin/env bash
# Renders OLM v0's manifests from its pinned module into bin/node/olm/manifests: the CRDs (deploy/chart/crds) and
# the chart (deploy/chart) with OLM's own upstream values (deploy/upstream/values.yaml: namespace olm labelled
# enforce=restricted), overriding only the image references (the node's images, from images.env) and dropping the
# public operatorhub.io CatalogSource (installType). Fails if any public image reference is left.
source "$(dirname "$0")/lib.sh"
source "$OLM_WORK/images.env"
mod=$(olm_module_dir)
out=$OLM_WORK/manifests
rm -rf "$out" && mkdir -p "$out/crds"
cp "$mod"/deploy/chart/crds/*.yaml "$out/crds/"
# configmapServerImage serves ConfigMap-type CatalogSources (deprecated, sqlite: needs cgo); only grpc catalogs are
# used here, so it points at the opm image rather than at a public one.
"$HELM" template olm "$mod/deploy/chart" -f "$mod/deploy/upstream/values.yaml" \
  --set installType=local \
  --set olm.image.ref="$OLM_IMAGE" --set catalog.image.ref="$OLM_IMAGE" --set package.image.ref="$OLM_IMAGE" \
  --set package.image.pullPolicy=IfNotPresent \
  --set catalog.opmImageArgs="--opmImage=$OPM_IMAGE" \
  --set catalog.commandArgs="--configmapServerImage=$OPM_IMAGE" >"$out/olm.yaml"
if grep -n 'image\|Image' "$out/olm.yaml" | grep -v -e "$REGISTRY/" -e 'imagePullPolicy' -e 'ImagePullPolicy' | grep -q -e 'quay.io' -e 'docker.io' -e 'registry\.'; then
  die "public image references left in $out/olm.yaml"
fi
log "rendered OLM $OLM_VERSION manifests into $out"
