#!/usr/bin/env bash
# The main job: build libshmreg, install it to a local prefix (build/run/prefix),
# build the KServe v2 frontend example against that installed package, and
# start it in the foreground, serving HTTP on :8000 and gRPC on Triton's :8001.
# Ctrl-C stops it cleanly (in-flight requests finish, every region is
# unmapped).
# Arguments go to the frontend and win over these defaults, e.g.:
#   bash scripts/run.sh --port 9000 --grpc-port 9001 -v    (--grpc-port 0: HTTP only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)
prefix=$PWD/build/run/prefix
cmake -S . -B build/run/lib -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF \
  -DSHMREG_BUILD_EXAMPLES=OFF -DSHMREG_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build/run/lib -j "$jobs" >/dev/null
cmake --install build/run/lib >/dev/null
cmake -S server -B build/run/frontend -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/run/frontend -j "$jobs" >/dev/null
# --allow-client-shm=true: the example exists to show shared memory; the
# binary, like Triton 2.73, refuses it unless told (README says why).
exec build/run/frontend/shmreg-v2-frontend --grpc-port 8001 --allow-client-shm=true "$@"
