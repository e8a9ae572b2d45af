# libFuzzer harnesses built with clang -fsanitize=fuzzer,address,undefined:
# replay the seed corpora, then fuzz each harness for a bounded time (about
# two minutes in all; SHMREG_FUZZ_SECONDS per harness) on a scratch corpus seeded
# from the repository's, so the repository's corpus only changes by hand.
# A long run is the same command with a larger SHMREG_FUZZ_SECONDS (see
# docs/reliability.md).
source "$(dirname "$0")/lib.sh"
mkdir -p build
seconds=${SHMREG_FUZZ_SECONDS:-30}
# A fixed seed by default, so that what CI explores, and any failure it finds,
# can be replayed; SHMREG_FUZZ_SEED=0 lets libFuzzer pick one.
seed=${SHMREG_FUZZ_SEED:-1}
dir=build/fuzz
build_tier "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DSHMREG_SANITIZE=address,undefined -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
  -DSHMREG_WITH_CUDA=OFF -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
test_tier "$dir" -L 'fuzz|fault'

for harness in ops names remote_descriptor remote_messages fds_frame; do
  fuzzer=$dir/tests/fuzz/fuzz-$harness
  [ -x "$fuzzer" ] || { echo "70-fuzz: $fuzzer was not built (no libFuzzer?)"; exit 1; }
  scratch=$dir/corpus-$harness
  rm -rf "$scratch" && mkdir -p "$scratch"
  echo "--- fuzz-$harness for ${seconds} s"
  log=$dir/fuzz-$harness.log
  rc=0
  "$fuzzer" -seed="$seed" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/crash-$harness-" "$scratch" "tests/fuzz/corpus/$harness" >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec)' "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -40 "$log"
    echo "70-fuzz: fuzz-$harness failed; the input is in $dir/crash-$harness-*"
    exit 1
  fi
done
