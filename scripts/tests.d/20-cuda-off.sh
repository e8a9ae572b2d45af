# The build without CUDA and without UCX: the stub backends, same exported
# functions; remote calls answer UNSUPPORTED (remote-descriptor checks it).
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/nocuda -DCMAKE_C_COMPILER=gcc -DSHMREG_WITH_CUDA=OFF -DSHMREG_WITH_UCX=OFF -DSHMREG_BUILD_BENCH=OFF
test_tier build/nocuda
