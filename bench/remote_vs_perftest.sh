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
# --port PORT: the TCP port ucx_perftest's two processes meet on, and the
#   ports after it for its later runs (default: for each run, a port the
#   kernel says is free). The registry's listener takes one of the system's
#   choosing.
# SIZE (default 1048576 bytes) and ITERATIONS (default 2000).
#
# ucx_perftest -t ucp_get and -t ucp_am_lat (one active message of SIZE
# bytes one way: the registry's own data path, its floor) over tcp on the
# loopback device, then shmreg-bench-remote, whose every iteration is
# shmreg_acquire + shmreg_copy_from_view of the whole window +
# shmreg_release, of UCX-allocated memory (shmreg_remote_alloc) and of the
# client's own (shmreg_remote_export), and the ratios of its median and
# mean to perftest's; then the median over 50 fresh clients of invite +
# connect + export + register. The registry opens tcp on the loopback
# device only (tcp_device "lo"), and never the shared-memory transports
# (docs/security.md), so perftest runs on tcp over lo too.
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

# A port nothing holds, not even a closed connection in TIME-WAIT (a
# busy host has thousands): bound on every address, as perftest binds.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])'
}

# ucx_perftest's test $1 of SIZE bytes over tcp on lo, into $median and $mean
# (us). On --port's port and the ones after it, else on a free port, with
# two more tries where another program took it before perftest bound it.
perftest() {
  local line=
  for _ in 1 2 3; do
    local p=${port:-$(free_port)}
    ucx_perftest -t "$1" -s "$size" -n "$iterations" -p "$p" >/dev/null 2>&1 &
    local server=$!
    sleep 1
    line=$(ucx_perftest 127.0.0.1 -t "$1" -s "$size" -n "$iterations" -p "$p" 2>/dev/null | grep '^Final:' || true)
    wait "$server" || true
    if [ -n "$port" ]; then
      port=$((port + 1))
      break
    fi
    [ -z "$line" ] || break
  done
  if [ -z "$line" ]; then
    echo "ucx_perftest $1 gave no result on port $p over tcp on lo (is the port free? --port PORT)" >&2
    exit 1
  fi
  # Final: iterations, latency median/average/overall (us), bandwidth average/overall (MB/s), ...
  read -r _ _ median mean _ <<<"$line"
}

export UCX_WARN_UNUSED_ENV_VARS=n UCX_TLS=tcp UCX_NET_DEVICES=lo
perftest ucp_get
pmedian=$median pmean=$mean
echo "tcp on lo: ucx_perftest ucp_get of $size bytes, $iterations iterations: median $pmedian us, mean $pmean us"
perftest ucp_am_lat
amedian=$median amean=$mean
echo "tcp on lo: ucx_perftest ucp_am_lat of $size bytes (one way), $iterations iterations: median $amedian us, mean $amean us"
for mode in get-alloc get; do
  out=$("$bench" "$size" "$iterations" "$mode" 50) || { echo "shmreg-bench-remote $mode failed" >&2; exit 1; }
  copy=$(grep '^remote' <<<"$out")
  echo "$copy"
  read -r rmedian rmean < <(sed -n 's/.*: median \([0-9.]*\) us, mean \([0-9.]*\) us.*/\1 \2/p' <<<"$copy")
  awk -v rm="$rmedian" -v ra="$rmean" -v pm="$pmedian" -v pa="$pmean" -v am="$amedian" -v aa="$amean" \
      -v mode="$mode" 'BEGIN {
    printf "  registry (%s) / ucp_get: median %.2fx, mean %.2fx (target: within 1.1x); / ucp_am_lat: median %.2fx, mean %.2fx\n",
           mode, rm / pm, ra / pa, rm / am, ra / aa }'
  grep '^handshake' <<<"$out"
done
"$bench" capacity 8 256
