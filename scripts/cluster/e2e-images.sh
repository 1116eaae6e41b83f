#!/usr/bin/env bash
# [ETCD=PATH] scripts/cluster/e2e-images.sh BIN_DIR OUT_DIR — the container images Kubernetes' node
# conformance tests run, built offline under the exact names the e2e framework uses
# (k8s.io/kubernetes test/utils/image/manifest.go of the pinned release), so that their
# IfNotPresent pulls find them in podhost's store:
#
#   e2e-test-images/busybox:1.37.0-1   Debian's busybox-static (oci/busybox/build.sh), its
#                                        applets in /bin as in the upstream image
#   e2e-test-images/agnhost:2.63.0     Debian's curl, netcat, iproute2, dnsutils and iperf
#   e2e-test-images/agnhost:2.55         (scripts/build-debian-image.sh) plus /agnhost
#                                        (built from the pinned module by
#                                        build-conformance.sh), its entrypoint, the user and
#                                        group the image defines, a self-signed
#                                        /localhost.crt and .key, and the fake registry's
#                                        /var/registry holding the pause image below as
#                                        pause:testing
#   e2e-test-images/nonewprivs:1.4     busybox plus the setuid /usr/local/bin/nnp
#   e2e-test-images/nonroot:1.5        busybox run as user 1234
#   e2e-test-images/nginx:1.15-4       Debian's nginx (scripts/build-debian-image.sh)
#   pause:3.10.2                       tests/programs/pause.c, as the image's /pause
#   kube-proxy:v1.36.3                 Debian's nftables, iptables and conntrack plus
#                                        /usr/local/bin/kube-proxy (build-conformance.sh),
#                                        the tag of the pinned release, as kubeadm names it;
#                                        run by scripts/cluster/kube-proxy-up.sh
#   coredns/coredns:v<version>         busybox plus /coredns (build-conformance.sh), run by
#                                        scripts/cluster/coredns-up.sh
#   e2e-test-images/nautilus:1.8, kitten:1.8
#                                      busybox plus /agnhost serving / (test-webserver) with
#                                        /data.json naming the picture, as kubectl's Update
#                                        Demo specs read it (the pictures themselves left out)
#   e2e-test-images/glibc-dns-testing:2.0.0
#                                      Debian's dnsutils (dig) and glibc's getent, the DNS
#                                        specs' second querier
#   e2e-test-images/sample-apiserver:1.29.2
#                                      busybox plus /sample-apiserver (build-conformance.sh),
#                                        its entrypoint, as the upstream image
#   etcd:3.6.8-0                       busybox plus $ETCD (build-control-plane.sh's etcd,
#                                        the version the release pins) as /usr/local/bin/etcd,
#                                        the path the Aggregator spec runs beside the sample
#                                        API server; without ETCD, Debian's etcd-server
#
# BIN_DIR holds agnhost, nnp, kube-proxy, coredns and sample-apiserver (build-conformance.sh's output). Each image is an OCI
# layout in OUT_DIR/<name> (the Debian ones are rebuilt only when their inputs change);
# the output is one "REF DIR" line per image, for
# `podhost load --name REF DIR`. What the upstream images have and these lack is named in
# docs/conformance.md (agnhost's coredns and /uploads among it).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 BIN_DIR OUT_DIR" >&2; exit 2; }
BIN=$1
OUT=$2
E2E=registry.k8s.io/e2e-test-images
PATH_ENV='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
mkdir -p "$OUT"
for p in agnhost nnp kube-proxy coredns sample-apiserver; do
  [ -x "$BIN/$p" ] || { echo "e2e-images: $BIN/$p missing (scripts/cluster/build-conformance.sh builds it)" >&2; exit 1; }
done
command -v cc >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null

busybox_image() { # REF DIR [build.sh options...]
  local ref=$1 dir=$2
  shift 2
  # Every applet in /bin, as in the upstream images (Docker's busybox): the tests run
  # /bin/sysctl, /bin/env and others by that path.
  bash oci/busybox/build.sh --ref "$ref" --all-in-bin "$@" "$OUT/$dir" >/dev/null 2>>"$OUT/build.log" ||
    { cat "$OUT/build.log" >&2; exit 1; }
  printf '%s %s\n' "$ref" "$OUT/$dir"
}
label() { printf '"Labels":{"org.opencontainers.image.version":"%s"}' "$1"; }

