# shellcheck shell=bash
# scripts/cluster/go-programs.sh — sourced by the scripts that build Kubernetes programs
# from a pinned Go module of this project (build-control-plane.sh, build-conformance.sh):
# the machine's go, the pinned release, the cache directory of one pin, its lock, and the
# version stamp Kubernetes' own build writes.

go_programs_log() { printf '%s: %s\n' "$GO_PROGRAMS_WHO" "$*" >&2; }

# Finds the machine's go (the polyglot machine has it in /usr/local/go/bin).
go_programs_need_go() {
  command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
  command -v go >/dev/null || { go_programs_log "go is not installed (the polyglot machine has it in /usr/local/go/bin)"; exit 1; }
}

# The k8s.io/kubernetes release a go.mod requires.
go_programs_release() {
  local release
  release=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]/ { print $2 } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$1")
  [ -n "$release" ] || { go_programs_log "$1 requires no k8s.io/kubernetes vX.Y.Z"; exit 1; }
  printf '%s\n' "$release"
}

# The cache directory of KIND (control-plane, conformance) for a release and the files
# that pin it: of the files' contents only, so every clone (another path) finds the same.
go_programs_cache_dir() {
  local kind=$1 release=$2 pin
  shift 2
  pin=$(cat "$@" | sha256sum | cut -c1-12)
  printf '%s\n' "${XDG_CACHE_HOME:-$HOME/.cache}/podhost/$kind/$release-$pin"
}

# Takes the build lock of a cache directory on fd 8 (a session and a CI run may share
# the machine), waiting for another build to end.
go_programs_lock() {
  mkdir -p "$1"
  exec 8>"$1/.lock"
  if ! flock -n 8; then
    go_programs_log "another build holds $1/.lock; waiting"
    flock 8
  fi
}

# -ldflags for a release: no symbol tables (a third of the size) and the version stamp of
# Kubernetes' hack/lib/version.sh (without it a server reports v0.0.0-master and clients
# warn about skew).
go_programs_ldflags() {
  local release=$1 minor pkg flags="-s -w"
  minor=${release#v1.}
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s\n' "$flags"
}
