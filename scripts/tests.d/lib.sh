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
