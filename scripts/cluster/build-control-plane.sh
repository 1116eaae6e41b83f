#!/usr/bin/env bash
# scripts/cluster/build-control-plane.sh — builds the Kubernetes control plane that the
# cluster-mode tests run podhost against: kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl of one pinned release, from Go modules, metrics-server
# (tests/cluster/metrics-server/go.mod, its own module: it builds on older k8s.io
# libraries) for `kubectl top`, and etcd (tests/cluster/etcd: the server of the version
# the release's etcd client pins; control-plane-up.sh runs it when it is beside
# kube-apiserver, as Debian's 3.4.23 is too old for the API server's watch progress
# requests).
#
# The pin is tests/cluster/controlplane/go.mod: it requires k8s.io/kubernetes and replaces
# each of its staging modules (k8s.io/api, apimachinery, client-go, …) by the published
# v0.Y.Z of the same release; go.sum is committed. The binaries are cached by release
# and go.sum outside the checkout, in $PODHOST_CACHE_DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/podhost/control-plane/<release>-<go.sum hash>), so a fresh
# clone on the same machine finds them in seconds.
#
#   bash scripts/cluster/build-control-plane.sh          # prints the binaries' directory last
#   FORCE=1 bash scripts/cluster/build-control-plane.sh  # rebuild even when cached
#
# Needs go (1.26, the machine's) and the Go module proxy. The last line of its output is
# the directory holding the six binaries; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODULE_DIR=$PWD/tests/cluster/controlplane
METRICS_MODULE_DIR=$PWD/tests/cluster/metrics-server
ETCD_MODULE_DIR=$PWD/tests/cluster/etcd
PROGRAMS=(kube-apiserver kube-controller-manager kube-scheduler kubectl metrics-server etcd)

GO_PROGRAMS_WHO=build-control-plane
# shellcheck source=go-programs.sh
. scripts/cluster/go-programs.sh
log() { go_programs_log "$@"; }

go_programs_need_go
release=$(go_programs_release "$MODULE_DIR/go.mod")
out=${PODHOST_CACHE_DIR:-$(go_programs_cache_dir control-plane "$release" "$MODULE_DIR/go.mod" \
  "$MODULE_DIR/go.sum" "$METRICS_MODULE_DIR/go.mod" "$METRICS_MODULE_DIR/go.sum" \
  "$ETCD_MODULE_DIR/go.mod" "$ETCD_MODULE_DIR/go.sum" "$ETCD_MODULE_DIR/main.go")}

complete() {
  local p
  for p in "${PROGRAMS[@]}"; do [ -x "$out/$p" ] || return 1; done
  [ -f "$out/.complete" ]
}

if [ "${FORCE:-}" != 1 ] && complete; then
  log "cached: Kubernetes $release in $out"
  printf '%s\n' "$out"
  exit 0
fi

go_programs_lock "$out"
if [ "${FORCE:-}" != 1 ] && complete; then
  log "cached: Kubernetes $release in $out (built meanwhile)"
  printf '%s\n' "$out"
  exit 0
fi

started=$SECONDS
log "building Kubernetes $release (${PROGRAMS[*]}) with $(go version | cut -d' ' -f3); a cold build takes minutes"
cd "$MODULE_DIR"
# -mod=readonly: the committed go.mod/go.sum are the pin; a build never rewrites them.
go mod download
staging=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$staging"' EXIT
# -trimpath: no paths of this machine in the binaries; CGO off as Kubernetes releases
# build these programs; -s -w: no symbol tables (a third of the size).
ldflags=$(go_programs_ldflags "$release")
for p in "${PROGRAMS[@]}"; do
  t=$SECONDS
  if [ "$p" = metrics-server ]; then
    (cd "$METRICS_MODULE_DIR" && go mod download &&
      CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w" -o "$staging/$p" \
        sigs.k8s.io/metrics-server/cmd/metrics-server)
  elif [ "$p" = etcd ]; then
    (cd "$ETCD_MODULE_DIR" && go mod download &&
      CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w" -o "$staging/$p" .)
  else
    CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="$ldflags" -o "$staging/$p" "k8s.io/kubernetes/cmd/$p"
  fi
  log "$p built ($((SECONDS - t)) s)"
done
for p in "${PROGRAMS[@]}"; do mv -f "$staging/$p" "$out/$p"; done
printf '%s\n' "$release" >"$out/.complete"
log "Kubernetes $release built in $((SECONDS - started)) s"
printf '%s\n' "$out"
