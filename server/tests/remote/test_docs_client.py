"""docs/remote.md's client, run as written: the Python block under "A
client." is taken from the file and run in a process of its own (UCX must
not run in a fork of a process where it already runs), against a server of
this build (started with --remote-tcp-device lo, as the document says),
with only the URL changed. It registers an input and an output,
infers with tritonclient over HTTP, checks the answer and unregisters; the
server then holds no region."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "remote.md"

pytestmark = pytest.mark.servers("c")


def documented_client():
    text = DOC.read_text()
    after = text[text.index("**2. A client.**"):]
    match = re.search(r"```python\n(.*?)```", after, re.S)
    assert match, "docs/remote.md has no Python block after 'A client.'"
    return match.group(1)


def test_documented_client_runs(start_server, tmp_path):
    pytest.importorskip("tritonclient.http")
    code = documented_client()
    assert 'url = "localhost:8000"' in code
    server = start_server("--remote-tcp-device", "lo")  # as the document starts it
    script = tmp_path / "client.py"
    script.write_text(code.replace('url = "localhost:8000"', f'url = "{server.url}"'))
    # The package's remote module, from this checkout, over the library the
    # server was built against ($SHMREG_LIBRARY, which the tier sets).
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    status_code, listed = server.json("GET", "/v2/remotememory/status")
    assert status_code == 200 and listed == [], listed
