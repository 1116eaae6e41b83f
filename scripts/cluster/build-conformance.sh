#!/usr/bin/env bash
# scripts/cluster/build-conformance.sh — builds Kubernetes' own node tests and node agent
# of the release the control plane is pinned to, from Go modules:
#   e2e.test  `go test -c k8s.io/kubernetes/test/e2e` (the suites of the conformance run)
#   ginkgo    its runner (github.com/onsi/ginkgo/v2/ginkgo, the version Kubernetes pins)
#   agnhost   the program of the e2e test image registry.k8s.io/e2e-test-images/agnhost
#   nnp       the program of the e2e test image .../nonewprivs
#   kubelet   the kubelet, for the side-by-side figures (scripts/bench-kubelet.sh)
#   kube-proxy  the Service proxy of every node, run on the conformance node as kubeadm
#             runs it (scripts/cluster/kube-proxy-up.sh; its image: e2e-images.sh)
#   coredns   the cluster DNS kubeadm deploys (scripts/cluster/coredns-up.sh), from
#             tests/cluster/coredns (its own module: CoreDNS pins its own k8s.io
#             libraries), with only the plugins its Corefile uses
#   sample-apiserver  the aggregated API server of the Aggregator [Conformance] spec
#             (k8s.io/sample-apiserver of the same release; its image: e2e-images.sh)
#
# The pin is tests/cluster/conformance/go.mod: it requires the same k8s.io/kubernetes as
# tests/cluster/controlplane/go.mod and replaces each staging module by its published
# v0.Y.Z; go.sum is committed. Cached by release and pin outside the checkout, in
# $PODHOST_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/podhost/conformance/<release>-<hash>).
#
#   bash scripts/cluster/build-conformance.sh          # prints the binaries' directory last
#   FORCE=1 bash scripts/cluster/build-conformance.sh  # rebuild even when cached
#
# Needs go (the machine's) and the Go module proxy; everything but the last line goes to
# stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODULE_DIR=$PWD/tests/cluster/conformance
COREDNS_DIR=$PWD/tests/cluster/coredns
PROGRAMS=(e2e.test ginkgo agnhost nnp kubelet kube-proxy coredns sample-apiserver)

GO_PROGRAMS_WHO=build-conformance
# shellcheck source=go-programs.sh
. scripts/cluster/go-programs.sh
log() { go_programs_log "$@"; }

go_programs_need_go
release=$(go_programs_release "$MODULE_DIR/go.mod")
control_plane=$(go_programs_release tests/cluster/controlplane/go.mod)
[ "$release" = "$control_plane" ] || {
  log "tests/cluster/conformance/go.mod pins $release, the control plane $control_plane: pin both to one release"
  exit 1
}
out=${PODHOST_CACHE_DIR:-$(go_programs_cache_dir conformance "$release" "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" "$MODULE_DIR/tools.go" \
  "$COREDNS_DIR/go.mod" "$COREDNS_DIR/go.sum" "$COREDNS_DIR/main.go")}

complete() {
  local p
  for p in "${PROGRAMS[@]}"; do [ -x "$out/$p" ] || return 1; done
  [ -f "$out/.complete" ]
}

if [ "${FORCE:-}" != 1 ] && complete; then
  log "cached: Kubernetes $release tests in $out"
  printf '%s\n' "$out"
  exit 0
fi
go_programs_lock "$out"
if [ "${FORCE:-}" != 1 ] && complete; then
  log "cached: Kubernetes $release tests in $out (built meanwhile)"
  printf '%s\n' "$out"
  exit 0
fi

started=$SECONDS
log "building Kubernetes $release ${PROGRAMS[*]} with $(go version | cut -d' ' -f3); a cold build takes minutes"
cd "$MODULE_DIR"
go mod download
staging=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$staging"' EXIT
ldflags=$(go_programs_ldflags "$release")
# -mod=readonly: the committed go.mod/go.sum are the pin; -trimpath: no paths of this
# machine in the binaries; CGO off as Kubernetes' release builds.
build() { CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="$ldflags" "$@"; }
for p in "${PROGRAMS[@]}"; do
  t=$SECONDS
  case "$p" in
    e2e.test) CGO_ENABLED=0 go test -c -mod=readonly -trimpath -ldflags="$ldflags" -o "$staging/$p" k8s.io/kubernetes/test/e2e ;;
    ginkgo) build -o "$staging/$p" github.com/onsi/ginkgo/v2/ginkgo ;;
    agnhost) build -o "$staging/$p" k8s.io/kubernetes/test/images/agnhost ;;
    nnp) build -o "$staging/$p" k8s.io/kubernetes/test/images/nonewprivs ;;
    kubelet) build -o "$staging/$p" k8s.io/kubernetes/cmd/kubelet ;;
    kube-proxy) build -o "$staging/$p" k8s.io/kubernetes/cmd/kube-proxy ;;
    sample-apiserver) build -o "$staging/$p" k8s.io/sample-apiserver ;;
    coredns) (cd "$COREDNS_DIR" && go mod download &&
      CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w" -o "$staging/$p" .) ;;
  esac
  log "$p built ($((SECONDS - t)) s)"
done
for p in "${PROGRAMS[@]}"; do mv -f "$staging/$p" "$out/$p"; done
printf '%s\n' "$release" >"$out/.complete"
log "Kubernetes $release tests built in $((SECONDS - started)) s"
printf '%s\n' "$out"
