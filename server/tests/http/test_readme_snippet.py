"""The tritonclient snippet in README.md, run as written against a server
(only the address changes: the test server listens on a free port)."""
import numpy as np

from readme_snippets import blocks, numbers, run_block


def test_readme_snippet_runs_and_prints_results(server):
    out = run_block(blocks("server")[0], {'"127.0.0.1:8000"': f'"{server.url}"'})
    a = np.arange(16)
    assert numbers(out[out.index("sum"):out.index("diff")]) == list(a + 10)
    assert numbers(out[out.index("diff"):out.index("[{")]) == list(a - 10)
    status = out[out.index("[{"):]
    assert "'name': 'simple_io'" in status and "'in_use': 0" in status
