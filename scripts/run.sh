#!/usr/bin/env bash
# The main job: build libshmreg, install it to a local prefix (build/run/prefix),
# build the KServe v2 server against that installed package, and
# start it in the foreground, serving HTTP on :8000 and gRPC on Triton's :8001.
# Ctrl-C stops it cleanly (in-flight requests finish, every region is
# unmapped).
# Arguments go to the server and win over these defaults, e.g.:
#   bash scripts/run.sh --port 9000 --grpc-port 9001 -v    (--grpc-port 0: HTTP only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/lib/build_server.sh
# The same chain as the CI's (library installed to build/run/prefix, the
# server in build/run/app), without -Werror: a newer compiler's new
# warning must not stop a user from running it.
JOBS=$(nproc) SERVER_WERROR=OFF build_server build/run >/dev/null
# --allow-client-shm=true: the example exists to show shared memory; the
# binary, like Triton 2.73, refuses it unless told (README says why).
exec build/run/app/shmreg-server --grpc-port 8001 --allow-client-shm=true "$@"
