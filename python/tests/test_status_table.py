"""The Python package's copies of C tables, checked against the C they copy:
the extension's export of the header's SHMREG_ERR_MAP (ERROR_TABLE), the
error classes (shmreg._types) against it, and shmreg.kserve's error-to-status
table against the server's only one, the rows of the library's errors
(STATUS_LIBRARY_MAP) in server/src/common/status.h. A code added, renumbered or given another status
on one side and not the other fails here; the classes and kserve's statuses
also fail their import on it, which the planted-drift tests show."""

import re
from pathlib import Path

import pytest

import shmreg
from shmreg import _shmreg, _types, memfd_client
from shmreg._types import ERRORS

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "shmreg" / "shmreg.h"
STATUS_H = ROOT / "server" / "src" / "common" / "status.h"


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
    """{name without SHMREG_: (HTTP status, gRPC code name)} of the server's
    table, whose rows of library errors are named without SHMREG_ERR_."""
    rows = {f"ERR_{name}": (int(http), grpc) for name, http, grpc in
            macro_rows(STATUS_H, "STATUS_LIBRARY_MAP", 3)}
    rows.update({name: (int(http), grpc) for name, http, grpc in
                 macro_rows(STATUS_H, "STATUS_SERVER_MAP", 3) if name == "OK"})
    return rows


def test_error_classes_are_the_headers():
    errors = library_errors()
    assert len(ERRORS) == max(errors.values()) + 1
    for name, code in errors.items():
        cls = ERRORS[code]
        assert cls.code == code or (code == 0 and cls is shmreg.Error), name
        if code:
            # each class says which C code it is, first thing in its docstring
            assert cls.__doc__.startswith(f"SHMREG_{name}:"), (name, cls.__doc__)


def test_extension_exports_the_headers_error_table():
    rows = [(f"SHMREG_{name}", int(value), desc.strip('"'))
            for name, value, desc in macro_rows(HEADER, "SHMREG_ERR_MAP", 3)]
    assert list(_shmreg.ERROR_TABLE) == rows


def test_the_import_check_passes_on_the_table():
    _types.check_error_table(_shmreg.ERROR_TABLE)


def drifted(change):
    """ERROR_TABLE with one row changed by change(name, value, desc)."""
    rows = [list(r) for r in _shmreg.ERROR_TABLE]
    change(rows)
    return [tuple(r) for r in rows]


@pytest.mark.parametrize("what,change,says", [
    ("a code added", lambda rows: rows.append(["SHMREG_ERR_NEW", 12, "new"]),
     "SHMREG_ERR_NEW = 12 has no class"),
    ("a code renamed", lambda rows: rows[5].__setitem__(0, "SHMREG_ERR_IN_USE"),
     "SHMREG_ERR_IN_USE = 5 is raised as Busy, which is SHMREG_ERR_BUSY = 5"),
    ("two codes swapped", lambda rows: (rows[2].__setitem__(1, 3), rows[3].__setitem__(1, 2)),
     "SHMREG_ERR_NOT_FOUND = 3 is raised as AlreadyExists"),
    ("a code removed", lambda rows: rows.pop(), "the library has 11 codes, ERRORS 12 classes"),
    ("success renamed", lambda rows: rows[0].__setitem__(0, "SHMREG_SUCCESS"),
     "SHMREG_SUCCESS = 0 is not SHMREG_OK"),
])
def test_the_import_check_fails_on_drift(what, change, says):
    with pytest.raises(ImportError, match="do not match the library's error table") as info:
        _types.check_error_table(drifted(change))
    assert says in str(info.value), what


def test_kserve_fails_its_import_on_drift(monkeypatch):
    pytest.importorskip("shmreg.kserve", reason="shmreg[fastapi] is not installed")
    from shmreg.kserve import status as kserve
    assert kserve._status_by_code() == kserve._STATUS_BY_CODE
    added = drifted(lambda rows: rows.append(["SHMREG_ERR_NEW", 12, ""]))
    removed = drifted(lambda rows: rows.pop())
    monkeypatch.setattr(_shmreg, "ERROR_TABLE", added)
    with pytest.raises(ImportError, match=r"no status for \['SHMREG_ERR_NEW'\]"):
        kserve._status_by_code()
    monkeypatch.setattr(_shmreg, "ERROR_TABLE", removed)
    with pytest.raises(ImportError, match=r"a status for no error \['SHMREG_ERR_FAULT'\]"):
        kserve._status_by_code()


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
