"""The server's one status table (server/src/common/status.h), as its
adapters read it: each row's HTTP status is what http/reply.c answers and its
gRPC code what grpc/convert.cc answers, for every row; every library error has
the row of its own name, a configured limit's refusal is OVER_LIMIT, and a
value of no row is INTERNAL on both. The rows whose codes clients test for
carry Triton's answers. Runs tests/support/status_columns.cc, built next to
$SERVER_BIN. The C server only."""
import re
import subprocess
from pathlib import Path

import grpc
import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")

ROOT = Path(__file__).resolve().parents[3]
STATUS_H = ROOT / "server" / "src" / "common" / "status.h"
SHMREG_H = ROOT / "include" / "shmreg" / "shmreg.h"


def macro_rows(path, macro):
    """The X(a, b, c) rows of `#define macro(X)` in path."""
    text = path.read_text()
    body = []
    for line in text[text.index(f"#define {macro}(X)"):].splitlines():
        body.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return re.findall(r"X\((\w+),\s*(\w+),\s*(\w+)\)", "\n".join(body))


def table():
    """{status name: (HTTP status, gRPC code name)}, the header's text."""
    rows = macro_rows(STATUS_H, "STATUS_SERVER_MAP") + macro_rows(STATUS_H, "STATUS_LIBRARY_MAP")
    return {name: (int(http), code) for name, http, code in rows}


def columns():
    out = subprocess.run([sibling_binary("shmreg-server-status-columns")], capture_output=True,
                         text=True, timeout=20, check=True).stdout
    return [line.split() for line in out.splitlines()]


def grpc_number(name):
    return grpc.StatusCode[name].value[0]


def test_each_adapter_answers_its_column(server_kind):
    answered = {f[1]: (int(f[2]), int(f[3])) for f in columns() if f[0] == "status"}
    assert answered == {name: (http, grpc_number(code)) for name, (http, code) in table().items()}


def test_every_library_error_has_the_row_of_its_name(server_kind):
    library = {f[1]: f[2] for f in columns() if f[0] == "library"}
    text = SHMREG_H.read_text()
    errors = re.findall(r"^\s*X\((\w+), \d+,", text[text.index("#define SHMREG_ERR_MAP(X)"):],
                        re.M)
    assert len(errors) >= 12
    assert sorted(library) == sorted(f"SHMREG_{e}" for e in errors)
    for error, status in library.items():
        assert status == error.removeprefix("SHMREG_").removeprefix("ERR_"), error
    library_rows = {name for name, _, _ in macro_rows(STATUS_H, "STATUS_LIBRARY_MAP")}
    assert library_rows == {e.removeprefix("ERR_") for e in errors if e != "OK"}


def test_a_configured_limit_is_over_limit_not_the_servers_memory(server_kind):
    assert [f[1] for f in columns() if f[0] == "limit"] == ["OVER_LIMIT"]
    assert table()["OVER_LIMIT"] == (429, "RESOURCE_EXHAUSTED")
    assert table()["NO_MEMORY"] == (507, "RESOURCE_EXHAUSTED")


def test_a_value_of_no_row_is_internal_on_both(server_kind):
    (unknown,) = [f for f in columns() if f[0] == "unknown"]
    assert unknown[1:] == ["500", str(grpc_number("INTERNAL")), "INTERNAL"]


# Triton's answers where clients test for them: the library errors that are
# 400 over HTTP keep their own gRPC codes (a taken name, a region in use),
# and the refusals Triton makes in its own words.
TRITON = {
    "INVALID_ARG": (400, "INVALID_ARGUMENT"),
    "ALREADY_EXISTS": (400, "ALREADY_EXISTS"),
    "BUSY": (400, "INTERNAL"),
    "OUT_OF_BOUNDS": (400, "INVALID_ARGUMENT"),
    "NOT_FOUND": (404, "NOT_FOUND"),
    "WRONG_KIND": (404, "NOT_FOUND"),
    "UNSUPPORTED": (501, "UNIMPLEMENTED"),
    "RESTRICTED": (403, "UNAVAILABLE"),
    "NOT_READY": (400, "UNAVAILABLE"),
}


@pytest.mark.parametrize("name", sorted(TRITON))
def test_tritons_answer(server_kind, name):
    assert table()[name] == TRITON[name]
