#!/usr/bin/env python3
"""Check that the server's core and models speak no protocol: no HTTP status
is returned, compared or passed as a number under server/src/core/ or
server/src/models/. They return a server_status (server/src/common/status.h),
which each adapter maps once by its column of that table.

What counts as an HTTP number here: a literal from 100 to 599 returned
(`return 400`), compared (`st == 429`), assigned to a status (`st = 500`) or
passed to a failure (`infer_fail(c, 404, ...)`), outside comments and string
literals. A buffer of 400 bytes is none of these.

Usage: check-server-status.py [SERVER_SRC]   (default: the tree's server/src;
                                             exit 1 on any, one line each:
                                             FILE:LINE: what is wrong)
       check-server-status.py --self-test    (plants each kind in a copy and
                                             checks that each is reported,
                                             and that the unchanged copy passes)
"""
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ["core", "models"]
SOURCES = {".c", ".h", ".cc", ".cpp", ".cu"}
STATUS = r"[1-5]\d\d\b"
USES = [
    ("returns", re.compile(r"\breturn\s+\(?\s*" + STATUS)),
    ("compares", re.compile(r"[=!]=\s*" + STATUS)),
    ("compares", re.compile(r"\b" + STATUS + r"\s*[=!]=")),
    ("assigns", re.compile(r"\b(?:st|status)\w*\s*=\s*" + STATUS)),
    ("passes", re.compile(r"\b\w*fail\w*\s*\([^;]*?,\s*" + STATUS)),
    ("answers", re.compile(r"[?:]\s*" + STATUS + r"\s*[:;)]")),
]


def code_only(text: str) -> str:
    """text with comments and string and character literals blanked, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def check(src: Path) -> list[str]:
    problems = []
    for room in ROOMS:
        for path in sorted((src / room).rglob("*")):
            if not path.is_file() or path.suffix not in SOURCES:
                continue
            code = code_only(path.read_text(errors="replace"))
            for no, line in enumerate(code.splitlines(), 1):
                for what, pattern in USES:
                    m = pattern.search(line)
                    if m:
                        problems.append(f"{(src / path.relative_to(src)).as_posix()}:{no}: {what} "
                                        f"an HTTP status ({m.group(0).strip()}): return a "
                                        "server_status (common/status.h)")
                        break
    return problems


PLANTS = [
    ("core/planted_return.c", "unsigned f(void)\n{\n    return 404;\n}\n"),
    ("core/planted_compare.c", "int f(unsigned st)\n{\n    return st == 429 ? 1 : 0;\n}\n"),
    ("models/planted_assign.c", "void f(void)\n{\n    unsigned st = 500;\n    (void)st;\n}\n"),
    ("models/planted_fail.c", "unsigned g(void *c)\n{\n    return infer_fail(c, 400, \"x\");\n}\n"),
    ("core/planted_answer.c", "unsigned h(int ok)\n{\n    return ok ? 0 : 503;\n}\n"),
]


def self_test() -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "server" / "src", copy)
        if check(copy):
            print("self-test: the unchanged tree does not pass:", *check(copy), sep="\n  ")
            failed += 1
        for rel, text in PLANTS:
            (copy / rel).write_text(text)
            found = [p for p in check(copy) if p.startswith((copy / rel).as_posix() + ":")]
            if not found:
                print(f"self-test: {rel} was not reported")
                failed += 1
            (copy / rel).unlink()
        ignored = copy / "core" / "planted_comment.c"
        ignored.write_text("/* answers 400 */\nchar why[400];\nconst char *s = \"return 404\";\n")
        if check(copy):
            print("self-test: a comment, a buffer size or a string was reported")
            failed += 1
    print(f"check-server-status self-test: {len(PLANTS) + 2 - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    src = Path(argv[1]) if len(argv) > 1 else ROOT / "server" / "src"
    problems = check(src)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
