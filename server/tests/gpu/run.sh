#!/usr/bin/env bash
# The v2 frontend's device copy on the GPU machine, in one call: build the
# library (SHMREG_WITH_CUDA=ON) and install it to a prefix, build
# server against it with FRONTEND_WITH_CUDA=ON, then run
# server/tests/gpu/test_cuda_infer.py (the device copy) and
# test_gpu_model.py (the GPU model 'yolo'), then the bench
# register_per_request.py (issue 10), with the machine's python3 (CuPy,
# NumPy and pytest are in its image; tritonclient is not, so the tests speak
# plain HTTP, and test_gpu_model.py adds tritonclient where PYTHONPATH holds
# it: server/tests/gpu/issue14.sh installs the carried wheels there). The
# kernel is built for every major GPU architecture unless
# FRONTEND_CUDA_ARCHITECTURES says otherwise (e.g. 90 for the H200 alone).
# Prints one summary line last; exit 0 only if at least one test passed and
# none failed (everything skipped means no device was usable, which on this
# machine is a failure).
#
# The GPU machine has no network and lacks libmicrohttpd, json-c, liburcu,
# xxhash (and maybe pkg-config): their Debian packages travel as .deb files in
# $SHMREG_CARRY/debs (default .carry/debs), as for tests/cuda/run.sh, with
# these added for the frontend (HTTP, then the gRPC service, which generates
# its code with protoc and grpc_cpp_plugin at build time):
#   apt-get download libmicrohttpd12 libmicrohttpd-dev libjson-c5 libjson-c-dev \
#     libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc \
#     protobuf-compiler libprotoc32 libprotobuf-dev libprotobuf32 libprotobuf-lite32 \
#     libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2 \
#     libssl-dev zlib1g-dev
# They are unpacked under build/, never into /. The whole log goes to
# $OUT/frontend-gpu.log (default build/gpu-out): one file, since a device call
# brings back few.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-build/gpu-out}
CARRY=$(realpath "${SHMREG_CARRY:-.carry}")
BUILD=$(realpath -m "${FRONTEND_GPU_BUILD:-build/frontend-gpu}")
LOG=$OUT/frontend-gpu.log
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3} # the image's python3 holds CuPy, NumPy and pytest
mkdir -p "$OUT" "$BUILD"
: >"$LOG"

summary() { echo "=== frontend-gpu summary: $*"; }

# Unpack the carried packages into $BUILD/debs and point pkg-config, CMake and
# the loader there (the same approach as tests/cuda/run.sh, in a prefix of its
# own so that neither script removes the other's).
unpack_carried() {
  local prefix=$BUILD/debs multiarch=usr/lib/x86_64-linux-gnu deb
  rm -rf "$prefix" && mkdir -p "$prefix"
  for deb in "$CARRY"/debs/*.deb; do dpkg -x "$deb" "$prefix" || return 1; done
  local pc=$prefix/$multiarch/pkgconfig
  if [ ! -f "$pc/libmicrohttpd.pc" ] || [ ! -f "$pc/json-c.pc" ]; then
    echo "no libmicrohttpd-dev or libjson-c-dev among $CARRY/debs"
    return 1
  fi
  # The .pc files name /usr: point them at the unpacked tree.
  sed -E -i "s#(^[a-z_]+=|-I|-L)/usr#\1$prefix/usr#g" "$pc"/*.pc
  # libmicrohttpd's .pc requires gnutls's .pc for static links only; the GPU
  # machine has the gnutls library (libgnutls.so.30) but not its .pc, and the
  # frontend links libmicrohttpd as a shared library.
  sed -i '/^Requires.private:/d' "$pc/libmicrohttpd.pc"
  export PKG_CONFIG_PATH=$pc
  export CMAKE_PREFIX_PATH=$prefix/usr
  export LD_LIBRARY_PATH=$prefix/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! command -v pkg-config >/dev/null; then
    export PKG_CONFIG=$prefix/usr/bin/pkgconf
    export PATH=$prefix/usr/bin:$PATH
  fi
}

# build: library (installed to $BUILD/prefix), then the frontend against it.
build() {
  cmake -S . -B "$BUILD/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=ON \
    -DBUILD_TESTING=OFF -DSHMREG_BUILD_EXAMPLES=OFF -DSHMREG_BUILD_BENCH=OFF \
    -DCMAKE_INSTALL_PREFIX="$BUILD/prefix" &&
    cmake --build "$BUILD/lib" -j "$JOBS" &&
    rm -rf "$BUILD/prefix" && cmake --install "$BUILD/lib" &&
    cmake -S server -B "$BUILD/app" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFRONTEND_WITH_CUDA=ON -DCMAKE_PREFIX_PATH="$BUILD/prefix;$CMAKE_PREFIX_PATH" \
      ${FRONTEND_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$FRONTEND_CUDA_ARCHITECTURES} &&
    cmake --build "$BUILD/app" -j "$JOBS"
}

echo "=== frontend-gpu: unpack carried packages, build library + frontend (CUDA) in $BUILD"
rm -rf "$BUILD/lib" "$BUILD/app"
if ! unpack_carried >>"$LOG" 2>&1 || ! build >>"$LOG" 2>&1; then
  tail -40 "$LOG"
  summary "BUILD FAILED (log: $LOG)"
  exit 1
fi
grep -E "shmreg: CUDA backends|device copy for CUDA regions|GPU model 'yolo'" "$LOG"
BIN=$BUILD/app/shmreg-v2-frontend
# A library the loader cannot find would make every test fail at start-up;
# say which one here instead.
if ldd "$BIN" | grep -q "not found"; then
  ldd "$BIN" | grep "not found" | tee -a "$LOG"
  summary "FAILED: the frontend's libraries are not all found"
  exit 1
fi

echo "=== frontend-gpu: server/tests/gpu/test_cuda_infer.py test_gpu_model.py"
FRONTEND_BIN=$BIN PYTHONDONTWRITEBYTECODE=1 timeout 300 \
  "$PYTHON" -m pytest -p no:cacheprovider -rs -v server/tests/gpu/test_cuda_infer.py \
  server/tests/gpu/test_gpu_model.py >>"$LOG" 2>&1
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

# Issue 10's frontend row, with this CUDA build: register, infer, unregister
# per request, pinned 16 MiB, cache off then on (about 25 s).
echo "=== frontend-gpu: server/bench/gpu/register_per_request.py (figures in $OUT/register-per-request.md)"
FRONTEND_BIN=$BIN OUT=$OUT PYTHONDONTWRITEBYTECODE=1 timeout 60 \
  "$PYTHON" server/bench/gpu/register_per_request.py --seconds 10 >>"$LOG" 2>&1
bench_rc=$?
if [ "$bench_rc" -eq 0 ]; then
  cat "$OUT/register-per-request.md"
else
  tail -20 "$LOG"
  rc=1
fi
summary "${last:-no pytest summary} (rc=$rc, register-per-request bench rc=$bench_rc)"
exit "$rc"
