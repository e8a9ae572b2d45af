"""The Python package's copies of C tables, checked against the C they copy:
the error classes (shmreg._types) against the header's SHMREG_ERR_MAP, and
kserve.py's error-to-status table against the server's only one,
TRITON_STATUS_MAP in server/src/core/triton.h. A code added, renumbered or
given another status on one side and not the other fails here."""

import re
from pathlib import Path

import pytest

import shmreg
from shmreg import memfd_client
from shmreg._types import ERRORS

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "shmreg" / "shmreg.h"
TRITON_H = ROOT / "server" / "src" / "core" / "triton.h"


def macro_rows(path, macro, columns):
    """The X(...) rows of `#define macro(X)` in path, each split into columns."""
    text = path.read_text()
    start = text.index(f"#define {macro}(X)")
    body = []
    for line in text[start:].splitlines():
        body.append(line)
        if not line.rstrip().endswith("\\"):
            break
    rows = re.findall(r"X\(([^()]*(?:\([^()]*\)[^()]*)*)\)", "\n".join(body))
    split = [[c.strip() for c in re.split(r",\s*(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", r, columns - 1)]
             for r in rows]
    assert split and all(len(r) == columns for r in split), (macro, rows)
    return split


def library_errors():
    """{name without SHMREG_: code} of every library error."""
    return {name: int(value) for name, value, _ in macro_rows(HEADER, "SHMREG_ERR_MAP", 3)}


def triton_table():
    """{name without SHMREG_: (HTTP status, gRPC code name)} of the server's table."""
    return {name: (int(http), grpc) for name, http, grpc in
            macro_rows(TRITON_H, "TRITON_STATUS_MAP", 3)}


def test_error_classes_are_the_headers():
    errors = library_errors()
    assert len(ERRORS) == max(errors.values()) + 1
    for name, code in errors.items():
        cls = ERRORS[code]
        assert cls.code == code or (code == 0 and cls is shmreg.Error), name
        if code:
            # each class says which C code it is, first thing in its docstring
            assert cls.__doc__.startswith(f"SHMREG_{name}:"), (name, cls.__doc__)


def test_triton_table_covers_every_library_error():
    assert set(triton_table()) == set(library_errors())


@pytest.mark.parametrize("name", sorted(library_errors()))
def test_kserve_status_is_the_servers(name):
    kserve = pytest.importorskip("shmreg.kserve", reason="shmreg[fastapi] is not installed")
    code = library_errors()[name]
    if code == 0:
        pytest.skip("success is not an error")
    http, _ = triton_table()[name]
    assert kserve.http_status(ERRORS[code]("a message")) == http, name


def test_memfd_client_flags_are_the_headers():
    text = HEADER.read_text()
    for attr, macro in (("READONLY", "SHMREG_READONLY"), ("NO_PIN", "SHMREG_NO_PIN")):
        value = re.search(rf"#define {macro} (0x[0-9a-fA-F]+)u", text).group(1)
        assert getattr(memfd_client, attr) == int(value, 16), macro
