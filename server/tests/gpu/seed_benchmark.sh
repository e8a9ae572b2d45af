#!/usr/bin/env bash
# The seed benchmark (server/bench/gpu/seed_benchmark.py) with the
# server that server/tests/gpu/run.sh built in $SERVER_GPU_BUILD
# (default build/server-gpu), which calls this script last; run alone, it
# needs that build to be there.
#
# Carried (ignored) folders, from the repository root:
#   .carry/debs  the Debian packages of docs/cuda.md "Testing on the GPU
#                machine"; the server's loader finds them under
#                $SERVER_GPU_BUILD/debs, where run.sh unpacked them
#   .whl         the wheels listed in seed_benchmark.py's header
#                (perf_analyzer, tritonclient...), installed into /tmp/site
#                (scripts/lib/carry.sh) unless run.sh already put them on
#                PYTHONPATH
# Usage: bash server/tests/gpu/seed_benchmark.sh
# Environment: OUT (default build/gpu-out: seed-benchmark.csv, .md and the
# runs' logs), BENCH_QUICK=1 and the other BENCH_* of seed_benchmark.py.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export OUT=${OUT:-build/gpu-out}
BUILD=$(realpath -m "${SERVER_GPU_BUILD:-build/server-gpu}")
SITE=${PYTHON_SITE:-/tmp/site}
mkdir -p "$OUT"
source scripts/lib/carry.sh # install_carried_wheels

if [ ! -x "$SITE/perf_analyzer/bin/perf_analyzer" ] && [ -z "${PERF_ANALYZER:-}" ]; then
  echo "=== seed-benchmark: installing the carried wheels into $SITE"
  install_carried_wheels "$SITE" || echo "=== seed-benchmark: no wheels: the bench needs PERF_ANALYZER"
fi
if [ ! -x "$BUILD/app/shmreg-server" ]; then
  echo "=== seed-benchmark summary: no server built in $BUILD: run server/tests/gpu/run.sh"
  exit 1
fi
# The carried libraries for the server, as for the tests.
export LD_LIBRARY_PATH=$BUILD/debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "=== seed-benchmark: server/bench/gpu/seed_benchmark.py (BENCH_QUICK=${BENCH_QUICK:-0})"
SERVER_BIN=$BUILD/app/shmreg-server PYTHONDONTWRITEBYTECODE=1 \
  timeout "${SEED_BENCH_TIMEOUT_S:-420}" python3 server/bench/gpu/seed_benchmark.py
rc=$?
echo "=== seed-benchmark summary: rc=$rc (CSV: $OUT/seed-benchmark.csv; draw it with" \
  "python3 server/bench/gpu/plot_seed_benchmark.py $OUT/seed-benchmark.csv)"
exit "$rc"
