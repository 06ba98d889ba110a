#!/usr/bin/env bash
# Builds the kubectl-etcd release archives (linux and darwin, amd64 and arm64) into OUT and renders the krew
# manifest OUT/etcd.yaml from hack/krew/etcd.yaml.tmpl with each archive's sha256. Archives are
# reproducible (fixed order, owner and time; gzip without a timestamp), so a rebuild from the same tag
# matches the published sums.
# Usage: hack/krew/release.sh VERSION OUT [RELEASE_URL]
set -euo pipefail

version=${1:?version X.Y.Z}
out=${2:?output directory}
url=${3:-https://github.com/seedops/etcd-operator/releases/download/v${version}}
root=$(cd "$(dirname "$0")/../.." && pwd)

rm -rf "$out" && mkdir -p "$out"
sums=()
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
	os=${platform%/*} arch=${platform#*/}
	stage=$(mktemp -d)
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -C "$root" -trimpath \
		-ldflags "-s -w -X main.version=v${version}" -o "$stage/kubectl-etcd" ./cmd/kubectl-etcd
	cp "$root/LICENSE" "$stage/LICENSE"
	archive="$out/kubectl-etcd_v${version}_${os}_${arch}.tar.gz"
	tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - kubectl-etcd LICENSE | gzip -n -9 >"$archive"
	rm -rf "$stage"
	sums+=("SHA256_${os}_${arch}=$(sha256sum "$archive" | cut -d' ' -f1)")
done

# Only these variables are substituted; anything else in the template stays as written.
manifest=$(sed -e '/^# /d' "$root/hack/krew/etcd.yaml.tmpl")
manifest=${manifest//'${VERSION}'/$version}
manifest=${manifest//'${RELEASE_URL}'/$url}
for kv in "${sums[@]}"; do
	manifest=${manifest//"\${${kv%%=*}}"/${kv#*=}}
done
if grep -q '\${' <<<"$manifest"; then
	echo "krew manifest still has placeholders:" >&2
	grep -n '\${' <<<"$manifest" >&2
	exit 1
fi
printf '%s\n' "$manifest" >"$out/etcd.yaml"
(cd "$out" && sha256sum ./*.tar.gz >SHA256SUMS)
echo "wrote $out/etcd.yaml and $(ls "$out"/*.tar.gz | wc -l) archives"
