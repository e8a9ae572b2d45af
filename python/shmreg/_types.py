"""The exceptions and the status records of shmreg (pure Python).

The extension (shmreg._shmreg) raises these classes and builds these records;
they live here so that they are ordinary, picklable Python types. The error
classes are the library's error table (SHMREG_ERR_MAP in
include/shmreg/shmreg.h), one class per code: the extension checks them
against that table, name by name and value by value, when it is imported
(check_error_table). They print, and pickle, as shmreg.<name>, where users
import them from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class Error(Exception):
    """A libshmreg call failed. ``code`` is the library's error code (the
    value of its ``shmreg_err``), ``str(e)`` the library's message, which
    names the region and the cause."""

    code: int = -1
    _err_name: str  # a subclass's: the C name of its code, e.g. "SHMREG_ERR_BUSY"

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    """SHMREG_ERR_INVALID_ARG: a bad name, key, tag, flags or setting."""

    _err_name = "SHMREG_ERR_INVALID_ARG"
    code = 1


class NotFound(Error):
    """SHMREG_ERR_NOT_FOUND: no region of that name is registered (or visible to that tag)."""

    _err_name = "SHMREG_ERR_NOT_FOUND"
    code = 2


class AlreadyExists(Error):
    """SHMREG_ERR_ALREADY_EXISTS: the name is taken, or pending unregister."""

    _err_name = "SHMREG_ERR_ALREADY_EXISTS"
    code = 3


class OutOfBounds(Error):
    """SHMREG_ERR_OUT_OF_BOUNDS: offset or size outside the region or the object."""

    _err_name = "SHMREG_ERR_OUT_OF_BOUNDS"
    code = 4


class Busy(Error):
    """SHMREG_ERR_BUSY: the region is in use and the busy policy refuses."""

    _err_name = "SHMREG_ERR_BUSY"
    code = 5


class System(Error):
    """SHMREG_ERR_SYSTEM: an operating-system call failed (errno in the message)."""

    _err_name = "SHMREG_ERR_SYSTEM"
    code = 6


class Cuda(Error):
    """SHMREG_ERR_CUDA: a CUDA call failed (its error name and string in the message)."""

    _err_name = "SHMREG_ERR_CUDA"
    code = 7


class Unsupported(Error):
    """SHMREG_ERR_UNSUPPORTED: not available in this build or on this machine."""

    _err_name = "SHMREG_ERR_UNSUPPORTED"
    code = 8


class NoMemory(Error):
    """SHMREG_ERR_NO_MEMORY: out of memory, or a configured limit was reached."""

    _err_name = "SHMREG_ERR_NO_MEMORY"
    code = 9


class WrongKind(Error):
    """SHMREG_ERR_WRONG_KIND: the name is registered, but as the other kind of memory."""

    _err_name = "SHMREG_ERR_WRONG_KIND"
    code = 10


class Fault(Error):
    """SHMREG_ERR_FAULT: a guarded copy touched memory that is gone (the object was truncated)."""

    _err_name = "SHMREG_ERR_FAULT"
    code = 11


#: Index = error code; the extension raises ERRORS[code] (Error for a code it does not know).
ERRORS: tuple[type[Error], ...] = (
    Error, InvalidArgument, NotFound, AlreadyExists, OutOfBounds, Busy,
    System, Cuda, Unsupported, NoMemory, WrongKind, Fault,
)

for _cls in ERRORS:
    _cls.__module__ = "shmreg"  # "shmreg.NotFound: ..." in tracebacks, not shmreg._types
del _cls


def check_error_table(rows: Sequence[tuple[str, int, str]]) -> None:
    """Raise ImportError, naming every difference, unless ERRORS is the
    library's error table: `rows` are SHMREG_ERR_MAP's (name, value,
    description), as the extension exports them (shmreg._shmreg.ERROR_TABLE).
    Each code must have the class at its index, and that class the row's
    name and value; index 0, the row of SHMREG_OK, is Error itself."""
    problems = []
    if len(rows) != len(ERRORS):
        problems.append(f"the library has {len(rows)} codes, ERRORS {len(ERRORS)} classes")
    for name, value, _ in rows:
        cls = ERRORS[value] if 0 <= value < len(ERRORS) else None
        if cls is None:
            problems.append(f"{name} = {value} has no class")
        elif value == 0 and (cls is not Error or name != "SHMREG_OK"):
            problems.append(f"{name} = 0 is not SHMREG_OK, or ERRORS[0] is not Error")
        elif value != 0 and (getattr(cls, "_err_name", None), cls.code) != (name, value):
            problems.append(f"{name} = {value} is raised as {cls.__name__}, "
                            f"which is {getattr(cls, '_err_name', 'unnamed')} = {cls.code}")
    if problems:
        raise ImportError("shmreg's error classes (shmreg/_types.py) do not match the library's "
                          "error table (SHMREG_ERR_MAP): " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class RegionStatus:
    """One region as Registry.status lists it (shmreg_region_status)."""

    name: str
    key: str | None          # system regions: the shm key as registered; CUDA: None
    kind: str                # "system" or "cuda"
    offset: int
    byte_size: int
    device_id: int           # -1 for system regions
    in_use: int              # references callers hold now (the C field `references`)
    pending_unregister: bool  # DEFER: unregistered, waiting for in_use to reach 0
    generation: int          # unique per registration in its registry
    pinned: bool             # a system region page-locked for DMA
    readonly: bool           # registered read-only
    flags: int               # the SHMREG_* flags it was registered with
    tag: str | None          # owner tag, or None


@dataclass(frozen=True, slots=True)
class Stats:
    """Counters of a whole registry (shmreg_stats), from Registry.stats()."""

    regions: int           # listed by status: registered or pending
    pending_regions: int   # of those, DEFER-unregistered and still referenced
    detached_regions: int  # DETACH-unregistered (or destroyed), still mapped for references
    references: int        # references callers hold on listed regions
    mapped_regions: int    # every region still mapped: listed + detached
    mapped_bytes: int      # what max_mapped_bytes counts
    pinned_bytes: int      # what max_pinned_bytes counts
    registrations: int     # successful registrations since the registry was made
    refusals: int          # registrations refused for any reason since then
    # Since 1.1.
    reclaim_waiting_bytes: int  # released regions' bytes the reclaim thread has yet to
                                # unmap; still in mapped_bytes
    cached_bytes: int      # bytes of mappings the cache keeps, no region on them
    cached_mappings: int   # how many such mappings
    cache_hits: int        # registrations that reused a cached or live mapping
    cache_misses: int      # registrations of a cacheable source that mapped anew
    cache_evictions: int   # cached mappings unmapped (limit, room, trim)
