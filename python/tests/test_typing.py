"""The shipped stub and py.typed, checked by mypy --strict over a program
that uses every call (typed_usage.py). Skipped where mypy is not installed
(the CI tier installs it)."""

import os
import subprocess
import sys

import pytest


def test_stub_types_the_api():
    pytest.importorskip("mypy")
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
         os.path.join(here, "typed_usage.py")],
        capture_output=True, text=True, cwd=here)
    assert out.returncode == 0, out.stdout + out.stderr
