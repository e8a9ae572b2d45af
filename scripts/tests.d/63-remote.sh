# Remote regions through UCX (issue 20): client and server as two processes
# on one host, over tcp and over the shared-memory transports (ctest label
# "remote": tests/remote), then the server's remote_memory extension over
# HTTP when server/tests has its test. The library is the gcc tier's build
# (build/gcc, incremental), with UCX required; tier 10 leaves these tests to
# this one. Short: about half a minute.
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=AUTO \
  -DSHMREG_WITH_UCX=ON
test_tier build/gcc -L remote
