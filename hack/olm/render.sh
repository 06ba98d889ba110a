#!/usr/bin/env bash
# Writes OLM v0's manifests into bin/node/olm/manifests: the CRDs (deploy/chart/crds of the pinned module) and the
# committed render of its chart (hack/olm/olm.yaml, `make olm-render`: OLM's upstream values, the public
# operatorhub.io CatalogSource dropped) with the node's images (from images.env) in place of its placeholders.
# Fails if the render does not belong to the pinned OLM version or any public image reference is left.
source "$(dirname "$0")/lib.sh"
source "$OLM_WORK/images.env"
"$OLM_HACK/render-check.sh"
mod=$(olm_module_dir)
out=$OLM_WORK/manifests
rm -rf "$out" && mkdir -p "$out/crds"
cp "$mod"/deploy/chart/crds/*.yaml "$out/crds/"
sed -e "s|__OLM_IMAGE__|$OLM_IMAGE|g" -e "s|__OPM_IMAGE__|$OPM_IMAGE|g" "$OLM_RENDER" >"$out/olm.yaml"
if grep -n 'image\|Image' "$out/olm.yaml" | grep -v -e "$REGISTRY/" -e 'imagePullPolicy' -e 'ImagePullPolicy' | grep -q -e 'quay.io' -e 'docker.io' -e 'registry\.' -e '__'; then
  die "public image references or placeholders left in $out/olm.yaml"
fi
log "OLM $OLM_VERSION manifests (${OLM_RENDER#"$ROOT"/} with the node's images) in $out"