busybox_image "$E2E/busybox:1.37.0-1" busybox --config "{$PATH_ENV,\"Cmd\":[\"sh\"],$(label 1.37.0-1)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
debian_image() { # REF DIR build-debian-image.sh arguments...
  local ref=$1 dir=$2
  shift 2
  bash scripts/build-debian-image.sh "$@" >/dev/null 2>"$OUT/$dir.log" || { cat "$OUT/$dir.log" >&2; exit 1; }
  printf '%s %s\n' "$ref" "$OUT/$dir"
}
# agnhost's TLS servers (netexec, porter) read /localhost.crt and /localhost.key: a
# self-signed pair for localhost, made once per OUT_DIR (the upstream image ships its own).
if [ ! -s "$OUT/localhost.crt" ] || [ ! -s "$OUT/localhost.key" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -days 3650 \
    -keyout "$OUT/localhost.key" -out "$OUT/localhost.crt" 2>/dev/null
fi
cc -static -O2 -o "$work/pause" tests/programs/pause.c
busybox_image registry.k8s.io/pause:3.10.2 pause --put "$work/pause:/pause" \
  --config "{$PATH_ENV,\"Entrypoint\":[\"/pause\"],\"User\":\"65535:65535\",$(label 3.10.2)}"

# agnhost's fake-registry-server (test/images/agnhost/fakeregistryserver/registryserver.go)
# serves /var/registry: NAME/manifests/TAG is a file holding the digest the tag names (it
# redirects there), NAME/manifests/sha256/XX/HEX/data a manifest or index,
# NAME/blobs/sha256/XX/HEX/data a blob (XX the digest's first two hex digits). Upstream's
# holds registry.k8s.io/pause:3.10.2 as pause:testing (its prepare_registry.sh and
# images.txt): here the pause image above, under an index of its one platform, as
# upstream's tag names an index. The files sit in OUT_DIR (not the temp dir), so that the
# agnhost images' cache key stays the same from run to run.
REGISTRY=$OUT/fake-registry
REGISTRY_PUTS=()
digest_path() { # DIR sha256:HEX
  local hex=${2#sha256:}
  printf '%s/sha256/%s/%s/data' "$1" "${hex:0:2}" "$hex"
}
registry_file() { # SRC PATH (under /var/registry)
  mkdir -p "$(dirname "$REGISTRY/$2")"
  cp "$1" "$REGISTRY/$2"
  REGISTRY_PUTS+=(--put "$REGISTRY/$2:/var/registry/$2:0644")
}
digests() { grep -o '"digest":"sha256:[0-9a-f]*"' "$1" | cut -d'"' -f4; }
rm -rf "$REGISTRY"
pause_blobs=$OUT/pause/blobs/sha256
pause_manifest=$(digests "$OUT/pause/index.json" | head -n1)
pause_manifest_file=$pause_blobs/${pause_manifest#sha256:}
pause_platform=$(grep -o '"platform":{[^}]*}' "$OUT/pause/index.json" | head -n1)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,%s}]}' \
  "$pause_manifest" "$(stat -c %s "$pause_manifest_file")" "$pause_platform" >"$work/pause-index.json"
pause_index=sha256:$(sha256sum <"$work/pause-index.json" | cut -d' ' -f1)
printf '%s\n' "$pause_index" >"$work/pause-tag"
registry_file "$work/pause-tag" pause/manifests/testing
registry_file "$work/pause-index.json" "$(digest_path pause/manifests "$pause_index")"
registry_file "$pause_manifest_file" "$(digest_path pause/manifests "$pause_manifest")"
for blob in $(digests "$pause_manifest_file"); do
  registry_file "$pause_blobs/${blob#sha256:}" "$(digest_path pause/blobs "$blob")"
done

