# The build without CUDA: the stub backend, same exported functions.
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/nocuda -DCMAKE_C_COMPILER=gcc -DSHMREG_WITH_CUDA=OFF -DSHMREG_BUILD_BENCH=OFF
test_tier build/nocuda
