# gcc, -Werror, CUDA backends if the toolkit is here (they report UNSUPPORTED
# without a GPU), the whole ctest suite.
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=AUTO \
  -DSHMREG_WITH_UCX=ON
test_tier build/gcc -LE remote  # tier 63-remote runs those
