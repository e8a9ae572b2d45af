#!/usr/bin/env bash
# The main job: build the library and run the example that walks one region
# through its lifecycle (register, acquire, unregister while held, release).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/run -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/run -j "$(nproc)" --target shmreg-example-lifecycle >/dev/null
exec build/run/examples/shmreg-example-lifecycle "$@"
