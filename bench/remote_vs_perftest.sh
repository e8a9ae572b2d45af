#!/usr/bin/env bash
# A 1 MiB read through the registry against ucx_perftest's ucp_get on the
# same transport, two processes on this host; then what a client's handshake
# costs per registration, and what a connection and a region cost the
# server's memory. docs/performance.md, "Remote regions through UCX", has
# the figures.
#
#   bash bench/remote_vs_perftest.sh [--build DIR] [--port PORT] [SIZE [ITERATIONS]]
#
# --build DIR: a CMake build folder of this repository (default build/bench);
#   shmreg-bench-remote is built (or brought up to date) there first, with
#   the UCX backend (libucx-dev, which scripts/install-deps.sh installs).
# --port PORT: the TCP port ucx_perftest's two processes meet on, and PORT+1
#   for the second transport (default: a port the kernel says is free). The
#   registry's listener takes a port of the system's choosing.
# SIZE (default 1048576 bytes) and ITERATIONS (default 2000).
#
# For each transport: ucx_perftest -t ucp_get, then shmreg-bench-remote,
# whose every iteration is shmreg_acquire + shmreg_copy_from_view of the
# whole window + shmreg_release, of UCX-allocated memory (shmreg_remote_alloc)
# and of the client's own (shmreg_remote_export), and the ratio of their
# medians and means to perftest's; then the median over 50 fresh clients of
# invite + connect + export + register. The registry's connections use
# UCX's client-server flow, which in UCX 1.13 selects network transports
# only: on the shared-memory transports only perftest's figure is printed.
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
echo "building shmreg-bench-remote in $build (log: $build.log)"
mkdir -p "$(dirname "$build")"
if ! { { [ -f "$build/CMakeCache.txt" ] ||
         cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
           -DSHMREG_BUILD_BENCH=ON -DSHMREG_WITH_UCX=ON; } &&
       cmake --build "$build" --target shmreg-bench-remote -j "$(nproc)"; } >"$build.log" 2>&1; then
  tail -n 30 "$build.log" >&2
  echo "the build failed; the whole log is $build.log" >&2
  exit 1
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
[ -n "$port" ] || port=$(free_port)
ucx=$(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -n 1)

# ucx_perftest's ucp_get of SIZE bytes over $UCX_TLS: "MEDIAN MEAN" in us.
perftest() {
  ucx_perftest -t ucp_get -s "$size" -n "$iterations" -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 1
  local line
  line=$(ucx_perftest 127.0.0.1 -t ucp_get -s "$size" -n "$iterations" -p "$port" 2>/dev/null | grep '^Final:' || true)
  wait "$server" || true
  if [ -z "$line" ]; then
    echo "ucx_perftest gave no result on port $port with UCX_TLS=$UCX_TLS (is the port free? --port PORT)" >&2
    exit 1
  fi
  # Final: iterations, latency median/average/overall (us), bandwidth average/overall (MB/s), ...
  local median average
  read -r _ _ median average _ <<<"$line"
  echo "$median $average"
}

export UCX_WARN_UNUSED_ENV_VARS=n
for tls in tcp posix,sysv,cma; do
  export UCX_TLS=$tls
  read -r pmedian pmean < <(perftest)
  echo "UCX_TLS=$tls: ucx_perftest ucp_get of $size bytes, $iterations iterations: median $pmedian us, mean $pmean us"
  port=$((port + 1))
  if [ "$tls" != tcp ]; then
    echo "UCX_TLS=$tls: no registry figure: its connections use UCX's client-server flow, which in" \
         "UCX ${ucx:-1.13} selects network transports only, so it cannot use these"
    continue
  fi
  for mode in get-alloc get; do
    out=$("$bench" "$size" "$iterations" "$mode" 50) || { echo "shmreg-bench-remote $mode failed" >&2; exit 1; }
    copy=$(grep '^remote' <<<"$out")
    echo "$copy"
    read -r rmedian rmean < <(sed -n 's/.*: median \([0-9.]*\) us, mean \([0-9.]*\) us.*/\1 \2/p' <<<"$copy")
    awk -v rm="$rmedian" -v ra="$rmean" -v pm="$pmedian" -v pa="$pmean" -v mode="$mode" 'BEGIN {
      printf "  registry (%s) / ucp_get: median %.2fx, mean %.2fx (target: within 1.1x)\n", mode, rm / pm, ra / pa }'
    grep '^handshake' <<<"$out"
  done
  "$bench" capacity 8 256
done
