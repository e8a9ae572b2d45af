#!/usr/bin/env bash
# The whole test suite: every tier in scripts/tests.d, in order (gcc -Werror,
# CUDA off, sanitizers, installed-library consumers, ...). Each tier builds
# into build/<tier> and logs to build/tier-logs/<tier>.log. Exit status 0 only
# if no tier failed; a failed tier's last lines are printed again at the end,
# where a CI that keeps only the tail of the output still shows them.
# Usage: scripts/test.sh [tier-name-substring...]
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1

export SHMREG_JOBS=${SHMREG_JOBS:-$(nproc)}
logs=build/tier-logs
mkdir -p "$logs"
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
  # Not a pipe into tee: a server a tier leaves behind would hold the pipe
  # open and the loop would wait for it. tee gets 5 s after the tier to
  # write its last lines.
  exec {log_fd}> >(tee "$logs/$name.log")
  tee_pid=$!
  bash "$tier" >&"$log_fd" 2>&1
  rc=$?
  exec {log_fd}>&-
  for _ in $(seq 50); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.1; done
  echo "=== tier $name: exit $rc after $((SECONDS - start)) s"
  case $rc in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); failed_names+=("$name") ;;
  esac
done
for name in "${failed_names[@]}"; do
  echo "=== the last 80 lines of tier $name ($logs/$name.log)"
  tail -n 80 "$logs/$name.log"
done
[ $failed -eq 0 ] || echo "failed tiers: ${failed_names[*]}"
echo "tiers: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
