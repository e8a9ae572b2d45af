"""The targets of server/bench/gpu/light_model_cost.py, without a GPU: each
ratio is computed from the right figures (the CUDA p50 over the bare p50
plus the model's compute; the system path's extra latency over the
tensors' transfer time; CPU per inference over the bare CPU per call), met
exactly up to its bound, and a cell that failed or was never measured is
said to be so (with the last line its tool printed) and counts as missed
rather than breaking the report. The skip without a GPU is exit 77 with a
reason."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "gpu", "light_model_cost.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import light_model_cost as lm  # noqa: E402

SMALL, LARGE = lm.SHAPES


def figures():
    """Every cell measured, each ratio chosen to sit on one side of its bound."""
    fig = {"bare": {"client": "perf_analyzer", "p50_us": 200.0, "calls_per_s": 20000.0,
                    "cpu_us_per_call": 100.0},
           "transfer_us": {SMALL: 100.0, LARGE: 200.0}}
    for shape, compute, cuda_p50, system_p50 in ((SMALL, 300.0, 625.0, 735.0),
                                                 (LARGE, 600.0, 1001.0, 1300.0)):
        fig["cuda", shape, 1] = {"p50_us": cuda_p50, "infer_us": compute, "error": ""}
        fig["system", shape, 1] = {"p50_us": system_p50, "infer_us": compute, "error": ""}
        fig["cuda", shape, 100] = {"infer_s": 9000.0, "cpu_us_per_infer": 150.0, "error": ""}
        fig["system", shape, 100] = {"infer_s": 8000.0, "cpu_us_per_infer": 151.0, "error": ""}
    return fig


def by_name(fig):
    return {what: (r, target) for what, r, target in lm.verdicts(fig, 100)}


def test_each_ratio_reads_its_own_figures_and_meets_its_bound_inclusively():
    v = by_name(figures())
    # 625 / (200 + 300) = 1.25: on the bound, met.
    assert v[f"{SMALL} CUDA p50 at c=1 / (bare gRPC p50 + compute)"] == (1.25, 1.25)
    # 1001 / (200 + 600) just past it.
    assert v[f"{LARGE} CUDA p50 at c=1 / (bare gRPC p50 + compute)"][0] == pytest.approx(1.25125)
    # (735 - 625) / 100 = 1.1 met; (1300 - 1001) / 200 = 1.495 missed.
    assert v[f"{SMALL} (system p50 - CUDA p50) at c=1 / transfer"][0] == pytest.approx(1.1)
    assert v[f"{LARGE} (system p50 - CUDA p50) at c=1 / transfer"][0] == pytest.approx(1.495)
    assert v[f"{SMALL} cuda CPU per inference at c=100 / bare gRPC CPU per call"][0] == 1.5
    assert v[f"{SMALL} system CPU per inference at c=100 / bare gRPC CPU per call"][0] == 1.51
    lines = [lm.verdict_line(*x) for x in lm.verdicts(figures(), 100)]
    assert len(lines) == 8
    # Per shape: CUDA p50, system p50, system CPU, CUDA CPU.
    assert [line.rsplit(": ", 1)[1] for line in lines] == [
        "met", "met", "missed", "met", "missed", "missed", "missed", "met"]


def test_a_failed_or_missing_cell_is_not_measured_and_missed():
    fig = figures()
    # As measure() writes it: the command line, then what perf_analyzer printed.
    fig["cuda", SMALL, 1]["error"] = ("perf_analyzer exit 1: perf_analyzer -m yolo -b 1\n\n"
                                      "error: cannot register\n")
    del fig["system", LARGE, 100]
    fig["transfer_us"].pop(LARGE)
    v = by_name(fig)
    assert v[f"{SMALL} CUDA p50 at c=1 / (bare gRPC p50 + compute)"][0] is None
    assert v[f"{SMALL} (system p50 - CUDA p50) at c=1 / transfer"][0] is None
    assert v[f"{LARGE} (system p50 - CUDA p50) at c=1 / transfer"][0] is None
    assert v[f"{LARGE} system CPU per inference at c=100 / bare gRPC CPU per call"][0] is None
    assert v[f"{LARGE} cuda CPU per inference at c=100 / bare gRPC CPU per call"][0] is not None
    assert lm.verdict_line("x", None, 1.5) == "x: not measured (target <= 1.5): missed"
    text = lm.table(fig, 100)
    assert (f"| {SMALL} | cuda (perf_analyzer) | failed: perf_analyzer exit 1: error: cannot "
            "register |") in text
    assert f"| {LARGE} | system (perf_analyzer) |" in text and "| ? |" in text
    assert "| - | bare gRPC (perf_analyzer) | 200 | - | - | 20,000 | 100.0 |" in text


def test_without_a_gpu_it_skips_with_77_and_says_why():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, SCRIPT, "--server", "/nonexistent"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 77, proc.stderr
    assert "skipped: no GPU visible" in proc.stdout
