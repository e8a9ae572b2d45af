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

# build_v2_frontend DIR [frontend cmake args...]: install the library to
# DIR/prefix (a release build, -Werror) and build server/ against
# that installed package with find_package, as a user does: DIR/lib, DIR/app
# (RelWithDebInfo unless the args say otherwise). Leaves the binary at
# DIR/app/shmreg-v2-frontend. Incremental: a second call rebuilds nothing.
build_v2_frontend() {
  local dir=$1; shift
  mkdir -p "$dir"
  frontend_cmake . "$dir/lib" -DSHMREG_WERROR=ON -DBUILD_TESTING=OFF \
    -DSHMREG_BUILD_EXAMPLES=OFF -DSHMREG_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$PWD/$dir/prefix"
  rm -rf "$dir/prefix"
  cmake --install "$dir/lib" >/dev/null
  frontend_cmake server "$dir/app" -DFRONTEND_WERROR=ON \
    -DCMAKE_PREFIX_PATH="$PWD/$dir/prefix" "$@"
}

# frontend_cmake SOURCE BUILD [cmake args...]: configure (log kept beside the
# build, printed on failure) and build, RelWithDebInfo unless the args say otherwise.
frontend_cmake() {
  local src=$1 out=$2; shift 2
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$out.configure.log" 2>&1 \
    || { cat "$out.configure.log"; return 1; }
  cmake --build "$out" -j "$JOBS"
}

# setup_triton_venv VENV: a venv with a real Triton (PyPI's nvidia-pytriton
# 0.7.0 carries tritonserver 2.51.0; server/tests/parity/expected_differences.toml
# holds that version's answers), numpy for its Python-backend models, the
# official clients and pytest.
setup_triton_venv() {
  local venv=$1
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'nvidia-pytriton==0.7.0' numpy 'tritonclient[http,grpc]' pytest
}
