# Sourced by the tiers: configure, build and test one build directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
JOBS=${SHMREG_JOBS:-2}

# build_tier DIR [cmake args...]
build_tier() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DSHMREG_WERROR=ON "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$JOBS"
}

# test_tier DIR [ctest args...]
test_tier() {
  local dir=$1; shift
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "$@"
}

# build_server and server_cmake: the server's build chain, shared with
# scripts/run.sh and the GPU scripts.
source scripts/lib/build_server.sh

# setup_triton_venv VENV: a venv with a real Triton (PyPI's nvidia-pytriton
# 0.7.0 carries tritonserver 2.51.0; server/tests/parity/expected_differences.toml
# holds that version's answers), numpy for its Python-backend models, the
# official clients and pytest.
setup_triton_venv() {
  local venv=$1
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'nvidia-pytriton==0.7.0' numpy 'tritonclient[http,grpc]' pytest
}
