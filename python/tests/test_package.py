"""The package itself: version, exports, typing files, the error classes."""

import importlib.resources
import os
import re
from pathlib import Path

import pytest

import shmreg

HEADER = Path(__file__).resolve().parents[2] / "include" / "shmreg" / "shmreg.h"


def test_version_is_the_headers():
    text = HEADER.read_text()
    parts = [re.search(rf"#define SHMREG_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert shmreg.__version__ == ".".join(parts)
    assert shmreg.library_version() == shmreg.__version__
    from importlib.metadata import version
    assert version("shmreg") == shmreg.__version__


def test_exports():
    for name in shmreg.__all__:
        assert hasattr(shmreg, name), name


def test_typing_files_are_shipped():
    files = importlib.resources.files("shmreg")
    assert files.joinpath("py.typed").is_file()
    stub = files.joinpath("_shmreg.pyi").read_text()
    assert "class Registry" in stub
    assert ("def acquire(self, name: str, offset: int, byte_size: int, *, tag: str | None = None)"
            " -> Region") in stub
    assert "def register_system_fd(self, name: str, fd: int, byte_size: int, offset: int = 0" in stub
    assert "def read_into(self, buffer: Buffer, offset: int = 0) -> None" in stub
    assert "def __dlpack__" in stub
    assert "def send_cuda_region(sock: int, name: str, ptr: int, byte_size: int, readonly: bool = False) -> None" in stub


def test_stub_imports_only_declared_packages():
    # What the stub imports must be the standard library, shmreg, or a
    # declared dependency (a type checker resolves them all).
    import sys
    from importlib.metadata import requires
    stub = importlib.resources.files("shmreg").joinpath("_shmreg.pyi").read_text()
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", stub, re.M))
    declared = {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0].replace("-", "_").lower()
                for r in requires("shmreg") or [] if "extra ==" not in r}
    for module in imported:
        top = module.split(".")[0]
        assert top in sys.stdlib_module_names or top == "shmreg" or top.lower() in declared, module
    assert "typing_extensions" in declared  # the stub's Buffer and CapsuleType


def test_metadata_is_complete():
    from importlib.metadata import metadata
    meta = metadata("shmreg")
    assert meta["Author"] or meta["Author-email"], "no author"
    assert "Apache-2.0" in (meta["License"] or "") + (meta.get("License-Expression") or "")
    assert meta["Summary"] and meta["Requires-Python"]
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "# shmreg for Python" in (meta.get_payload() or meta["Description"] or "")


@pytest.mark.skipif(os.environ.get("SHMREG_EXPECT_REPAIRED_WHEEL") != "1",
                    reason="the package was not installed from an auditwheel-repaired wheel")
def test_repaired_wheel_carries_liburcu():
    # auditwheel repair grafts liburcu into shmreg.libs/, so the package
    # imports where the system has none: the liburcu this process loaded
    # must be the package's copy.
    pkg_root = Path(shmreg.__file__).resolve().parent.parent
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "liburcu" in line}
    assert loaded, "no liburcu mapped"
    for path in loaded:
        assert Path(path).resolve().parent == pkg_root / "shmreg.libs", path


def test_library_is_in_the_package():
    pkg = Path(shmreg.__file__).parent
    libs = [p.name for p in pkg.iterdir() if p.name.startswith("libshmreg.so")]
    assert len(libs) == 1 and re.fullmatch(r"libshmreg\.so\.\d+", libs[0]), libs
    assert not (pkg / libs[0]).is_symlink()


def test_cuda_available_is_a_bool():
    # True on the GPU machine, False here; it must answer, not raise.
    assert shmreg.cuda_available() in (True, False)


ERROR_CODES = {
    shmreg.InvalidArgument: 1, shmreg.NotFound: 2, shmreg.AlreadyExists: 3, shmreg.OutOfBounds: 4,
    shmreg.Busy: 5, shmreg.System: 6, shmreg.Cuda: 7, shmreg.Unsupported: 8, shmreg.NoMemory: 9,
    shmreg.WrongKind: 10, shmreg.Fault: 11,
}


@pytest.mark.parametrize("cls,code", ERROR_CODES.items(), ids=lambda x: getattr(x, "__name__", str(x)))
def test_error_classes(cls, code):
    assert issubclass(cls, shmreg.Error) and cls.code == code
    e = cls("a message")
    assert str(e) == "a message" and e.code == code


def test_invalid_argument_is_a_value_error():
    assert issubclass(shmreg.InvalidArgument, ValueError)


def test_error_carries_code_and_library_message():
    with shmreg.Registry() as reg:
        with pytest.raises(shmreg.NotFound) as info:
            reg.acquire("nothing", 0, 1)
    assert info.value.code == 2
    assert str(info.value) == "Unable to find shared memory region: 'nothing'"


@pytest.mark.parametrize("cls", [shmreg.Error, *ERROR_CODES], ids=lambda c: c.__name__)
def test_error_classes_print_and_pickle_as_shmregs(cls):
    # Where users import them from, not the private module they live in.
    import pickle, traceback
    assert cls.__module__ == "shmreg" and getattr(shmreg, cls.__name__) is cls
    assert getattr(shmreg._types, cls.__name__) is cls  # the same class, under either name
    line = traceback.format_exception_only(cls, cls("a message"))[-1]
    assert line == f"shmreg.{cls.__name__}: a message\n"
    back = pickle.loads(pickle.dumps(cls("a message")))
    assert type(back) is cls and str(back) == "a message"


def test_a_library_failure_prints_a_public_class():
    import subprocess, sys
    out = subprocess.run([sys.executable, "-c", "import shmreg; shmreg.Registry().acquire('nothing', 0, 1)"],
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == "shmreg.NotFound: Unable to find shared memory region: 'nothing'"


def test_imports_without_touching_a_gpu():
    # What the package does at import: nothing that needs a driver.
    import subprocess, sys
    out = subprocess.run([sys.executable, "-c", "import shmreg; print(shmreg.__version__)"],
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shmreg.__version__


def test_library_asks_for_no_static_tls():
    # pyproject.toml builds the package's library with SHMREG_URCU_INLINE=OFF,
    # so that importing it late into a crowded process cannot fail for lack
    # of static TLS: no DF_STATIC_TLS (0x10) in its dynamic section.
    import struct
    pkg = Path(shmreg.__file__).parent
    (lib,) = [p for p in pkg.iterdir() if p.name.startswith("libshmreg.so")]
    data = lib.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1  # 64-bit little-endian
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 2:  # PT_DYNAMIC
            for off in range(p_offset, p_offset + p_filesz, 16):
                tag, val = struct.unpack_from("<qQ", data, off)
                if tag == 30:  # DT_FLAGS
                    assert not val & 0x10, "libshmreg in the wheel has DF_STATIC_TLS"
                if tag == 0:
                    break
            return
    pytest.fail("no PT_DYNAMIC in libshmreg")
