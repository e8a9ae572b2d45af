# The Python package as a user gets it: a fresh venv under build/, a fresh
# `pip install .` of the repository root (scikit-build-core and nanobind from
# PyPI in pip's isolated build environment, the library built by the
# repository's CMake build), then the suite in tests/python with pytest, mypy
# installed so that test_typing.py checks the shipped stub.
# pytest's exit 5 (no tests collected) fails the tier like any other non-zero.
source "$(dirname "$0")/lib.sh"
dir=build/python-ci
rm -rf "$dir"
mkdir -p "$dir"
python3 -m venv "$dir/venv"
py=$dir/venv/bin/python
"$py" -m pip install -q --upgrade pip
# The build runs in pip's temporary directory, so nothing of an earlier build
# is reused; CMAKE_BUILD_PARALLEL_LEVEL gives it the tier's cores. Warnings,
# the extension's included, are errors here as in the gcc tier.
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$py" -m pip install -q \
  --config-settings=cmake.define.SHMREG_WERROR=ON . || exit 1
# fastapi, httpx and prometheus_client: tests/python/test_kserve_module.py drives the routers
# through FastAPI's TestClient.
"$py" -m pip install -q pytest 'numpy>=1.25' mypy 'fastapi>=0.118' httpx prometheus_client || exit 1
# Run from outside the checkout, so that `import shmreg` can only mean the
# installed package.
tests=$PWD/tests/python
(cd "$dir" && "$PWD/venv/bin/python" -m pytest -p no:cacheprovider -rs -q "$tests")
rc=$?
[ $rc -eq 5 ] && echo "python: pytest collected no tests"
[ $rc -eq 0 ] || exit $rc
# The Python bench runs for a moment so that it cannot rot; no figure is judged.
"$py" bench/python/bench_acquire.py --seconds 0.02 --repeat 2 >"$dir/bench.txt" \
  || { cat "$dir/bench.txt"; exit 1; }
grep -q '^| np.from_dlpack(region) |' "$dir/bench.txt" || { echo "python: bench output incomplete"; exit 1; }
