#!/usr/bin/env bash
# Everything the GPU machine runs, in one call: build with the CUDA backends,
# run every GPU test (and the rest of the suite, now with pinning live), then
# shmreg-bench-gpu and the core's shmreg-bench (SKIP_LIB_BENCHES=1: not),
# then the server's GPU run (server/tests/gpu/run.sh: its tests and the
# seed benchmark). Logs go to $OUT (default build/gpu-out); the summary is
# printed last.
#
# The GPU machine has no network and lacks liburcu, xxhash and cmocka (and
# maybe pkg-config): bring Debian's packages as .deb files in $SHMREG_CARRY/debs
# (default .carry/debs; see docs/cuda.md), which are unpacked into
# $SHMREG_CARRY/prefix, never into /.
# There is no device code to compile (the library calls the CUDA runtime and
# driver APIs only), so no CUDA architecture is chosen here.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu-out}
CARRY=$(realpath "${SHMREG_CARRY:-.carry}")
BUILD=build/gpu
JOBS=$(nproc)
mkdir -p "$OUT"
say() { echo "=== $*"; }

source scripts/lib/carry.sh # unpack_carried

machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
    --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -20
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  echo "cpus: $(nproc)"; df -h /dev/shm | tail -1
}

say "machine"
machine | tee "$OUT/machine.txt"
unpack_carried "$CARRY/prefix" || exit 1

say "configure + build ($BUILD)"
rm -rf "$BUILD"
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=ON \
         -DSHMREG_BUILD_EXAMPLES=OFF &&
       cmake --build "$BUILD" -j "$JOBS"; } >"$OUT/build.log" 2>&1; then
  tail -60 "$OUT/build.log"
  say "BUILD FAILED"
  exit 1
fi
grep -E "shmreg: CUDA backends" "$OUT/build.log"

say "GPU tests"
ctest --test-dir "$BUILD" -L gpu -V --timeout 300 2>&1 | tee "$OUT/ctest-gpu.log" |
  grep -E "Test +#|tests passed|\[  (FAILED|ERROR|PASSED|SKIPPED) |stress:|all clean|skipped|pin-holes:"
gpu_rc=${PIPESTATUS[0]}

say "rest of the suite (pinning is live here)"
ctest --test-dir "$BUILD" -LE gpu --output-on-failure -j 8 --timeout 300 >"$OUT/ctest-rest.log" 2>&1
rest_rc=$?
grep -E "tests passed|Failed|\*\*\*" "$OUT/ctest-rest.log" | head -30

# SKIP_LIB_BENCHES=1 leaves out the library's two benches (several minutes),
# so that the server's tests and the seed benchmark fit in one run of this
# script on a machine lent for a limited time.
bench_rc=0
if [ "${SKIP_LIB_BENCHES:-0}" != 1 ]; then
  say "shmreg-bench-gpu"
  timeout 300 "$BUILD"/bench/gpu/shmreg-bench-gpu 2>&1 | tee "$OUT/bench-gpu.md"
  bench_rc=${PIPESTATUS[0]}
fi

core_rc=0
if [ "${SKIP_LIB_BENCHES:-0}" != 1 ] && [ -x "$BUILD"/bench/shmreg-bench ]; then
  say "shmreg-bench --threads 1,2,4,8,16"
  timeout 240 "$BUILD"/bench/shmreg-bench --threads 1,2,4,8,16 --repeat 5 >"$OUT/bench-core.md" 2>&1
  core_rc=$?
  tail -40 "$OUT/bench-core.md"
fi

say "server: GPU tests and seed benchmark (server/tests/gpu/run.sh)"
bash server/tests/gpu/run.sh
server_rc=$?

say "summary: gpu tests rc=$gpu_rc, other tests rc=$rest_rc, bench-gpu rc=$bench_rc, bench-core rc=$core_rc, server-gpu rc=$server_rc"
[ "$gpu_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$rest_rc" -eq 0 ] && [ "$server_rc" -eq 0 ]
