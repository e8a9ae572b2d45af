"""The tritonclient snippet in README.md, run as written against a server
(only the address changes: the test server listens on a free port)."""
import contextlib
import io
import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_snippet():
    text = README.read_text()
    block = text[text.index("<!-- server:begin -->"):text.index("<!-- server:end -->")]
    return re.search(r"```python\n(.*?)```", block, re.S).group(1)


def test_readme_snippet_runs_and_prints_results(server):
    code = readme_snippet()
    assert '"127.0.0.1:8000"' in code
    code = code.replace('"127.0.0.1:8000"', f'"{server.url}"')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), {})
    out = printed.getvalue()
    numbers = lambda text: [int(x) for x in re.findall(r"-?\d+", text)]
    a = np.arange(16)
    assert numbers(out[out.index("sum"):out.index("diff")]) == list(a + 10)
    assert numbers(out[out.index("diff"):out.index("[{")]) == list(a - 10)
    status = out[out.index("[{"):]
    assert "'name': 'simple_io'" in status and "'in_use': 0" in status
