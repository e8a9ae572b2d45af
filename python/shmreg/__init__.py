"""libshmreg for Python: a registry of named shared-memory regions with
counted references and zero-copy views (buffer protocol, DLPack).

    import numpy as np, shmreg
    reg = shmreg.Registry()                      # busy_policy="defer"
    reg.register_system("input0", "/client_shm", 1 << 20)
    with reg.acquire("input0", 0, 4096) as region:
        x = np.from_dlpack(region).view(np.float32)   # 1024 floats, no copy
    reg.unregister("input0")

docs/python.md has the whole API, the lifetime rule and the DLPack details.
shmreg.remote (remote regions through UCX) is a module of its own:
`from shmreg import remote`; so are the clients of a server's Unix socket,
shmreg.memfd_client (host memory) and shmreg.cuda_client (a framework's GPU
tensor: `cuda_client.register_tensor(sock, name, tensor)`).
"""

from typing import TYPE_CHECKING

from ._types import (
    AlreadyExists,
    Busy,
    Cuda,
    Error,
    Fault,
    InvalidArgument,
    NoMemory,
    NotFound,
    OutOfBounds,
    RegionStatus,
    Stats,
    System,
    Unsupported,
    WrongKind,
)

try:
    from ._shmreg import Region, Registry, __version__, cuda_available, library_version
except ModuleNotFoundError as _error:
    # A source tree where the extension is not built: shmreg.remote (ctypes
    # over libshmreg.so) still imports, as its docstring says; the
    # extension's names say why they are missing when used.
    if _error.name != f"{__name__}._shmreg":
        raise
    _extension_error = _error
    if not TYPE_CHECKING:
        _EXTENSION_NAMES = {"Region", "Registry", "__version__", "cuda_available", "library_version"}

        def __getattr__(name):
            if name in _EXTENSION_NAMES:
                raise ImportError(f"shmreg.{name} needs the compiled extension shmreg._shmreg, "
                                  f"which is not built here ({_extension_error})") from _extension_error
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AlreadyExists",
    "Busy",
    "Cuda",
    "Error",
    "Fault",
    "InvalidArgument",
    "NoMemory",
    "NotFound",
    "OutOfBounds",
    "Region",
    "RegionStatus",
    "Registry",
    "Stats",
    "System",
    "Unsupported",
    "WrongKind",
    "__version__",
    "cuda_available",
    "library_version",
]
