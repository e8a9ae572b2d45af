"""The tritonclient.grpc snippet in README.md (the second Python block of the
server section), run as written against a server serving gRPC (only the
address changes: the test server listens on a free port)."""
import contextlib
import io
import re
from pathlib import Path

import numpy as np

from grpc_support import start_grpc_server  # noqa: F401 (a fixture)

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_grpc_snippet():
    text = README.read_text()
    block = text[text.index("<!-- server:begin -->"):text.index("<!-- server:end -->")]
    (code,) = [c for c in re.findall(r"```python\n(.*?)```", block, re.S) if "tritonclient.grpc" in c]
    return code


def test_readme_grpc_snippet_runs_and_prints_results(start_grpc_server):  # noqa: F811
    server = start_grpc_server()
    code = readme_grpc_snippet()
    assert '"127.0.0.1:8001"' in code
    code = code.replace('"127.0.0.1:8001"', f'"{server.grpc_url}"')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), {})
    out = printed.getvalue()
    numbers = lambda text: [int(x) for x in re.findall(r"-?\d+", text)]
    a = np.arange(16)
    assert numbers(out[out.index("sum"):out.index("diff")]) == list(a + 10)
    assert numbers(out[out.index("diff"):out.index("{")]) == list(a - 10)
    assert "'name': 'grpc_io'" in out[out.index("{"):]
