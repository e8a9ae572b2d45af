# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included) over
# the whole suite.
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DSHMREG_SANITIZE=address,undefined -DSHMREG_BUILD_BENCH=OFF
# The remote tests run in tier 63, under this build too but without leak
# detection (UCX's threads make LeakSanitizer's exit check fail).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 test_tier build/asan -LE remote
