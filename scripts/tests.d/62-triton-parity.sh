# Parity with Triton, measured: a real tritonserver 2.51 (from PyPI's
# nvidia-pytriton 0.7.0 wheel, with Python-backend models that the tests
# write) and the server (release build, as tier 60 builds it) get
# the same requests, valid and invalid, over HTTP and gRPC
# (server/tests/parity/cases.py); their status codes and messages must be
# equal except where server/tests/parity/expected_differences.toml lists
# the case with both answers and a reason. Exit 77 only when the Triton
# binary cannot run on this machine at all.
source "$(dirname "$0")/lib.sh"
server=build/server-ci   # shared with tier 60: built once when both run
venv=build/triton-parity/venv

build_server "$server"
setup_triton_venv "$venv"

rc=0
"$venv/bin/python" server/tests/parity/triton_process.py --check || rc=$?
[ $rc -eq 0 ] || exit $rc

SERVER_BIN=$PWD/$server/app/shmreg-server \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q server/tests/parity
