# shellcheck shell=bash
# Building commands of the pinned wrapper modules under hack/ (hack/tools/*, hack/node/tools/*,
# tests/scorecard/etcd-*); sourced by every script that builds one (hack/build-kube.sh, hack/build-etcd.sh,
# hack/build-helm.sh, hack/build-crdify.sh, hack/node/build.sh, hack/node/scorecard-images.sh, hack/olm/build.sh, hack/olm/render.sh), through hack/node/lib.sh for the scripts
# under hack/node and hack/olm.

# stamp_of FILES...: a short digest of the files that pin a build (a wrapper module's go.mod, go.sum, *.go); a
# missing file counts as empty.
stamp_of() {
  cat "$@" 2>/dev/null | sha256sum | cut -c1-16
}

# replace_if_changed NEW FILE: moves NEW over FILE unless both have the same content (then NEW is removed), so the
# size and time of FILE, which image stamps cover, change only with its content.
replace_if_changed() {
  if cmp -s "$1" "$2"; then rm "$1"; else mv "$1" "$2"; fi
}

# go_build_stale OUT STAMP MODULE_DIR PACKAGES [go build flags...]
#   Builds PACKAGES (space-separated) of the wrapper module MODULE_DIR into OUT, a file, or a directory ending in /
#   for several commands, unless it is already there: for a file, OUT exists and is executable; for a directory,
#   OUT.stamp exists. With a non-empty STAMP (stamp_of), OUT.stamp must also hold STAMP, so a changed module
#   rebuilds. Static (CGO_ENABLED=0), outside any go.work, -trimpath, stripped; LDFLAGS from the environment are
#   added to "-s -w". A file is written through OUT.tmp, so a failed build leaves none; builds of one OUT are
#   serialised by OUT.lock (a second builder waits, then finds it built).
go_build_stale() {
  local out=$1 stamp=$2 dir=$3 pkgs=$4; shift 4
  local what=${out%/} tmp
  _go_build_fresh "$out" "$stamp" && return 0
  mkdir -p "$(dirname "$what")"
  (
    flock 9
    _go_build_fresh "$out" "$stamp" && exit 0
    echo "[$(date +%H:%M:%S)] building $(basename "$what") from ${dir#"${ROOT:-}"/} (cold: minutes)" >&2
    if [ "${out%/}" != "$out" ]; then mkdir -p "$out"; tmp=$out; else tmp=$out.tmp; fi
    # shellcheck disable=SC2086 # PACKAGES is a list of words
    (cd "$dir" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w ${LDFLAGS:-}" "$@" -o "$tmp" $pkgs) || exit 1
    [ "$tmp" = "$out" ] || mv "$tmp" "$out" || exit 1
    if [ -n "$stamp" ] || [ "$tmp" = "$out" ]; then echo "$stamp" >"$what.stamp"; fi
  ) 9>"$what.lock"
}

_go_build_fresh() { # OUT STAMP
  local out=$1 stamp=$2 what=${1%/}
  if [ "${out%/}" = "$out" ]; then [ -x "$out" ] || return 1; else [ -f "$what.stamp" ] || return 1; fi
  [ -z "$stamp" ] || [ "$(cat "$what.stamp" 2>/dev/null)" = "$stamp" ]
}

# build_etcd MODULE_DIR OUT_DIR [COMMANDS...]: etcd, etcdctl and etcdutl (or the COMMANDS named) from an etcd
# wrapper module whose main package for etcd is ETCD_MAIN (default ./cmd/etcd), each only when missing.
build_etcd() {
  local dir=$1 out=$2; shift 2
  local c pkg
  [ $# -gt 0 ] || set -- etcd etcdctl etcdutl
  for c in "$@"; do
    case $c in
      etcd) pkg=${ETCD_MAIN:-./cmd/etcd} ;;
      *) pkg=go.etcd.io/etcd/$c/v3 ;;
    esac
    go_build_stale "$out/$c" "" "$dir" "$pkg"
  done
}
