# The v2 servers, consumed as a user would: install the library to a prefix
# under build/, build server/ against it with find_package,
# `pip install .[fastapi]` the Python package into a venv under build/ for
# python/examples/fastapi_server, then drive both with plain HTTP, the official
# tritonclient (HTTP and gRPC; gRPC for the C server only) and perf_analyzer
# from PyPI (the C server only), and KServe's own SDK clients from PyPI in a
# venv of their own (the C server only). Exit 0 only if every test passed.
source "$(dirname "$0")/lib.sh"
dir=build/server-ci
prefix=$PWD/$dir/prefix

build_server "$dir"
# The same server under ASan+UBSan: a leak, an overflow or undefined
# behaviour on any request path makes the server exit non-zero, which every
# test's teardown checks.
server_cmake server "$dir/app-asan" -DSERVER_WERROR=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug -DSERVER_SANITIZE=address,undefined

# The same server without libsystemd: it must build, and say under a
# service manager that crash survival is not compiled in
# (server/tests/crash/test_crash_survival.py).
server_cmake server "$dir/app-nosystemd" -DSERVER_WERROR=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DSERVER_WITH_SYSTEMD=OFF
export SERVER_BIN_NO_SYSTEMD=$PWD/$dir/app-nosystemd/shmreg-server

[ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q 'tritonclient[http,grpc]' pytest perf-analyzer uvicorn httpx
# The Python server's shmreg, built from this checkout as a user gets it.
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$dir/venv/bin/pip" install -q '.[fastapi]'

# On a glibc older than 2.38 (Debian 12 has 2.36) pip resolves perf-analyzer
# to a placeholder with no executable: every real perf-analyzer wheel is
# tagged manylinux_2_38. tritonclient's own wheels still carried
# perf_analyzer up to 2.48.0, built against glibc 2.34; it needs libb64
# (Debian's libb64-0d, from install-deps.sh) and CUDA 12's runtime library,
# which PyPI's nvidia-cuda-runtime-cu12 provides (no GPU or driver needed).
# A wrapper puts that library on its path only.
perf_analyzer_2_48() {
  local pa=$dir/perf-analyzer-2.48
  if [ ! -x "$pa/perf_analyzer" ]; then
    rm -rf "$pa" && mkdir -p "$pa" || return 1
    "$dir/venv/bin/pip" download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
      -d "$pa" tritonclient==2.48.0 || return 1
    "$dir/venv/bin/python" -m zipfile -e "$pa"/tritonclient-2.48.0-*.whl "$pa/x" || return 1
    "$dir/venv/bin/pip" install -q nvidia-cuda-runtime-cu12 || return 1
    local bin cudart
    bin=$(cd "$pa/x" && pwd)/tritonclient-2.48.0.data/data/bin/perf_analyzer
    cudart=$("$dir/venv/bin/python" -c \
      'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))') || return 1
    chmod +x "$bin"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
      "$cudart" "$bin" >"$pa/perf_analyzer"
    chmod +x "$pa/perf_analyzer"
  fi
  "$pa/perf_analyzer" --version >/dev/null 2>&1 && echo "$PWD/$pa/perf_analyzer"
}

if [ -x "$dir/venv/bin/perf_analyzer" ]; then
  export PERF_ANALYZER=$PWD/$dir/venv/bin/perf_analyzer
elif PERF_ANALYZER=$(perf_analyzer_2_48); then
  export PERF_ANALYZER
else
  export PERF_ANALYZER_MISSING="no perf_analyzer runs here: perf-analyzer's wheels need glibc 2.38, and tritonclient 2.48.0's perf_analyzer could not be set up (see the log above)"
fi
echo "--- perf_analyzer: ${PERF_ANALYZER:-none ($PERF_ANALYZER_MISSING)}"

pytest=("$dir/venv/bin/python" -m pytest -rs -p no:cacheprovider)
echo "--- release build of the C server, and the Python server"
SERVER_BIN=$PWD/$dir/app/shmreg-server "${pytest[@]}" -v server/tests --ignore=server/tests/parity --ignore=server/tests/remote \
  --ignore=server/tests/kserve_sdk || exit 1
echo "--- KServe's SDK clients, unmodified, against the C server (server/tests/kserve_sdk)"
# kserve pins its own FastAPI, grpcio and protobuf: a venv of its own, which
# builds nothing (the server is the one built above).
kv=$dir/kserve-venv
[ -x "$kv/bin/python" ] || python3 -m venv "$kv"
"$kv/bin/pip" install -q kserve pytest || exit 1
SERVER_BIN=$PWD/$dir/app/shmreg-server "$kv/bin/python" -m pytest -rs -p no:cacheprovider -q \
  server/tests/kserve_sdk | tee "$dir/kserve-sdk.txt"
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || exit $rc
# Skipped (kserve could not be imported) is a failure here.
! grep -qi skipped "$dir/kserve-sdk.txt" || { echo "server: KServe's SDK clients were skipped"; exit 1; }
echo "--- ASan+UBSan build of the C server (perf_analyzer left to the release build)"
SERVER_BIN=$PWD/$dir/app-asan/shmreg-server ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "${pytest[@]}" -q server/tests --ignore=server/tests/parity --ignore=server/tests/remote \
  --ignore=server/tests/kserve_sdk --server c --deselect server/tests/http/test_perf_analyzer.py \
  --deselect server/tests/grpc/test_perf_analyzer_grpc.py || exit 1
echo "--- the hostile clients' cases, the C server beside the Python one (python/tests/test_server_defences.py)"
SERVER_BIN=$PWD/$dir/app/shmreg-server "${pytest[@]}" -q python/tests/test_server_defences.py || exit 1
echo "--- hostile and honest clients side by side (server/tests/support/hostile_clients.py), 20 s"
SERVER_BIN=$PWD/$dir/app/shmreg-server "$dir/venv/bin/python" server/tests/support/hostile_clients.py \
  --seconds 20 || exit 1
