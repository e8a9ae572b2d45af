"""libshmreg for Python: a registry of named shared-memory regions with
counted references and zero-copy views (buffer protocol, DLPack).

    import numpy as np, shmreg
    reg = shmreg.Registry()                      # busy_policy="defer"
    reg.register_system("input0", "/client_shm", 1 << 20)
    with reg.acquire("input0", 0, 4096) as region:
        x = np.from_dlpack(region).view(np.float32)   # 1024 floats, no copy
    reg.unregister("input0")

docs/python.md has the whole API, the lifetime rule and the DLPack details.
"""

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
from ._shmreg import Region, Registry, __version__, cuda_available, library_version

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
