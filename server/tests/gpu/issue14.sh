#!/usr/bin/env bash
# Issue 14 on the GPU machine, in one call: the frontend's GPU tests
# (server/tests/gpu/run.sh: builds the library and the frontend with CUDA,
# runs test_cuda_infer.py and test_gpu_model.py), then seed 003's benchmark
# (bench_seed.py) with the frontend just built.
#
# Carried (ignored) folders, from the repository root:
#   .carry/debs  the Debian packages of docs/cuda.md "Testing on the GPU
#                machine" (libmicrohttpd, json-c, liburcu, xxhash, pkgconf...)
#   .whl         the wheels listed in bench_seed.py's header (perf_analyzer,
#                tritonclient and its dependencies), installed here with
#                pip --no-index --no-deps into /tmp/site
# Usage: SHMREG_CARRY=.carry bash server/tests/gpu/issue14.sh
# Environment: OUT (logs, default build/gpu-out), BENCH_* (bench_seed.py),
# SKIP_TESTS=1 or SKIP_BENCH=1 to run only one half.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-build/gpu-out}
export FRONTEND_GPU_BUILD=${FRONTEND_GPU_BUILD:-build/frontend-gpu}
SITE=${PYTHON_SITE:-/tmp/site}
mkdir -p "$OUT"

if ls .whl/*.whl >/dev/null 2>&1; then
  echo "=== issue14: installing $(ls .whl/*.whl | wc -l) carried wheels into $SITE"
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl \
    >"$OUT/pip.log" 2>&1 || { tail -20 "$OUT/pip.log"; echo "pip install failed"; }
  chmod +x "$SITE"/perf_analyzer/bin/perf_analyzer 2>/dev/null
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
else
  echo "=== issue14: no .whl/*.whl: tritonclient tests skip, the bench needs PERF_ANALYZER"
fi

tests_rc=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  bash server/tests/gpu/run.sh
  tests_rc=$?
fi
# The same carried libraries for the bench's frontend as for the tests'.
export LD_LIBRARY_PATH=$PWD/$FRONTEND_GPU_BUILD/debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bench_rc=0
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  if [ ! -x "$FRONTEND_GPU_BUILD/app/shmreg-v2-frontend" ]; then
    echo "=== issue14: no frontend built in $FRONTEND_GPU_BUILD: run the tests half first"
    bench_rc=1
  else
    echo "=== issue14: seed 003's benchmark"
    FRONTEND_BIN=$PWD/$FRONTEND_GPU_BUILD/app/shmreg-v2-frontend PYTHONDONTWRITEBYTECODE=1 \
      timeout 420 python3 server/bench/gpu/bench_seed.py
    bench_rc=$?
  fi
fi
echo "=== issue14 summary: frontend-gpu tests rc=$tests_rc, bench rc=$bench_rc (logs in $OUT)"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
