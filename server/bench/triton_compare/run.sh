#!/usr/bin/env bash
# Triton's shared-memory endpoints against the server's (server/), in one run
# (compare.py says what it measures). Builds the server as the CI tiers do
# and the venv of tier 62-triton-parity (nvidia-pytriton 0.7.0 = Triton 2.51),
# then passes its arguments to compare.py (--regions, --seconds, --repeat).
source "$(dirname "$0")/../../../scripts/tests.d/lib.sh"
server=build/server-ci
venv=build/triton-parity/venv
build_server "$server" >/dev/null
setup_triton_venv "$venv"
"$venv/bin/python" server/bench/triton_compare/compare.py --server "$server/app/shmreg-server" "$@"
