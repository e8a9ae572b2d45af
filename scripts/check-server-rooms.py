#!/usr/bin/env python3
"""Check the rooms of the server (server/src/), lowest first:

  common    datatypes, tensors, statuses, the worker pool, UTF-8
  models    the models, their GPU parts
  core      the protocol-neutral core
  grpc, http, uds, service
            the adapters, and the service manager's side (crash survival):
            each may include the rooms below it, never another of them
  main.c, options.c (at the top, in no folder): anything

and that JSON is http/'s alone: no file outside http/ includes a JSON
library's header (RapidJSON, json-c) or http/'s reader and writer. Includes
are written from server/src/ ("core/infer_core.h"), as the library's are.

Usage: check-server-rooms.py [SRC_DIR]   (default: the tree's server/src;
                                          exit 1 on any violation, one line
                                          per violation: FILE:LINE: what)
       check-server-rooms.py --self-test
"""
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = {"common": 0, "models": 1, "core": 2, "grpc": 3, "http": 3, "uds": 3, "service": 3}
TOP = 4  # main.c and options.c, in no folder
SOURCES = {".c", ".h", ".cc", ".cpp", ".cu"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
JSON_LIBRARIES = ("rapidjson/", "json-c/", "json.h")


def room_of(rel: Path) -> tuple[str, int]:
    if len(rel.parts) == 1:
        return "top", TOP
    return rel.parts[0], ROOMS.get(rel.parts[0], -1)


def check_include(room: str, rank: int, name: str) -> str | None:
    target = name.split("/")[0]
    json_header = name.startswith(JSON_LIBRARIES) or name.startswith("http/json_")
    if json_header and room not in ("http", "top"):
        return f"{room}/ includes {name}: JSON is http/'s alone"
    if target in ROOMS and room != "top":
        if ROOMS[target] > rank:
            return f"{room}/ includes {name}, of the higher room {target}/"
        if ROOMS[target] == rank and target != room:
            return f"the adapter {room}/ includes {name}, of the adapter {target}/"
    return None


def check(src: Path) -> list[str]:
    problems = []
    for path in sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in SOURCES):
        rel = path.relative_to(src)
        room, rank = room_of(rel)
        where = (src / rel).as_posix()
        if rank < 0:
            problems.append(f"{where}:1: is in folder {room}/, which is no room (scripts/check-server-rooms.py)")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            why = m and check_include(room, rank, m.group(2).strip())
            if why:
                problems.append(f"{where}:{n}: {why}")
    return problems


def self_test() -> int:
    """Plants each kind of violation in a copy of server/src and checks that
    each is named, by file and line, and that the unchanged copy passes."""
    plants = [  # (file, line planted at its end, words the failure holds)
        ("core/refs.c", '#include "http/json_doc.h"', "JSON is http/'s alone"),
        ("common/tensor.c", "#include <rapidjson/document.h>", "JSON is http/'s alone"),
        ("grpc/convert.cc", '#include "http/reply.h"', "of the adapter http/"),
        ("common/utf8.c", '#include "core/refs.h"', "of the higher room core/"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "server" / "src", copy)
        if check(copy):
            print("check-server-rooms self-test: FAILED: the unchanged copy fails")
            failed += 1
        for name, text, words in plants:
            path = copy / name
            original = path.read_text()
            path.write_text(original + text + "\n")
            line = len((original + text).splitlines())
            found = [p for p in check(copy) if f"{name}:{line}:" in p and words in p]
            print(f"check-server-rooms self-test: {name}: {text}: {'fails' if found else 'FAILED: passes'}")
            failed += not found
            path.write_text(original)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    src = Path(argv[0]) if argv else ROOT / "server" / "src"
    problems = check(src)
    for p in problems:
        print(p)
    print(f"check-server-rooms: {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
