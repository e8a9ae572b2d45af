#!/usr/bin/env bash
# Record libshmreg's ABI on purpose: build the shared library and write what
# its public header exposes (functions, their types, the symbol versions) to
# abi/libshmreg.abi, the baseline that the ABI tier (scripts/tests.d/15-abi.sh)
# compares every build against. Commit the result with the change that moved
# the ABI, and say why in the commit (docs/abi.md has the rules).
#
#   bash scripts/abi-baseline.sh                  rebuild and re-record the baseline
#   bash scripts/abi-baseline.sh --record LIB OUT record LIB's ABI to OUT (the tier uses
#                                                 this, so both sides are made alike)
#
# The baseline is recorded from a build without CUDA or UCX, so that any machine can
# record it; the tier checks that the build with both has the same ABI.
set -euo pipefail
cd "$(dirname "$0")/.."

# abidw keeps only what include/shmreg declares (--headers-dir with
# --drop-private-types, --exported-interfaces-only), and nothing of this
# machine: no corpus or compilation-directory paths, file names without their
# folders, no DT_NEEDED list (liburcu's soname is not libshmreg's ABI). Type
# ids are hashes, so that a small API change is a small diff of the file.
record() {
  local lib=$1 out=$2
  abidw --headers-dir include/shmreg --drop-private-types --exported-interfaces-only \
    --no-corpus-path --no-comp-dir-path --short-locs --no-elf-needed --type-id-style hash \
    --out-file "$out" "$lib"
}

if [ "${1:-}" = --record ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --record LIB OUT" >&2; exit 2; }
  record "$2" "$3"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--record LIB OUT]" >&2; exit 2; }

bash scripts/install-deps.sh
mkdir -p build
dir=build/abi-baseline
cmake -S . -B "$dir" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=OFF -DSHMREG_WITH_UCX=OFF \
  -DBUILD_TESTING=OFF -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF >"$dir.configure.log" 2>&1 \
  || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" --target shmreg -j "$(nproc)" >/dev/null
mkdir -p abi
record "$dir/src/libshmreg.so" abi/libshmreg.abi
echo "abi-baseline: recorded abi/libshmreg.abi from $dir/src/libshmreg.so"
git --no-pager diff --stat -- abi/libshmreg.abi || true
