#!/usr/bin/env bash
# One run, one transport at a time: ucx_perftest's ucp_get of SIZE bytes
# (two processes on this host), then the same read through the registry
# (shmreg-bench-remote: acquire + shmreg_copy_from_view + release), of
# UCX-allocated memory as perftest's is, and of the client's own memory.
# docs/performance.md, "Remote regions", has the figures and this command:
#   bash bench/remote_vs_perftest.sh BUILD_DIR [SIZE [ITERATIONS]]
set -euo pipefail
bench=${1:?usage: $0 BUILD_DIR [SIZE [ITERATIONS]]}/bench/shmreg-bench-remote
size=${2:-1048576}
iterations=${3:-2000}
port=$((20000 + RANDOM % 20000))
for tls in posix,sysv,cma tcp; do
  export UCX_TLS=$tls
  ucx_perftest -t ucp_get -s "$size" -n "$iterations" -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 1
  line=$(ucx_perftest 127.0.0.1 -t ucp_get -s "$size" -n "$iterations" -p "$port" 2>/dev/null | grep '^Final:')
  wait "$server" || true
  # Final: iterations, latency median/average/overall (us), bandwidth average/overall (MB/s), ...
  read -r _ _ median average _ <<<"$line"
  echo "ucx_perftest ucp_get of $size bytes, UCX_TLS=$tls, $iterations iterations: median $median us, mean $average us"
  for mode in get-alloc get; do
    "$bench" "$size" "$iterations" "$mode" 2>/dev/null | grep '^remote'
  done
  port=$((port + 1))
done
