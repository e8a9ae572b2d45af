#!/usr/bin/env bash
# One run, one transport at a time: ucx_perftest's ucp_get of SIZE bytes
# (two processes on this host), then the same read through the registry
# (shmreg-bench-remote: acquire + shmreg_copy_from_view + release), of
# UCX-allocated memory as perftest's is, and of the client's own memory.
# docs/performance.md, "Remote regions through UCX", has the figures.
#
#   bash bench/remote_vs_perftest.sh [--build DIR] [--port PORT] [SIZE [ITERATIONS]]
#
# --build DIR: a CMake build folder of this repository (default build/bench);
#   shmreg-bench-remote is built there first if it is not there yet, with the
#   UCX backend (libucx-dev, which scripts/install-deps.sh installs).
# --port PORT: the TCP port ucx_perftest's two processes meet on, and PORT+1
#   for the second transport (default: a port the kernel says is free).
# SIZE (default 1048576 bytes) and ITERATIONS (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: $0 [--build DIR] [--port PORT] [SIZE [ITERATIONS]]"
build=build/bench
port=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=${2:?$usage}; shift 2 ;;
    --port) port=${2:?$usage}; shift 2 ;;
    -h | --help) echo "$usage"; exit 0 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
# An older form took the build folder as the first argument.
if [ $# -gt 0 ] && [ -d "$1" ]; then build=$1; shift; fi
size=${1:-1048576}
iterations=${2:-2000}
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (Debian: ucx-utils)" >&2; exit 1; }

bench=$build/bench/shmreg-bench-remote
if [ ! -x "$bench" ]; then
  echo "building shmreg-bench-remote in $build (log: $build.log)"
  mkdir -p "$(dirname "$build")"
  if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
           -DSHMREG_BUILD_BENCH=ON -DSHMREG_WITH_UCX=ON &&
         cmake --build "$build" --target shmreg-bench-remote -j "$(nproc)"; } >"$build.log" 2>&1; then
    tail -n 30 "$build.log" >&2
    echo "the build failed; the whole log is $build.log" >&2
    exit 1
  fi
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
[ -n "$port" ] || port=$(free_port)

for tls in posix,sysv,cma tcp; do
  export UCX_TLS=$tls
  ucx_perftest -t ucp_get -s "$size" -n "$iterations" -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 1
  line=$(ucx_perftest 127.0.0.1 -t ucp_get -s "$size" -n "$iterations" -p "$port" 2>/dev/null | grep '^Final:' || true)
  wait "$server" || true
  if [ -z "$line" ]; then
    echo "ucx_perftest gave no result on port $port with UCX_TLS=$tls (is the port free? --port PORT)" >&2
    exit 1
  fi
  # Final: iterations, latency median/average/overall (us), bandwidth average/overall (MB/s), ...
  read -r _ _ median average _ <<<"$line"
  echo "ucx_perftest ucp_get of $size bytes, UCX_TLS=$tls, $iterations iterations: median $median us, mean $average us"
  for mode in get-alloc get; do
    "$bench" "$size" "$iterations" "$mode" 2>/dev/null | grep '^remote'
  done
  port=$((port + 1))
done
