# Remote regions through UCX: client and server as two processes
# on one host, over tcp on the loopback device (the library refuses the
# shared-memory transports; ctest's remote-shm-refused checks that).
#  1. the library (tests/remote, ctest label "remote"), in the gcc tier's
#     build (build/gcc, incremental; tier 10 leaves these tests to this one)
#     and in the ASan+UBSan tier's (build/asan, likewise tier 30's);
#  2. the server's remote_memory extension over HTTP and gRPC
#     (server/tests/remote), against the server of tier 60's build
#     (build/server-ci, incremental), with python/shmreg/remote.py as the
#     client, in processes of their own. Tier 60 leaves it here.
# About a minute once the builds exist.
source "$(dirname "$0")/lib.sh"
mkdir -p build
build_tier build/gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMREG_WITH_CUDA=AUTO \
  -DSHMREG_WITH_UCX=ON
test_tier build/gcc -L remote
# Again under ASan+UBSan (tier 30's build, incremental), without leak
# detection: LeakSanitizer's exit check ends in a "fatal error" once UCX's
# threads run in the process.
build_tier build/asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DSHMREG_SANITIZE=address,undefined -DSHMREG_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  test_tier build/asan -L remote

dir=build/server-ci
build_server "$dir"
[ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
"$dir/venv/bin/python" -c 'import numpy, pytest, tritonclient.grpc, tritonclient.http' 2>/dev/null \
  || "$dir/venv/bin/pip" install -q numpy pytest 'tritonclient[http,grpc]'
export SERVER_BIN=$PWD/$dir/app/shmreg-server SHMREG_LIBRARY=$PWD/$dir/prefix/lib/libshmreg.so.1
export UCT_ATTACKER=$PWD/build/gcc/tests/remote/uct_attacker  # server/tests/remote/test_transport_attack.py
echo "--- remote_memory over HTTP and gRPC"
"$dir/venv/bin/python" -m pytest -rs -q -p no:cacheprovider server/tests/remote --server c || exit 1