# The upstream image is Alpine with bind-tools, curl, netcat, iproute2, iperf and bash
# (the tests' exec hooks and probes run curl and nc in it); here Debian's equivalents.
for version in 2.63.0 2.55; do
  debian_image "$E2E/agnhost:$version" "agnhost-$version" \
    --entrypoint '["/agnhost"]' --cmd '["pause"]' \
    --put "$BIN/agnhost:/agnhost" --link agnhost:/agnhost-2 \
    --put "$OUT/localhost.crt:/localhost.crt:0644" --put "$OUT/localhost.key:/localhost.key:0644" \
    "${REGISTRY_PUTS[@]}" \
    --append 'etc/passwd:user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' \
    --append 'etc/group:user-defined-in-image:x:1000:' \
    --append 'etc/group:group-defined-in-image:x:50000:user-defined-in-image' \
    --append "etc/agnhost-image:$version" \
    "$OUT/agnhost-$version" agnhost curl netcat-openbsd iproute2 dnsutils iperf
done
busybox_image "$E2E/nonewprivs:1.4" nonewprivs --put "$BIN/nnp:/usr/local/bin/nnp:4755" \
  --config "{$PATH_ENV,\"Cmd\":[\"nnp\"],$(label 1.4)}"
busybox_image "$E2E/nonroot:1.5" nonroot --config "{$PATH_ENV,\"Cmd\":[\"sh\"],\"User\":\"1234\",$(label 1.5)}"
debian_image "$E2E/nginx:1.15-4" nginx --cmd '["nginx","-g","daemon off;"]' "$OUT/nginx" nginx nginx-light
# kube-proxy drives the nft (nftables mode) and iptables/ip6tables (iptables mode, and
# the cleanup of the other mode's rules at start) programs of its image, and conntrack
# (stale UDP entries); the upstream image is Debian-based too (distroless-iptables).
release=$("$BIN/kube-proxy" --version | awk '{print $2}')
debian_image "registry.k8s.io/kube-proxy:$release" kube-proxy --entrypoint '["/usr/local/bin/kube-proxy"]' \
  --put "$BIN/kube-proxy:/usr/local/bin/kube-proxy" "$OUT/kube-proxy" kube-proxy nftables iptables conntrack
# CoreDNS runs as root here: the upstream image's non-root user binds :53 through a file
# capability on its binary, which these layouts do not carry.
coredns_version=$("$BIN/coredns" -version | sed -n 's/^CoreDNS-//p' | head -n1)
busybox_image "registry.k8s.io/coredns/coredns:v$coredns_version" coredns --put "$BIN/coredns:/coredns" \
  --config "{$PATH_ENV,\"Entrypoint\":[\"/coredns\"],$(label "$coredns_version")}"
debian_image "$E2E/glibc-dns-testing:2.0.0" glibc-dns-testing --cmd '["sh"]' \
  "$OUT/glibc-dns-testing" glibc-dns-testing dnsutils
# The Update Demo images: agnhost's test-webserver serves / and the specs read
# /data.json through the API server's pod proxy.
for demo in nautilus kitten; do
  printf '{"image": "%s.jpg"}\n' "$demo" >"$work/$demo-data.json"
  busybox_image "$E2E/$demo:1.8" "$demo" --put "$BIN/agnhost:/agnhost" --put "$work/$demo-data.json:/data.json:0644" \
    --config "{$PATH_ENV,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"test-webserver\"],$(label 1.8)}"
done
# The Aggregator spec's Deployment: the sample API server and its own etcd in one pod.
busybox_image "$E2E/sample-apiserver:1.29.2" sample-apiserver --put "$BIN/sample-apiserver:/sample-apiserver" \
  --config "{$PATH_ENV,\"Entrypoint\":[\"/sample-apiserver\"],$(label 1.29.2)}"
if [ -n "${ETCD:-}" ]; then
  busybox_image registry.k8s.io/etcd:3.6.8-0 etcd --put "$ETCD:/usr/local/bin/etcd" \
    --config "{$PATH_ENV,$(label 3.6.8-0)}"
else
  debian_image registry.k8s.io/etcd:3.6.8-0 etcd --link /usr/bin/etcd:/usr/local/bin/etcd \
    "$OUT/etcd" etcd etcd-server
fi
