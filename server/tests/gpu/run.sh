#!/usr/bin/env bash
# The server on the GPU machine, in one call: build the library
# (SHMREG_WITH_CUDA=ON), install it to a prefix and build server/ against it
# with SERVER_WITH_CUDA=ON (scripts/lib/build_server.sh), run
# server/tests/gpu/test_cuda_infer.py (the device copy), test_gpu_model.py
# (the GPU model 'yolo') and test_tensor_paths.py (each data path of a
# system region: DMA in place, the one-copy staged path, a truncating
# client), then test_framework_tensors.py (PyTorch tensors of each allocator
# registered over --uds by shmreg.cuda_client: the shmreg package is built
# for the machine's Python into $BUILD/python-site, as python/tests/gpu/run.sh
# builds it, and put on PYTHONPATH), then test_cuda_live_upgrade.py (a live
# upgrade of a server holding those tensors and a CuPy buffer registered over
# HTTP), then the bench register_per_request.py
# (register per request), then the light model's cells (light_model_cost.py,
# about 2 minutes; SKIP_LIGHT_BENCH=1 leaves it out), then the GPU benchmark
# (seed_benchmark.sh; SKIP_SEED_BENCH=1 leaves it out, BENCH_QUICK=1
# shortens it). The machine's python3 runs them (CuPy, NumPy
# and pytest are in its image; tritonclient and perf_analyzer are not: the
# carried wheels in .whl/ are installed into /tmp/site and put on
# PYTHONPATH first, scripts/lib/carry.sh). The kernel is built for every
# major GPU architecture unless SERVER_CUDA_ARCHITECTURES says otherwise
# (e.g. 90 for the H200 alone, which saves minutes).
# Prints one summary line last; exit 0 only if at least one test passed and
# none failed (everything skipped means no device was usable, which on this
# machine is a failure) and the benches ran.
#
# The GPU machine has no network and lacks libmicrohttpd, RapidJSON, liburcu,
# xxhash (and maybe pkg-config): their Debian packages travel as .deb files in
# $SHMREG_CARRY/debs (default .carry/debs), as for tests/cuda/run.sh, with
# these added for the server (HTTP, then the gRPC service, which generates
# its code with protoc and grpc_cpp_plugin at build time):
#   apt-get download libmicrohttpd12 libmicrohttpd-dev rapidjson-dev \
#     libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc \
#     protobuf-compiler libprotoc32 libprotobuf-dev libprotobuf32 libprotobuf-lite32 \
#     libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2 \
#     libssl-dev zlib1g-dev
# They are unpacked under build/, never into /. The whole log goes to
# $OUT/server-gpu.log (default build/gpu-out): one file, since the GPU machine
# brings back few.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-build/gpu-out}
BUILD=$(realpath -m "${SERVER_GPU_BUILD:-build/server-gpu}")
LOG=$OUT/server-gpu.log
export JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3} # the image's python3 holds CuPy, NumPy and pytest
mkdir -p "$OUT" "$BUILD"
: >"$LOG"

summary() { echo "=== server-gpu summary: $*"; }

source scripts/lib/carry.sh        # unpack_carried, install_carried_wheels
source scripts/lib/build_server.sh # build_server

# build: library (CUDA backends on) installed to $BUILD/prefix, then the
# server (device copy and GPU model on, and the bare gRPC server that
# light_model_cost.py measures beside it) against it. Without -Werror: the
# GPU machine's compilers are not the CI's.
build() {
  SERVER_WERROR=OFF SERVER_LIB_CMAKE_ARGS=-DSHMREG_WITH_CUDA=ON build_server "$BUILD" \
    -DSERVER_WITH_CUDA=ON -DSERVER_BUILD_BENCH=ON \
    ${SERVER_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$SERVER_CUDA_ARCHITECTURES}
}

echo "=== server-gpu: unpack carried packages, build library + server (CUDA) in $BUILD"
rm -rf "$BUILD/lib" "$BUILD/app"
# The carried packages go under $BUILD/debs, a prefix of its own, so that
# neither this script nor tests/cuda/run.sh removes the other's.
if ! unpack_carried "$BUILD/debs" libmicrohttpd RapidJSON >>"$LOG" 2>&1 || ! build >>"$LOG" 2>&1; then
  tail -40 "$LOG"
  summary "BUILD FAILED (log: $LOG)"
  exit 1
fi
grep -E "shmreg: CUDA backends|device copy for CUDA regions|GPU model 'yolo'" "$LOG"
BIN=$BUILD/app/shmreg-server
# A library the loader cannot find would make every test fail at start-up;
# say which one here instead.
if ldd "$BIN" | grep -q "not found"; then
  ldd "$BIN" | grep "not found" | tee -a "$LOG"
  summary "FAILED: the server's libraries are not all found"
  exit 1
fi

echo "=== server-gpu: the shmreg package (CUDA on) into $BUILD/python-site"
rm -rf "$BUILD/python-site"
package_rc=0
if CMAKE_ARGS="-DSHMREG_WITH_CUDA=ON" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
   "$PYTHON" -m pip install --no-build-isolation --no-deps --target "$BUILD/python-site" . >>"$LOG" 2>&1; then
  export PYTHONPATH=$BUILD/python-site${PYTHONPATH:+:$PYTHONPATH}
else
  package_rc=1
  echo "=== server-gpu: the shmreg package did not build (log: $LOG)"
fi

echo "=== server-gpu: carried wheels into ${PYTHON_SITE:-/tmp/site}"
install_carried_wheels "${PYTHON_SITE:-/tmp/site}" >>"$LOG" 2>&1 ||
  echo "=== server-gpu: no carried wheels installed (log: $LOG): tritonclient tests skip"

