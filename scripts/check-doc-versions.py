#!/usr/bin/env python3
"""Check that every version of the library the docs name is the one that installs.

The version is written once, in include/shmreg/shmreg.h (SHMREG_VERSION_*).
CMakeLists.txt's project() and pyproject.toml's metadata read it from there;
this script checks that they still do (pyproject's regex is run on the
header, as scikit-build-core runs it), then that every mention in the given
Markdown files that names the library's version agrees with it:

  libshmreg.so.X.Y.Z            the installed file: exactly the version
  libshmreg.so.N                the SONAME: the major version
  libshmreg X.Y.Z, shmreg-X.Y.Z the library or its wheel/package: the version
  __version__ == "X.Y.Z"        the Python package
  shmreg_version() ... "X.Y.Z"  what the library reports at run time
  find_package(shmreg X.Y ...)  a minimum: same major, not newer

Other version numbers (Triton's, liburcu's, DLPack's, "as 1.0 did") are not
the installed library's and are left alone. A line about another version of
the library on purpose (what a future 2.0 would install) ends with the
Markdown comment <!-- another version -->.

Usage: check-doc-versions.py FILE...      (exit 1 on any mismatch)
       check-doc-versions.py --self-test  (the checks catch a wrong version)
"""
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRIPLE = r"(\d+\.\d+\.\d+)"
EXACT = [
    re.compile(r"libshmreg\.so\." + TRIPLE),
    re.compile(r"\blibshmreg[ -]v?" + TRIPLE),
    re.compile(r"(?<![\w/.])shmreg-v?" + TRIPLE),
    re.compile(r"(?<![\w.])shmreg v?" + TRIPLE),
    re.compile(r"__version__\s*==\s*[\"']" + TRIPLE),
    re.compile(r"shmreg(?:::|_)version\(\)[^\n]{0,60}?[\"']" + TRIPLE),
]
SONAME = re.compile(r"libshmreg\.so\.(\d+)(?![\d.]*\d)")
OTHER_VERSION = "<!-- another version -->"
MINIMUM = re.compile(r"find_package\(\s*shmreg\s+(\d+)\.(\d+)")


def header_version(header: Path) -> str:
    """The three macros, read as CMakeLists.txt reads them."""
    text = header.read_text()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"^#define SHMREG_VERSION_{part} +(\d+) *$", text, re.M)
        if not m:
            sys.exit(f"{header}: no SHMREG_VERSION_{part}")
        parts.append(m.group(1))
    return ".".join(parts)


def sources_agree(version: str) -> list[str]:
    """CMake's project() and pyproject's metadata take the header's version."""
    problems = []
    cmake = (ROOT / "CMakeLists.txt").read_text()
    if not re.search(
        r"project\(shmreg VERSION \$\{SHMREG_VERSION_MAJOR\}\.\$\{SHMREG_VERSION_MINOR\}\.\$\{SHMREG_VERSION_PATCH\}",
        cmake,
    ):
        problems.append("CMakeLists.txt: project() no longer takes its VERSION from the header's macros")
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())
    static = py.get("project", {}).get("version")
    if static is not None:
        if static != version:
            problems.append(f"pyproject.toml: version {static}, the header says {version}")
    else:
        meta = py.get("tool", {}).get("scikit-build", {}).get("metadata", {}).get("version", {})
        src = ROOT / meta.get("input", "")
        m = re.search(meta.get("regex", "(?!)"), src.read_text()) if src.is_file() else None
        got = meta.get("result", "").format(**m.groupdict()) if m else None
        if got != version:
            problems.append(f"pyproject.toml: its version regex over {meta.get('input')} gives {got}, "
                            f"the header says {version}")
    return problems


def check_text(name: str, text: str, version: str) -> list[str]:
    major, minor = (int(x) for x in version.split(".")[:2])
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.rstrip().endswith(OTHER_VERSION):
            continue
        for pattern in EXACT:
            for m in pattern.finditer(line):
                if m.group(1) != version:
                    problems.append(f"{name}:{lineno}: '{m.group(0)}' but the library is {version}")
        for m in SONAME.finditer(line):
            if int(m.group(1)) != major:
                problems.append(f"{name}:{lineno}: '{m.group(0)}' but the SONAME is libshmreg.so.{major}")
        for m in MINIMUM.finditer(line):
            want = (int(m.group(1)), int(m.group(2)))
            if want[0] != major or want[1] > minor:
                problems.append(f"{name}:{lineno}: '{m.group(0)}' cannot find version {version}")
    return problems


def self_test(version: str) -> int:
    major, minor, patch = (int(x) for x in version.split("."))
    wrong = f"{major}.{minor}.{patch + 1}"
    bad = [
        f"installs libshmreg.so.{wrong}",
        f"links libshmreg.so.{major + 1} at run time",
        f"prints: libshmreg {wrong}",
        f"pip installs shmreg-{wrong}-cp311-cp311-linux_x86_64.whl",
        f'shmreg.__version__ == "{wrong}"',
        f'shmreg_version() returns "{wrong}"',
        f"find_package(shmreg {major}.{minor + 1} REQUIRED)",
    ]
    good = [
        f"installs libshmreg.so.{version} and libshmreg.so.{major}",
        f'shmreg.__version__ == "{version}"; tritonserver 2.51.0; liburcu 0.13.2',
        f"find_package(shmreg {major}.0 REQUIRED); as libshmreg 1.0 did; SHMREG_1.0",
        f"a {major + 1}.0 would install libshmreg.so.{major + 1} {OTHER_VERSION}",
    ]
    failed = 0
    for line in bad:
        if not check_text("self-test", line, version):
            print(f"self-test: not caught: {line}")
            failed += 1
    for line in good:
        for p in check_text("self-test", line, version):
            print(f"self-test: wrongly caught: {p}")
            failed += 1
    print(f"doc versions self-test: {len(bad) + len(good) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    version = header_version(ROOT / "include/shmreg/shmreg.h")
    if argv == ["--self-test"]:
        return self_test(version)
    problems = sources_agree(version)
    mentions = 0
    for arg in argv:
        text = Path(arg).read_text()
        mentions += sum(len(p.findall(text)) for p in EXACT + [SONAME, MINIMUM])
        problems += check_text(arg, text, version)
    for p in problems:
        print(p)
    print(f"doc versions: {len(argv)} files, {mentions} mentions of the library's version, "
          f"{len(problems)} wrong (the library is {version})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
