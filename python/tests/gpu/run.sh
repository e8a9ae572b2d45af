#!/usr/bin/env bash
# The Python package on the GPU machine, in one call: build and install it
# with the machine's own Python (it has nanobind, scikit-build-core, numpy,
# torch, cupy and pytest, and no network, so the build is
#   pip install --no-build-isolation --no-deps .
# which uses the installed nanobind and scikit-build-core instead of fetching
# them), into a folder of its own under build/ (--target, never into the
# image's site-packages), then run all of python/tests against it: the CPU
# suite with CUDA live, and python/tests/gpu (CUDA IPC, VMM descriptor and
# pinned regions through torch and cupy). Prints pytest's summary line last;
# exit 0 only if tests passed, none failed, and the GPU tests ran.
#
# liburcu and xxhash are not on the GPU machine: as for tests/cuda/run.sh,
# their Debian packages travel as .deb files in $SHMREG_CARRY/debs (default
# .carry/debs) and are unpacked under build/, never into /. The loader finds
# liburcu there at run time through LD_LIBRARY_PATH.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-build/gpu-out}
BUILD=$(realpath -m "${PYTHON_GPU_BUILD:-build/python-gpu}")
LOG=$OUT/python-gpu.log
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT" "$BUILD"
: >"$LOG"
summary() { echo "=== python-gpu summary: $*"; }

source scripts/lib/carry.sh # unpack_carried

echo "=== python-gpu: $("$PYTHON" --version), pip install --no-build-isolation into $BUILD/site"
"$PYTHON" -c 'import nanobind, scikit_build_core, numpy, torch, cupy; print("nanobind", nanobind.__version__, "scikit-build-core", scikit_build_core.__version__, "numpy", numpy.__version__, "torch", torch.__version__, "cupy", cupy.__version__)' 2>&1 | tee -a "$LOG"
rm -rf "$BUILD/site"
if ! unpack_carried "$BUILD/debs" >>"$LOG" 2>&1 ||
   ! CMAKE_ARGS="-DSHMREG_WITH_CUDA=ON" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
     "$PYTHON" -m pip install -v --no-build-isolation --no-deps --target "$BUILD/site" . >>"$LOG" 2>&1; then
  tail -40 "$LOG"
  summary "BUILD FAILED (log: $LOG)"
  exit 1
fi
grep -E "shmreg: CUDA backends" "$LOG"

echo "=== python-gpu: pytest python/tests"
PYTHONPATH=$BUILD/site PYTHONDONTWRITEBYTECODE=1 timeout 400 \
  "$PYTHON" -m pytest -p no:cacheprovider -rsx -v python/tests >>"$LOG" 2>&1
rc=$?
grep -E "PASSED|FAILED|ERROR|SKIPPED|XFAIL" "$LOG" | grep -v "^=" | grep gpu/ | head -30
last=$(grep -E "^=+ .*(passed|failed|skipped|error|no tests ran).* in [0-9.]+s" "$LOG" | tail -1 |
  sed -E 's/^=+ //; s/ =+$//')
if [ "$rc" -ne 0 ]; then
  grep -E -A30 "^(_{5,} test|E )" "$LOG" | head -80
  [ -n "$last" ] || tail -20 "$LOG"
elif ! grep -q "gpu/test_gpu.py::.* PASSED" "$LOG"; then
  rc=1 # the GPU tests were all skipped: on this machine that is a failure
  grep -E "SKIPPED" "$LOG" | head
fi
summary "${last:-no pytest summary} (rc=$rc)"
exit "$rc"