echo "=== server-gpu: server/tests/gpu/test_cuda_infer.py test_gpu_model.py test_tensor_paths.py"
SERVER_BIN=$BIN PYTHONDONTWRITEBYTECODE=1 timeout 300 \
  "$PYTHON" -m pytest -p no:cacheprovider -rs -v server/tests/gpu/test_cuda_infer.py \
  server/tests/gpu/test_gpu_model.py server/tests/gpu/test_tensor_paths.py >>"$LOG" 2>&1
rc=$?
grep -E "PASSED|FAILED|ERROR|SKIPPED" "$LOG" | grep -v "^=" | head -60
# pytest's closing line, e.g. "7 passed in 4.02s".
last=$(grep -E "^=+ .*(passed|failed|skipped|error|no tests ran).* in [0-9.]+s" "$LOG" | tail -1 |
  sed -E 's/^=+ //; s/ =+$//')
if [ "$rc" -ne 0 ]; then
  grep -E -A30 "^(_{5,} test|E )" "$LOG" | head -80
  [ -n "$last" ] || tail -20 "$LOG"
elif ! grep -qE "[0-9]+ passed" <<<"$last"; then
  rc=1 # all skipped: no CuPy or no device where one is expected
fi

# own_pytest_run NAME SECONDS FILE: FILE in a pytest run of its own (the
# clients' tensors need the shmreg package, torch, CuPy and a device), its
# log in $OUT/NAME.log and in $LOG, the lines of each case shown; sets
# own_last to pytest's closing line. Returns 1 when a case failed, pytest
# did not finish within SECONDS, or nothing passed (all skipped: no package,
# no torch, no CuPy or no device, where all are expected).
own_pytest_run() {
  local name=$1 seconds=$2 file=$3 log=$OUT/$1.log code
  echo "=== server-gpu: $file"
  SERVER_BIN=$BIN PYTHONDONTWRITEBYTECODE=1 timeout "$seconds" \
    "$PYTHON" -m pytest -p no:cacheprovider -rs -v -s "$file" >"$log" 2>&1
  code=$?
  cat "$log" >>"$LOG"
  grep -E "PASSED|FAILED|ERROR|SKIPPED|^  |\{\"registered\"|through the (old|new) server:|^(old|new) server: |left out of" \
    "$log" | head -80
  own_last=$(grep -E "^=+ .*(passed|failed|skipped|error|no tests ran).* in [0-9.]+s" "$log" | tail -1 |
    sed -E 's/^=+ //; s/ =+$//')
  if [ "$code" -ne 0 ]; then
    grep -E -A30 "^(_{5,} test|E )" "$log" | head -80
    [ "$code" -ne 124 ] || own_last="timed out after $seconds s${own_last:+ ($own_last)}"
    return 1
  fi
  [ "$package_rc" -eq 0 ] && grep -qE "[0-9]+ passed" <<<"$own_last"
}

# PyTorch tensors over --uds: their own pytest run, their own summary line.
frameworks_rc=0
own_pytest_run framework-tensors 300 server/tests/gpu/test_framework_tensors.py || frameworks_rc=1
frameworks_last=$own_last
# A live upgrade with a region of each CUDA kind (those tensors over --uds
# and a CuPy buffer over HTTP): its own run, its own summary line.
upgrade_rc=0
own_pytest_run cuda-live-upgrade 240 server/tests/gpu/test_cuda_live_upgrade.py || upgrade_rc=1
upgrade_last=$own_last
[ "$frameworks_rc" -eq 0 ] && [ "$upgrade_rc" -eq 0 ] || rc=1

# The register-per-request row, with this CUDA build: register, infer, unregister
# per request, pinned 16 MiB, cache off then on (about 25 s).
echo "=== server-gpu: server/bench/gpu/register_per_request.py (figures in $OUT/register-per-request.md)"
SERVER_BIN=$BIN OUT=$OUT PYTHONDONTWRITEBYTECODE=1 timeout 60 \
  "$PYTHON" server/bench/gpu/register_per_request.py --seconds 10 >>"$LOG" 2>&1
bench_rc=$?
if [ "$bench_rc" -eq 0 ]; then
  cat "$OUT/register-per-request.md"
else
  tail -20 "$LOG"
  rc=1
fi
# The light model's targets against the bare gRPC floor and the link, in
# one server.
light_rc=skipped
if [ "${SKIP_LIGHT_BENCH:-0}" != 1 ]; then
  echo "=== server-gpu: server/bench/gpu/light_model_cost.py (figures in $OUT/light-model.md)"
  SERVER_BIN=$BIN OUT=$OUT PYTHONDONTWRITEBYTECODE=1 timeout 300 \
    "$PYTHON" server/bench/gpu/light_model_cost.py >>"$LOG" 2>&1
  light_rc=$?
  [ ! -f "$OUT/light-model.md" ] || cat "$OUT/light-model.md"
  if [ "$light_rc" -ne 0 ]; then
    grep -E "light_model_cost" "$LOG" | tail -5
    rc=1
  fi
fi
seed_rc=skipped
if [ "${SKIP_SEED_BENCH:-0}" != 1 ]; then
  SERVER_GPU_BUILD=$BUILD OUT=$OUT bash server/tests/gpu/seed_benchmark.sh
  seed_rc=$?
  [ "$seed_rc" -eq 0 ] || rc=1
fi
summary "${last:-no pytest summary}; framework tensors: ${frameworks_last:-no pytest summary};" \
  "CUDA live upgrade: ${upgrade_last:-no pytest summary}" \
  "(rc=$rc, register-per-request bench rc=$bench_rc, light model bench rc=$light_rc," \
  "seed benchmark rc=$seed_rc)"
exit "$rc"
