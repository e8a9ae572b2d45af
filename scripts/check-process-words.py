#!/usr/bin/env python3
"""Fail when the documentation or the code speaks of how it was made.

A reader of the docs, the headers, the sources, the tests, the CLI help or
the log lines cannot resolve "issue 11" (there is no tracker in the
repository), nor a work session, a lease of a machine, a device call, "this
round", a numbered seed of the benchmark brief, or "tried, not kept". Each
such word should be the reason it stood for. This prints every occurrence
as FILE:LINE: TEXT and exits 1 if there is any.

    check-process-words.py [--root DIR]   check the tree (default: the repository)
    check-process-words.py --self-test    show that a planted line fails and the tree passes

Paths listed in scripts/process-words-pending.txt (one prefix a line, '#'
comments) are skipped and named: files that are being rewritten elsewhere.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Where the words must not appear: prefixes relative to the root.
SCOPE = [
    "README.md", "CHANGELOG.md", "docs/", "include/", "src/", "python/",
    "server/src/", "server/README.md", "server/tests/", "server/bench/", "scripts/",
    "examples/", "tests/",
]
# Every README below the root is in scope too, wherever it lives.
EXTRA_NAME = re.compile(r"^README(\.[a-z]+)?$")
SKIP_DIRS = {".git", "build", "__pycache__", ".venv", "venv", "node_modules"}
TEXT_EXT = {
    ".md", ".txt", ".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".py", ".pyi",
    ".sh", ".cmake", ".map", ".toml", ".in", ".proto", ".json", ".yml",
    ".yaml", ".cfg", "",
}
SELF = {"scripts/check-process-words.py", "scripts/process-words-pending.txt"}
PENDING_FILE = "scripts/process-words-pending.txt"

WORDS = re.compile(
    r"\bissues? #?\d+"                      # issue 11, issues 18-21, (issue 20)
    r"|\b(?:work )?sessions?\b"             # a session of the work (not pytest's: see ALLOWED)
    r"|\bleas(?:e|es|ed)\b"                 # a lease of a machine
    r"|\bdevice calls?\b"
    r"|\b(?:this|that|last|next|previous) round\b|\bround's\b"
    r"|\bseed \d{3}\b|\bseed NNN\b"
    r"|\btried,? (?:and )?not kept\b",
    re.IGNORECASE,
)
# Uses of these words that are the product's own or another project's.
ALLOWED = re.compile(
    r"scope=\"session\"|scope='session'|session[- ]scoped|session fixture"
    r"|pytest session|Triton(?:'s)? issues? #?\d+|ClientSession|requests\.Session",
    re.IGNORECASE,
)


def pending(root):
    path = os.path.join(root, PENDING_FILE)
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
    return out


def files(root):
    seen = set()
    for prefix in SCOPE:
        top = os.path.join(root, prefix)
        if os.path.isfile(top):
            seen.add(prefix)
        elif os.path.isdir(top):
            for d, dirs, names in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
                for n in names:
                    if os.path.splitext(n)[1] in TEXT_EXT:
                        seen.add(os.path.relpath(os.path.join(d, n), root))
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")]
        rel = os.path.relpath(d, root)
        for n in names:
            if EXTRA_NAME.match(n):
                seen.add(os.path.normpath(os.path.join(rel, n)))
    return sorted(seen - SELF)


# What starts a continued line of a comment or a docstring: its marker and
# indentation, dropped when two lines are read as one.
CONTINUATION = re.compile(r"^\s*(?:#+|//+|\*+|--)?\s*")


def spans_break(line, following):
    """A word of WORDS that a line break cuts in two ("the seed" / "# 003")."""
    head = line.rstrip()
    joined = head + " " + CONTINUATION.sub("", following)
    return any(m.start() < len(head) < m.end() for m in WORDS.finditer(joined))


def check(root, out=sys.stdout):
    skip = pending(root)
    hits = 0
    for rel in files(root):
        if any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in skip):
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, OSError):
            continue
        for no, line in enumerate(lines, 1):
            text = ALLOWED.sub("", line)
            following = lines[no] if no < len(lines) else ""
            if WORDS.search(text) or spans_break(text, ALLOWED.sub("", following)):
                print(f"{rel}:{no}: {line.strip()}", file=out)
                hits += 1
    for p in skip:
        print(f"process words: skipped {p} ({PENDING_FILE}: being rewritten)", file=out)
    print(f"process words: {hits} found", file=out)
    return hits == 0


def self_test():
    """Copy the tree's checked files, plant one line, expect FILE:LINE."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        for rel in files(here) + [PENDING_FILE]:
            src = os.path.join(here, rel)
            if os.path.exists(src):
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                shutil.copyfile(src, os.path.join(tmp, rel))
        me = [sys.executable, os.path.abspath(__file__), "--root", tmp]
        # What the copy reports before planting (nothing, on a clean tree;
        # the check of the tree itself says so): planted lines come on top.
        before = subprocess.run(me, capture_output=True, text=True).stdout
        planted = [
            ("docs/integration.md", "The cache came with issue 10."),
            ("src/core/region.c", "/* (issue 20) measured in this session */"),
            ("CHANGELOG.md", "This round's main."),
            ("tests/registry/test_planted.c", "/* seed 003: tried, not kept */"),
            ("server/tests/gpu/planted.sh", "# then the seed\n# 003's benchmark"),
        ]
        for rel, line in planted:
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            n = 0
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    n = len(f.readlines())
            with open(path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
            r = subprocess.run(me, capture_output=True, text=True)
            want = f"{rel}:{n + 1}: {line.splitlines()[0]}"
            if r.returncode != 1 or want not in r.stdout or want in before:
                print(f"self-test: planting '{line}' in {rel} was not reported as '{want}':")
                print(r.stdout)
                return False
            with open(path, encoding="utf-8") as f:
                kept = f.readlines()[: -len(line.splitlines())]
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(kept)
        # The product's own uses of the words pass.
        ok = os.path.join(tmp, "python/tests/test_words_ok.py")
        os.makedirs(os.path.dirname(ok), exist_ok=True)
        with open(ok, "w", encoding="utf-8") as f:
            f.write('@pytest.fixture(scope="session")  # a session fixture\n'
                    "# one release, then the round trip; Triton issues 3428, 4361\n")
        r = subprocess.run(me, capture_output=True, text=True)
        if "test_words_ok.py" in r.stdout:
            print("self-test: the product's own words were reported:")
            print(r.stdout)
            return False
    print(f"process words self-test: {len(planted)} planted lines reported with file:line, "
          "the product's own uses of the words pass")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return 0 if self_test() else 1
    return 0 if check(a.root) else 1


if __name__ == "__main__":
    sys.exit(main())
