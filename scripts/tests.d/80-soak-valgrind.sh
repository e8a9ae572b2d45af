# valgrind memcheck, zero errors and zero leaks (definite, indirect or
# possible): the concurrency soak for a short run, the failure-injection test
# (every failure path), and the fuzz corpora. ThreadSanitizer runs the soak in
# 40-tsan-stress (ctest label "stress"). tests/soak/valgrind.supp says what is
# suppressed and why (only liburcu's own worker thread).
source "$(dirname "$0")/lib.sh"
mkdir -p build
dir=build/valgrind
build_tier "$dir" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=OFF \
  -DSHMREG_BUILD_BENCH=OFF -DSHMREG_BUILD_EXAMPLES=OFF

memcheck() {
  echo "--- memcheck $*"
  valgrind --tool=memcheck --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions=tests/soak/valgrind.supp "$@"
}
memcheck "$dir/tests/soak/shmreg-soak" -t 3 -s 1
memcheck "$dir/tests/registry/unit-fault-injection"
memcheck "$dir/tests/fuzz/fuzz-ops-replay"
memcheck "$dir/tests/fuzz/fuzz-names-replay"
