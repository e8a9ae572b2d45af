#!/usr/bin/env bash
# The whole test suite: every tier in scripts/tests.d, in order (gcc -Werror,
# CUDA off, sanitizers, installed-library consumers, ...). Each tier builds
# into build/<tier>. Exit status 0 only if no tier failed.
# Usage: scripts/test.sh [tier-name-substring...]
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1

export SHMREG_JOBS=${SHMREG_JOBS:-$(nproc)}
passed=0 failed=0 skipped=0 failed_names=()
for tier in scripts/tests.d/[0-9][0-9]-*.sh; do
  name=$(basename "$tier" .sh)
  if [ $# -gt 0 ]; then
    match=0
    for want in "$@"; do [[ $name == *"$want"* ]] && match=1; done
    [ $match -eq 1 ] || continue
  fi
  echo "=== tier $name"
  start=$SECONDS
  bash "$tier"
  rc=$?
  echo "=== tier $name: exit $rc after $((SECONDS - start)) s"
  case $rc in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); failed_names+=("$name") ;;
  esac
done
[ $failed -eq 0 ] || echo "failed tiers: ${failed_names[*]}"
echo "tiers: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
