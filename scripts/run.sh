#!/usr/bin/env bash
# The main job: build libshmreg, install it to a local prefix (build/run/prefix),
# build the KServe v2 server against that installed package, and
# start it in the foreground, serving HTTP on :8000 and gRPC on Triton's :8001.
# Ctrl-C stops it cleanly (in-flight requests finish, every region is
# unmapped).
# Arguments go to the frontend and win over these defaults, e.g.:
#   bash scripts/run.sh --port 9000 --grpc-port 9001 -v    (--grpc-port 0: HTTP only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/lib/build_server.sh
# The same chain as the CI's (library installed to build/run/prefix, the
# frontend in build/run/app), without -Werror: a newer compiler's new
# warning must not stop a user from running it.
# The build's output goes to build/run/build.log; its progress lines are
# shown as they come, and the log's end if it fails.
mkdir -p build/run
log=build/run/build.log
echo "run.sh: building libshmreg and the server in build/run (minutes the first time; log: $log)"
set +e
JOBS=$(nproc) SERVER_WERROR=OFF build_server build/run 2>&1 | tee "$log" |
  grep --line-buffered -E '^\[ *[0-9]+%\] (Built target|Linking)'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  echo "run.sh: the build failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit "$rc"
fi
echo "run.sh: built; starting the server (HTTP :8000, gRPC :8001 unless the arguments say otherwise; Ctrl-C stops it)"
# --allow-client-shm=true: the example exists to show shared memory; the
# binary, like Triton 2.73, refuses it unless told (README says why).
exec build/run/app/shmreg-v2-frontend --grpc-port 8001 --allow-client-shm=true "$@"
