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

# run_fuzzer NAME FUZZER CORPUS [RUNS]: fuzz for $seconds on a scratch corpus
# seeded from CORPUS; with RUNS, for that many inputs instead (what a run
# explores then depends on the seed alone, not on the machine's speed), time
# bounded at four times $seconds.
run_fuzzer() {
  local harness=$1 fuzzer=$2 corpus=$3 runs=${4:-}
  local bound=(-max_total_time="$seconds")
  [ -z "$runs" ] || bound=(-runs="$runs" -max_total_time=$((4 * seconds)))
  [ -x "$fuzzer" ] || { echo "70-fuzz: $fuzzer was not built (no libFuzzer?)"; exit 1; }
  local scratch=$dir/corpus-$harness
  rm -rf "$scratch" && mkdir -p "$scratch"
  echo "--- fuzz-$harness for ${runs:+$runs inputs, at most }$((${runs:+4 * }seconds)) s"
  local log=$dir/fuzz-$harness.log
  local rc=0
  "$fuzzer" -seed="$seed" "${bound[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/crash-$harness-" "$scratch" "$corpus" >"$log" 2>&1 || rc=$?
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec)' "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -40 "$log"
    echo "70-fuzz: fuzz-$harness failed; the input is in $dir/crash-$harness-*"
    exit 1
  fi
}

for harness in ops names remote_descriptor remote_messages fds_frame; do
  run_fuzzer "$harness" "$dir/tests/fuzz/fuzz-$harness" "tests/fuzz/corpus/$harness"
done

# The server's JSON reader against the reading it replaced, kept as the
# reference (server/tests/fuzz): a project of its own, since it needs json-c
# and RapidJSON rather than the library.
cmake -S server/tests/fuzz -B "$dir/server-json" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ >/dev/null || exit 1
cmake --build "$dir/server-json" -j "$JOBS" || exit 1
# By count: a differential target finds the reading's deliberate
# differences anew as it explores, and CI must explore the same inputs each
# time (a long run: SHMREG_FUZZ_JSON_RUNS, or the harness by hand).
run_fuzzer json_reader "$dir/server-json/fuzz-json_reader" server/tests/fuzz/corpus/json_reader \
  "${SHMREG_FUZZ_JSON_RUNS:-300000}"
