# Packs a root filesystem directory into a one-layer OCI image layout. Sourced by the
# image recipes (oci/busybox/build.sh, scripts/build-debian-image.sh); not run alone.
#
#   oci_write_layout ROOTFS OUT REF ARCH CONFIG CREATED_BY OWNERS
#
# CONFIG is the image config's "config" object as JSON (Env, Cmd, ...). OWNERS is
# "root" (every entry owned by 0:0, for a rootfs built as files of our own) or "keep"
# (the numeric owners on disk, for a rootfs a package manager populated: a package's
# files may belong to its system user). Prints the manifest digest (sha256:...) on stdout.
#
# Reproducible: entries sorted (LC_ALL=C), every mtime at the epoch, no atime/ctime,
# gzip without name or time, JSON written byte for byte with printf. OUT receives
# oci-layout, index.json and blobs/sha256/... (an existing layout there is replaced;
# other files are left alone).

oci_write_layout() {
  local rootfs=$1 out=$2 ref=$3 arch=$4 config=$5 created_by=$6 owners=$7
  local work created=1970-01-01T00:00:00Z
  work=$(mktemp -d)
  local blobs=$work/blobs/sha256
  mkdir -p "$blobs"

  local owner_args=(--numeric-owner)
  case "$owners" in
    root) owner_args+=(--owner=0 --group=0) ;;
    keep) ;;
    *) echo "oci_write_layout: OWNERS must be root or keep, not $owners" >&2; return 2 ;;
  esac

  (cd "$rootfs" && find . -mindepth 1 | sed 's,^\./,,' | LC_ALL=C sort) >"$work/files"
  tar -C "$rootfs" --no-recursion -T "$work/files" \
    "${owner_args[@]}" --mtime=@0 \
    --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -cf "$work/layer.tar"

  local diff_id layer layer_size config_digest config_size manifest manifest_size
  diff_id=$(_oci_sha "$work/layer.tar")
  gzip -n -9 -c "$work/layer.tar" >"$work/layer.tar.gz"
  rm -f "$work/layer.tar"
  layer_size=$(stat -c %s "$work/layer.tar.gz")
  layer=$(_oci_put "$work/layer.tar.gz" "$blobs")
  printf 'oci: layer sha256:%s (%s bytes, diff_id sha256:%s)\n' \
    "$layer" "$layer_size" "$diff_id" >&2

  printf '{"created":"%s","architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"%s"}]}' \
    "$created" "$arch" "$config" "$diff_id" "$created" "$created_by" >"$work/config.json"
  config_size=$(stat -c %s "$work/config.json")
  config_digest=$(_oci_put "$work/config.json" "$blobs")

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer" "$layer_size" >"$work/manifest.json"
  manifest_size=$(stat -c %s "$work/manifest.json")
  manifest=$(_oci_put "$work/manifest.json" "$blobs")

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$arch" "$ref" "$ref" >"$work/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"

  mkdir -p "$out"
  rm -rf "$out/blobs" "$out/index.json" "$out/oci-layout"
  mv "$work/blobs" "$out/blobs"
  mv "$work/oci-layout" "$out/oci-layout"
  mv "$work/index.json" "$out/index.json"
  rm -rf "$work"
  printf 'sha256:%s\n' "$manifest"
}

# Copies host files into a root filesystem: each SPEC is SRC:DEST[:MODE] (mode 0755 by
# default), DEST relative to ROOTFS, its directories made.
#
#   oci_put_files ROOTFS SPEC...
oci_put_files() {
  local rootfs=$1 p src rest dest mode
  shift
  for p in "$@"; do
    src=${p%%:*}
    rest=${p#*:}
    dest=${rest%%:*}
    mode=0755
    [ "$rest" != "$dest" ] && mode=${rest#*:}
    mkdir -p "$rootfs/$(dirname "/$dest")"
    install -m "$mode" "$src" "$rootfs/${dest#/}"
  done
}

# Makes symlinks in a root filesystem: each SPEC is TARGET:DEST, DEST relative to ROOTFS.
#
#   oci_link_files ROOTFS SPEC...
oci_link_files() {
  local rootfs=$1 l dest
  shift
  for l in "$@"; do
    dest=${l#*:}
    mkdir -p "$rootfs/$(dirname "/$dest")"
    ln -sfn "${l%%:*}" "$rootfs/${dest#/}"
  done
}

# The architecture name OCI uses for this machine.
oci_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) dpkg --print-architecture 2>/dev/null || echo amd64 ;;
  esac
}

_oci_sha() { sha256sum "$1" | cut -d' ' -f1; }

# Moves FILE into the blob dir under its digest; prints the hex digest.
_oci_put() {
  local h
  h=$(_oci_sha "$1")
  mv "$1" "$2/$h"
  printf '%s' "$h"
}
