#!/usr/bin/env python3
"""Check that no file of the library includes a header of a higher layer.

src/ is in folders by layer (docs/design.md), lowest first:

  base      errors, the system seam, names, atomics, RCU
  wire      descriptor passing, the memfd region socket
  backends  the system and CUDA memory backends
  remote    the UCX backend and its client
  core      the registry, its table, regions, mappings, quotas, reclaim
  handover  a registry's state saved, restored and sent to another process

A file may include the headers of its own layer and of lower ones, the
public headers (shmreg/shmreg.h and those beside it) and system headers. Every include of a
header under src/ is written through its folder, from src/ as the include
root ("base/err.h"), never bare ("err.h") nor relative ("../base/err.h").
Every source file sits in one of the layers' folders.

The files are whatever src/ holds when the check runs: a new file in a
layer's folder is checked with no change here; a new folder fails until it
is given its place in LAYERS.

Usage: check-layers.py [SRC_DIR]   (default: the tree's src/; exit 1 on any
                                    violation, one line per violation:
                                    FILE:LINE: what is wrong)
       check-layers.py --self-test (plants each kind of violation in a copy
                                    of src/ and checks that each fails,
                                    named by file and line, and that the
                                    unchanged copy passes)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["base", "wire", "backends", "remote", "core", "handover"]  # lowest first
PUBLIC = "shmreg/"  # include/shmreg/, the public headers
SOURCES = {".c", ".h", ".cc", ".cpp", ".cu", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def sources(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in SOURCES)


def check_file(src: Path, path: Path, headers: dict[str, list[str]]) -> list[str]:
    """The violations of one file, as 'FILE:LINE: message', FILE as src/ was
    named to the script."""
    rel = path.relative_to(src)
    layer = rel.parts[0] if len(rel.parts) > 1 else None
    where = (src / rel).as_posix()
    if layer not in LAYERS:
        what = "is in no layer's folder" if layer is None else f"is in folder {layer}/, which is no layer"
        return [f"{where}:1: {what} (layers, lowest first: {', '.join(LAYERS)}; scripts/check-layers.py)"]
    rank = LAYERS.index(layer)
    problems = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        quoted, name = m.group(1) == '"', m.group(2).strip()
        parts = name.split("/")
        relative = "." in parts or ".." in parts
        if parts[0] in LAYERS and not relative:
            if LAYERS.index(parts[0]) > rank:
                problems.append(f"{where}:{n}: {layer}/ includes {name}, of the higher layer {parts[0]}/")
        elif name.startswith(PUBLIC) and not relative:
            continue
        elif quoted and (relative or parts[-1] in headers):
            folders = headers.get(parts[-1], [])
            hint = f" (write it as {' or '.join(folders)})" if folders else ""
            problems.append(f"{where}:{n}: includes \"{name}\", not written through its folder "
                            f"from src/{hint}")
    return problems


def check(src: Path) -> list[str]:
    files = sources(src)
    headers: dict[str, list[str]] = {}
    for p in files:
        if p.suffix == ".h":
            headers.setdefault(p.name, []).append(p.relative_to(src).as_posix())
    return [problem for p in files for problem in check_file(src, p, headers)]


def run(tmp: Path) -> tuple[int, str]:
    """This script on tmp/src, as CI runs it on the tree's."""
    r = subprocess.run([sys.executable, __file__, "src"], cwd=tmp, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def self_test() -> int:
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", copy)
        rc, out = run(Path(tmp))
        if rc != 0:
            failures.append(f"the unchanged copy of src/ fails:\n{out}")
        lowest = sorted((copy / LAYERS[0]).glob("*.c"))[0]
        highest = sorted((copy / LAYERS[-1]).glob("*.h"))[0]
        some_header = highest.relative_to(copy).as_posix()
        unfoldered = "not written through its folder"
        plants = [
            # (what, file, line to add, text the failure must hold)
            ("an include of a higher layer", lowest, f'#include "{some_header}"', "of the higher layer"),
            ("a bare include of a src header", highest, f'#include "{highest.name}"', unfoldered),
            ("a relative include", highest, f'#include "../{some_header}"', unfoldered),
            ("a detour through a lower layer", lowest, f'#include "{LAYERS[0]}/../{some_header}"',
             unfoldered),
            ("a file outside the layers", copy / "loose.c", "int loose;", "no layer"),
        ]
        for what, path, text, expect in plants:
            original = path.read_text() if path.exists() else None
            lines = (original or "").splitlines()
            at = min(2, len(lines))  # the planted line's number is at + 1
            path.write_text("\n".join(lines[:at] + [text] + lines[at:]) + "\n")
            rc, out = run(Path(tmp))
            named = f"src/{path.relative_to(copy).as_posix()}:{at + 1 if original is not None else 1}:"
            if rc != 1 or named not in out or expect not in out:
                failures.append(f"{what} ({named} {text}) does not fail as it should: exit {rc}\n{out}")
            else:
                print(f"check-layers self-test: {what} fails: {out.splitlines()[0]}")
            if original is None:
                path.unlink()
            else:
                path.write_text(original)
        rc, out = run(Path(tmp))
        if rc != 0:
            failures.append(f"the copy with every plant taken out again fails:\n{out}")
    for f in failures:
        print(f"check-layers self-test: FAILED: {f}")
    print(f"check-layers self-test: {len(failures)} failed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[0] if argv else os.path.relpath(ROOT / "src"))
    files = sources(src)
    if not files:
        print(f"check-layers: no source files under {src}", file=sys.stderr)
        return 2
    problems = check(src)
    for p in problems:
        print(p)
    print(f"check-layers: {len(files)} files, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
