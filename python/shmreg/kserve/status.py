"""The HTTP status of every library error, and the error of a request that
cannot be served (``InferError``), with the body every error is sent in."""
from __future__ import annotations

import functools
from typing import Any, Callable

from fastapi.responses import JSONResponse

import shmreg
from shmreg import _shmreg

# The table of server/src/common/status.h (python/tests/test_status_table.py
# checks this copy against it): Triton's statuses where Triton has one,
# since clients test for them. By the library's names of its errors, each of
# which must be here and nothing else: checked against the library's error
# table (shmreg._shmreg.ERROR_TABLE) at import. A code the table does not
# know answers 500.
_STATUS_BY_ERROR = {
    "SHMREG_ERR_INVALID_ARG": 400, "SHMREG_ERR_NOT_FOUND": 404, "SHMREG_ERR_ALREADY_EXISTS": 400,
    "SHMREG_ERR_OUT_OF_BOUNDS": 400, "SHMREG_ERR_BUSY": 400, "SHMREG_ERR_SYSTEM": 500,
    "SHMREG_ERR_CUDA": 500, "SHMREG_ERR_UNSUPPORTED": 501, "SHMREG_ERR_NO_MEMORY": 507,
    "SHMREG_ERR_WRONG_KIND": 404,  # the name is not one of this endpoint's kind
    "SHMREG_ERR_FAULT": 400,  # the client truncated its own object under the mapping
}


def _status_by_code() -> dict[int, int]:
    errors = {name: value for name, value, _ in _shmreg.ERROR_TABLE if value != 0}
    if set(errors) != set(_STATUS_BY_ERROR):
        raise ImportError(
            "shmreg.kserve's HTTP statuses do not match the library's error table (SHMREG_ERR_MAP): "
            f"no status for {sorted(set(errors) - set(_STATUS_BY_ERROR))}, "
            f"a status for no error {sorted(set(_STATUS_BY_ERROR) - set(errors))}")
    return {value: _STATUS_BY_ERROR[name] for name, value in errors.items()}


_STATUS_BY_CODE = _status_by_code()


def http_status(err: shmreg.Error) -> int:
    """The HTTP status of a library error: 400, 404, 500, 501 or 507."""
    return _STATUS_BY_CODE.get(err.code, 500)


def error_response(status: int, message: str) -> JSONResponse:
    """Every error body is ``{"error": message}``, as Triton sends them."""
    return JSONResponse({"error": message}, status_code=status)

class InferError(Exception):
    """A request that cannot be served: its HTTP status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message

    @classmethod
    def from_shmreg(cls, err: shmreg.Error) -> "InferError":
        return cls(http_status(err), str(err))

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message)


def _clean_errors(fn: Callable) -> Callable:
    """Raise a function's InferError afresh from the function itself. The
    original's traceback holds the frames of the parsing below, whose locals
    hold numpy views of regions, and every such view holds a reference: a
    caller keeping the exception (a log, a test) would keep the regions in
    use after the request. The fresh one is raised outside the except block,
    so the original and its frames are freed first."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InferError as e:
            error = InferError(e.status, e.message)
        # This frame stays in the new traceback: it must hold neither the
        # request (args) nor the error itself (a cycle only gc would free,
        # with every frame the error later passes through).
        del args, kwargs
        try:
            raise error
        finally:
            del error

    return wrapper
