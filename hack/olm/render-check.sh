#!/usr/bin/env bash
# Checks, without helm, that the committed render of OLM's chart (hack/olm/olm.yaml, `make olm-render`) belongs to
# the OLM version pinned in hack/tools/olm/go.mod: its header names that version and the digest of that version's
# chart and values; every image is the placeholder render.sh replaces (no public image left), in as many containers
# as OLM's own upstream render of that version (deploy/upstream/quickstart/olm.yaml) runs its image; it has every flag
# of that upstream render and none that neither that version's chart nor hack/olm/values.yaml has. Run by `make test` (make olm-render-check).
source "$(dirname "$0")/lib.sh"
rel=${OLM_RENDER#"$ROOT"/}
fail() { die "$* (run make olm-render and commit $rel)"; }
[ -f "$OLM_RENDER" ] || fail "$rel is missing"
[ "$(render_header olm-version)" = "$OLM_VERSION" ] ||
  fail "$rel is OLM $(render_header olm-version)'s chart; hack/tools/olm pins $OLM_VERSION"
mod=$(olm_module_dir)
[ "$(render_header chart-digest)" = "$(chart_digest "$mod")" ] ||
  fail "$rel was rendered from other chart sources or values than OLM $OLM_VERSION's and hack/olm/values.yaml"
images=$(sed -n 's/^ *image: *//p' "$OLM_RENDER" | sort -u | tr '\n' ' ')
[ "$images" = "__OLM_IMAGE__ " ] || fail "images other than __OLM_IMAGE__ in $rel: $images"
# OLM's upstream render runs its one image in as many containers as ours runs the placeholder.
quickstart=$mod/deploy/upstream/quickstart/olm.yaml
upstream_image=$(sed -n 's/^ *image: *\(.*\/olm[@:].*\)/\1/p' "$quickstart" | sort -u)
[ "$(grep -c "^ *image: $upstream_image\$" "$quickstart")" = "$(grep -c '^ *image: __OLM_IMAGE__$' "$OLM_RENDER")" ] ||
  fail "$rel runs OLM's image in other containers than OLM $OLM_VERSION's upstream render ($upstream_image)"
# flags FILE: the container flags (-x or --x, quoted or not), without dashes.
flags() { sed -n "s/^ *- *'\?--\?\([A-Za-z][A-Za-z-]*\).*/\1/p" "$1" | sort -u; }
missing=$(comm -23 <(flags "$quickstart") <(flags "$OLM_RENDER") | tr '\n' ' ')
[ -z "$missing" ] || fail "$rel lacks flags of OLM $OLM_VERSION's upstream render: $missing"
unknown=$(comm -23 <(flags "$OLM_RENDER") <(cat "$mod"/deploy/chart/templates/* "$OLM_VALUES" | grep -o -- '-\{1,2\}[A-Za-z][A-Za-z-]*' | sed 's/^-*//' | sort -u) | tr '\n' ' ')
[ -z "$unknown" ] || fail "$rel has flags that neither OLM $OLM_VERSION's chart nor hack/olm/values.yaml has: $unknown"
log "$rel: OLM $OLM_VERSION's chart, images and flags as pinned"
