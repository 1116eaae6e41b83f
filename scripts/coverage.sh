#!/usr/bin/env bash
# Line coverage of a workspace crate (default crates/model, the pure core) from its
# unit tests (`cargo test -p podhost-CRATE --lib`): per file, then the total. Uses rustc's own instrumentation
# (-Cinstrument-coverage) and the llvm-profdata/llvm-cov of rustup's llvm-tools
# component, which match rustc's LLVM (Debian's llvm packages are older than rustc's
# LLVM and cannot read its profiles). Installs the component when it is missing.
#
# usage: scripts/coverage.sh [CRATE] [-- TEST_ARGS...]    (CRATE: a directory under crates/)
#   scripts/coverage.sh                       # crates/model/src/, every unit test of it
#   scripts/coverage.sh model -- podsync::    # only the tests whose path starts with podsync::
#
# Builds into $CARGO_TARGET_DIR/coverage (default target/coverage), apart from normal
# builds: instrumented artifacts never mix with them. The first run rebuilds the
# dependencies there (minutes); later runs are incremental. Needs no root (the lib tests
# that need root fail without it, and the coverage of what ran is still printed).
set -euo pipefail
cd "$(dirname "$0")/.."

area="${1:-model}"
shift || true
[ "${1:-}" = "--" ] && shift
test_args=("$@")

src="crates/$area/src"
if [ ! -d "$src" ]; then
  echo "coverage.sh: $src is not a directory (the crates are: $(ls crates | tr '\n' ' '))" >&2
  exit 2
fi
package=$(sed -n 's/^name = "\(.*\)"$/\1/p' "crates/$area/Cargo.toml" | head -n 1)

sysroot="$(rustc --print sysroot)"
host="$(rustc -vV | sed -n 's/^host: //p')"
tools="$sysroot/lib/rustlib/$host/bin"
if [ ! -x "$tools/llvm-cov" ] || [ ! -x "$tools/llvm-profdata" ]; then
  echo "coverage.sh: installing rustup's llvm-tools component (llvm-cov, llvm-profdata)" >&2
  rustup component add llvm-tools-preview >&2 || {
    echo "coverage.sh: cannot install llvm-tools (rustup component add llvm-tools-preview);" \
      "rustc's LLVM is $(rustc -vV | sed -n 's/^LLVM version: //p') and a matching" \
      "llvm-cov is needed" >&2
    exit 1
  }
fi

target="${CARGO_TARGET_DIR:-target}/coverage"
profiles="$target/profiles"
rm -rf "$profiles"
mkdir -p "$profiles"

export RUSTFLAGS="${RUSTFLAGS:-} -Cinstrument-coverage"
export LLVM_PROFILE_FILE="$PWD/$profiles/%p-%m.profraw"
case "$target" in /*) export LLVM_PROFILE_FILE="$profiles/%p-%m.profraw" ;; esac

# The lib test binary's path, from cargo's own report of what it built.
binary="$(CARGO_TARGET_DIR="$target" cargo test -p "$package" --lib --locked --no-run --message-format=json |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)"
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "coverage.sh: cargo did not report the lib test binary" >&2
  exit 1
fi

status=0
"$binary" "${test_args[@]}" >"$target/test-output.txt" 2>&1 || status=$?
grep -E '^test result:' "$target/test-output.txt" >&2 || true
if [ "$status" -ne 0 ]; then
  echo "coverage.sh: some tests failed (exit $status; see $target/test-output.txt);" \
    "the coverage below is of what ran" >&2
fi

"$tools/llvm-profdata" merge -sparse "$profiles"/*.profraw -o "$target/lib.profdata"

mapfile -t files < <(find "$src" -name '*.rs' | sort)
echo "line coverage of $src/ from cargo test -p $package --lib (unit-test modules included):"
"$tools/llvm-cov" report "$binary" -instr-profile="$target/lib.profdata" \
  -show-region-summary=false -show-branch-summary=false -show-instantiation-summary=false \
  "${files[@]}" |
  awk -v root="$PWD/" -v area="$src/" '
    /^Filename/ { printf "%-44s %7s %7s %8s\n", "file", "lines", "missed", "covered"; next }
    /^-+$/ { next }
    NF >= 7 {
      name = $1; sub(root, "", name)
      # llvm-cov drops the common prefix of the names (crates/CRATE/src/): put it back.
      if (name != "TOTAL" && index(name, "crates/") != 1) name = area name
      # Columns: Functions Missed Executed  Lines Missed Cover
      printf "%-44s %7s %7s %8s\n", name, $(NF-2), $(NF-1), $NF
    }'
exit "$status"
