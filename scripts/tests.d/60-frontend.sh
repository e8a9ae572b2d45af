# The v2 frontends, consumed as a user would: install the library to a prefix
# under build/, build examples/v2-frontend against it with find_package,
# `pip install .[fastapi]` the Python package into a venv under build/ for
# examples/python-frontend, then drive both with plain HTTP, the official
# tritonclient (HTTP and gRPC; gRPC for the C frontend only) and perf_analyzer
# from PyPI (the C frontend only). Exit 0 only if every test passed.
source "$(dirname "$0")/lib.sh"
dir=build/frontend-ci
prefix=$PWD/$dir/prefix

build_v2_frontend "$dir"
# The same frontend under ASan+UBSan: a leak, an overflow or undefined
# behaviour on any request path makes the server exit non-zero, which every
# test's teardown checks.
frontend_cmake examples/v2-frontend "$dir/app-asan" -DFRONTEND_WERROR=ON \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug -DFRONTEND_SANITIZE=address,undefined

[ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q 'tritonclient[http,grpc]' pytest perf-analyzer uvicorn httpx
# The Python frontend's shmreg, built from this checkout as a user gets it
# (tests/frontend/test_kserve_module.py uses FastAPI's TestClient: httpx).
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$dir/venv/bin/pip" install -q '.[fastapi]'

# On a glibc older than 2.38 pip resolves perf-analyzer to a placeholder with
# no executable, because every real wheel is tagged manylinux_2_38. Fetch the
# real wheel anyway, so that the test can try it and report the loader's
# exact reason instead of a guess.
if [ -x "$dir/venv/bin/perf_analyzer" ]; then
  export PERF_ANALYZER=$PWD/$dir/venv/bin/perf_analyzer
else
  wheels=$dir/perf-analyzer-wheel
  rm -rf "$wheels" && mkdir -p "$wheels"
  if "$dir/venv/bin/pip" download -q --no-deps --only-binary=:all: \
       --platform "manylinux_2_38_$(uname -m)" -d "$wheels" perf-analyzer \
     && "$dir/venv/bin/python" -m zipfile -e "$wheels"/perf_analyzer-*.whl "$wheels/x"; then
    chmod +x "$wheels/x/perf_analyzer/bin/perf_analyzer"
    export PERF_ANALYZER=$PWD/$wheels/x/perf_analyzer/bin/perf_analyzer
  else
    export PERF_ANALYZER_MISSING="pip found no perf-analyzer wheel with a perf_analyzer executable for this platform"
  fi
fi

pytest=("$dir/venv/bin/python" -m pytest -rs -p no:cacheprovider)
echo "--- release build of the C frontend, and the Python frontend"
FRONTEND_BIN=$PWD/$dir/app/shmreg-v2-frontend "${pytest[@]}" -v tests/frontend || exit 1
echo "--- ASan+UBSan build of the C frontend (perf_analyzer left to the release build)"
FRONTEND_BIN=$PWD/$dir/app-asan/shmreg-v2-frontend ASAN_OPTIONS=detect_leaks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "${pytest[@]}" -q tests/frontend --frontend c --deselect tests/frontend/test_perf_analyzer.py \
  --deselect tests/frontend/test_perf_analyzer_grpc.py \
  --deselect tests/frontend/test_kserve_module.py || exit 1
echo "--- hostile and honest clients side by side (tests/soak/hostile_frontend.py), 20 s"
FRONTEND_BIN=$PWD/$dir/app/shmreg-v2-frontend "$dir/venv/bin/python" tests/soak/hostile_frontend.py \
  --seconds 20 || exit 1
