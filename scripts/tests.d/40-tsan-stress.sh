# ThreadSanitizer over the concurrency tests (label "stress").
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/tsan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DSHMREG_SANITIZE=thread -DSHMREG_BUILD_BENCH=OFF -DSHMREG_WITH_CUDA=OFF
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
  test_tier build/tsan -L stress
