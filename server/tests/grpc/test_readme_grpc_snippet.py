"""The tritonclient.grpc snippet in README.md (the second Python block of the
server section), run as written against a server serving gRPC (only the
address changes: the test server listens on a free port)."""
import numpy as np

from grpc_support import start_grpc_server  # noqa: F401 (a fixture)
from readme_snippets import blocks, numbers, run_block


def readme_grpc_snippet():
    (code,) = [c for c in blocks("server") if "tritonclient.grpc" in c]
    return code


def test_readme_grpc_snippet_runs_and_prints_results(start_grpc_server):  # noqa: F811
    server = start_grpc_server()
    out = run_block(readme_grpc_snippet(), {'"127.0.0.1:8001"': f'"{server.grpc_url}"'})
    a = np.arange(16)
    assert numbers(out[out.index("sum"):out.index("diff")]) == list(a + 10)
    assert numbers(out[out.index("diff"):out.index("{")]) == list(a - 10)
    assert "'name': 'grpc_io'" in out[out.index("{"):]
