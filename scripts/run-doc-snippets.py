#!/usr/bin/env python3
"""Run the fenced examples of the docs that say they run, as a reader would.

A fenced block runs when the line before its opening fence (blank lines
aside) is

    <!-- doc-test: GROUP LANG -->

LANG is sh (bash, errexit and pipefail), c (compiled with the installed
library through `pkg-config --cflags --libs shmreg`, then run) or python (run
with $PYTHON, which must import shmreg). The blocks of one GROUP in one file
run in the order they appear, in one scratch folder, so that a setup line
(say, the shm object a snippet registers) comes before the snippet. POSIX
shm objects a group leaves in /dev/shm are removed after it.

    run-doc-snippets.py [--lang c,sh,python] FILE...

Environment: PKG_CONFIG_PATH (where shmreg.pc is; its libdir is put in the
program's rpath), PYTHON (default python3). Prints one line per group and
exits 1 if any block failed, or if the files hold no block at all.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!--\s*doc-test:\s*(\S+)\s+(sh|c|python)\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")


def blocks(path):
    """[(group, lang, line, text)] in document order."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    pending = None
    while i < len(lines):
        m = MARK.match(lines[i])
        if m:
            pending = (m.group(1), m.group(2), i + 1)
            i += 1
            continue
        f = FENCE.match(lines[i])
        if f:
            fence = f.group(1)
            start = i
            i += 1
            body = []
            while i < len(lines) and not lines[i].startswith(fence):
                body.append(lines[i])
                i += 1
            if pending:
                out.append((pending[0], pending[1], start + 2, "\n".join(body) + "\n"))
            pending = None
        elif lines[i].strip():
            pending = None
        i += 1
    return out


def dev_shm():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def run_block(lang, text, where, tmp, n):
    if lang == "sh":
        cmd = ["bash", "-euo", "pipefail", "-c", text]
    elif lang == "python":
        src = os.path.join(tmp, f"snippet{n}.py")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        cmd = [os.environ.get("PYTHON", "python3"), src]
    else:
        src = os.path.join(tmp, f"snippet{n}.c")
        exe = os.path.join(tmp, f"snippet{n}")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "shmreg"],
                               capture_output=True, text=True)
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "shmreg"],
                                capture_output=True, text=True)
        if flags.returncode != 0:
            return f"{where}: pkg-config finds no shmreg: {flags.stderr.strip()}"
        cc = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", exe, src,
              *flags.stdout.split(), f"-Wl,-rpath,{libdir.stdout.strip()}"]
        r = subprocess.run(cc, capture_output=True, text=True)
        if r.returncode != 0:
            return f"{where}: does not compile:\n{r.stderr}"
        cmd = [exe]
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return f"{where}: exit {r.returncode}:\n{r.stdout}{r.stderr}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", default="c,sh,python")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    langs = set(a.lang.split(","))
    failed = ran = 0
    for path in a.files:
        groups = {}
        for group, lang, line, text in blocks(path):
            groups.setdefault(group, []).append((lang, line, text))
        for group, items in groups.items():
            if not any(lang in langs for lang, _, _ in items):
                continue
            before = dev_shm()
            with tempfile.TemporaryDirectory() as tmp:
                error = None
                for n, (lang, line, text) in enumerate(items):
                    if lang not in langs and lang != "sh":
                        continue  # a setup line (sh) runs for any snippet of its group
                    error = run_block(lang, text, f"{path}:{line} ({lang})", tmp, n)
                    ran += 1
                    if error:
                        break
            for name in dev_shm() - before:
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
            if error:
                failed += 1
                print(f"doc snippets: FAILED {path} '{group}': {error}")
            else:
                kinds = ", ".join(f"{lang} at line {line}" for lang, line, _ in items
                                  if lang in langs or lang == "sh")
                print(f"doc snippets: passed {path} '{group}' ({kinds})")
    print(f"doc snippets: {ran} blocks run, {failed} groups failed")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
