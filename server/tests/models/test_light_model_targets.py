"""The targets of server/bench/gpu/light_model_cost.py, without a GPU: each
ratio is computed from the right figures (the CUDA p50 over the bare p50
plus the model's compute; the system path's extra latency over the
tensors' transfer time; CPU per inference over the bare CPU per call), met
exactly up to its bound, and a cell that failed or was never measured is
said to be so (with the last line its tool printed): every ratio that
needs it reads "not measured" with the reason, never met or missed, and
the report does not break. A floor perf_analyzer could not measure makes
every ratio over it "not measured". The skip without a GPU is exit 77 with
a reason."""
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
    fig = {"bare": {"p50_us": 200.0, "calls_per_s": 20000.0, "cpu_us_per_call": 100.0},
           "transfer_us": {SMALL: 100.0, LARGE: 200.0}}
    for shape, compute, cuda_p50, system_p50 in ((SMALL, 300.0, 625.0, 735.0),
                                                 (LARGE, 600.0, 1001.0, 1300.0)):
        fig["cuda", shape, 1] = {"p50_us": cuda_p50, "infer_us": compute, "error": ""}
        fig["system", shape, 1] = {"p50_us": system_p50, "infer_us": compute, "error": ""}
        fig["cuda", shape, 100] = {"infer_s": 9000.0, "cpu_us_per_infer": 150.0, "error": ""}
        fig["system", shape, 100] = {"infer_s": 8000.0, "cpu_us_per_infer": 151.0, "error": ""}
    return fig


def by_name(fig):
    return {what: (r, target) for what, r, target, _ in lm.verdicts(fig, 100)}


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


def test_a_failed_or_missing_cell_is_not_measured_never_missed():
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
    lines = [lm.verdict_line(*x) for x in lm.verdicts(fig, 100)]
    assert (f"{SMALL} CUDA p50 at c=1 / (bare gRPC p50 + compute): not measured "
            f"(cuda {SMALL} c=1 failed) (target <= 1.25)") in lines
    assert (f"{LARGE} (system p50 - CUDA p50) at c=1 / transfer: not measured "
            f"(transfer {LARGE} not measured) (target <= 1.1)") in lines
    assert not [line for line in lines if "not measured" in line
                and (line.endswith("met") or line.endswith("missed"))]
    text = lm.table(fig, 100)
    assert (f"| {SMALL} | cuda (perf_analyzer) | failed: perf_analyzer exit 1: error: cannot "
            "register |") in text
    assert f"| {LARGE} | system (perf_analyzer) |" in text and "| ? |" in text
    assert "| - | bare gRPC (perf_analyzer) | 200 | - | - | 20,000 | 100.0 |" in text


def test_a_floor_perf_analyzer_could_not_measure_makes_its_ratios_not_measured():
    fig = figures()
    fig["bare"] = {"error": "c=1: perf_analyzer exit 99: failed to find the requested model"}
    lines = [lm.verdict_line(*x) for x in lm.verdicts(fig, 100)]
    over_floor = [line for line in lines if "bare gRPC" in line.split(":")[0]]
    assert len(over_floor) == 6  # per shape: the CUDA p50 and both CPU ratios
    assert all(": not measured (bare gRPC not measured with perf_analyzer: c=1: "
               "perf_analyzer exit 99" in line and not line.endswith(("met", "missed"))
               for line in over_floor)
    # The transfer ratios need no floor: still measured.
    assert [line.rsplit(": ", 1)[1] for line in lines if "transfer" in line] == ["met", "missed"]
    text = lm.table(fig, 100)
    assert "| - | bare gRPC (perf_analyzer) | not measured: c=1: perf_analyzer exit 99" in text
    fig["bare_callback"] = {"p50_us": 210.0, "cpu_us_per_call": 120.0}
    assert lm.floors_line(fig, 100) == (
        "grpc floors, callback API / completion queue: p50 at c=1 not measured (bare gRPC not "
        "measured with perf_analyzer: c=1: perf_analyzer exit 99: failed to find the requested "
        "model), CPU per call at c=100 not measured (bare gRPC not measured with perf_analyzer: "
        "c=1: perf_analyzer exit 99: failed to find the requested model)")
    fig["bare"] = figures()["bare"]
    assert lm.floors_line(fig, 100) == (
        "grpc floors, callback API / completion queue: p50 at c=1 1.05, CPU per call at c=100 "
        "1.20")


def test_the_step_table_reads_each_cells_statistics():
    fig = figures()
    fig["cuda", SMALL, 1]["steps_us"] = {"queue": 33.0, "compute_input": 3.0,
                                          "compute_infer": 4.0, "compute_output": 5.0,
                                          "request": 60.0, "answer_other": 15.0}
    fig["cuda", SMALL, 1]["cpu_us_per_infer"] = 170.0
    text = lm.step_table(fig, 100)
    assert f"| {SMALL} | cuda | 1 | 33.0 | 3.0 | 4.0 | 5.0 | 15.0 | 60.0 | 170.0 |" in text
    # A cell without statistics shows "?" rather than breaking the table.
    assert f"| {SMALL} | system | 100 | ? | ? | ? | ? | ? | ? | 151.0 |" in text


def test_step_times_split_the_request_time_per_inference():
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import seed_benchmark as sb
    before = {k: (10, 1000) for k in ("success", "queue", "compute_input", "compute_infer",
                                      "compute_output")}
    after = {"success": (20, 1000 + 10 * 60_000), "queue": (20, 1000 + 10 * 30_000),
             "compute_input": (20, 1000 + 10 * 5_000), "compute_infer": (20, 1000 + 10 * 4_000),
             "compute_output": (20, 1000 + 10 * 6_000)}
    steps = sb.step_times(before, after)
    assert steps == {"queue": 30.0, "compute_input": 5.0, "compute_infer": 4.0,
                     "compute_output": 6.0, "request": 60.0, "answer_other": 15.0}
    assert sb.step_times(after, after)["answer_other"] is None


def test_without_a_gpu_it_skips_with_77_and_says_why():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, SCRIPT, "--server", "/nonexistent"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 77, proc.stderr
    assert "skipped: no GPU visible" in proc.stdout
