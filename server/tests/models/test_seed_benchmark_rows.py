"""The row logic of server/bench/gpu/seed_benchmark.py, without a GPU: at
the highest concurrency system and CUDA take turns for BENCH_PASSES passes
and a row is the pass of median infer/s; a failed pass fails its row; the
outputs list the rows in a fixed order with every pass and the ratio to
CUDA pass by pass. perf_analyzer is replaced by a function that hands out
known figures."""
import csv
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "gpu"))
import seed_benchmark as sb  # noqa: E402

LINK = {"h2d_gbs": 55.3, "d2h_gbs": 55.3, "both_gbs": 99.6, "limit_infer_s": 37500.0,
        "mix_infer_s": 34500.0, "chain_infer_s": 29500.0, "device": "test", "repeats": 7}


def fake_measure(figures, order):
    """A measure() that gives each (run, concurrency) its next figure and
    records the order."""
    def measure(row, server, pa, env, interval_ms):
        order.append((row["run"], row["concurrency"]))
        infer_s = figures[(row["run"], row["concurrency"])].pop(0)
        row.update(infer_s=float(infer_s), cpu_us_per_infer=300.0, pinned_bytes_mid=2321280,
                   paths="input dma_in_place 1; output dma_in_place 1")
    return measure


def test_runs_take_turns_at_the_top_concurrency_and_rows_are_medians(monkeypatch):
    figures = {("system_pinned", 1): [900], ("cuda", 1): [800],
               ("system_pinned", 100): [28000, 25000, 29000],
               ("cuda", 100): [36000, 30000, 33000]}
    order = []
    monkeypatch.setattr(sb, "measure", fake_measure(figures, order))
    rows = list(sb.measure_runs(None, ["system_pinned", "cuda"], 1, "1", [1, 100], "pa", {},
                                1000, 3))
    assert order == [("system_pinned", 1), ("cuda", 1)] + \
        [("system_pinned", 100), ("cuda", 100)] * 3
    by_key = {(r["run"], r["concurrency"]): r for r in rows}
    assert by_key[("system_pinned", 100)]["infer_s"] == 28000
    assert by_key[("system_pinned", 100)]["passes_infer_s"] == "28000 / 25000 / 29000"
    assert by_key[("cuda", 100)]["infer_s"] == 33000
    assert "passes_infer_s" not in by_key[("system_pinned", 1)]


def test_of_an_even_number_of_passes_the_row_is_the_slower_middle_one():
    passes = [{"infer_s": v, "error": ""} for v in (28000.0, 25000.0, 29000.0, 26000.0)]
    row = sb.median_pass(passes)
    assert row["infer_s"] == 26000.0
    assert row["pass_figures"] == [28000.0, 25000.0, 29000.0, 26000.0]


def test_a_failed_pass_fails_its_row():
    passes = [{"infer_s": 28000.0, "error": ""}, {"error": "perf_analyzer exit 1: lost"},
              {"infer_s": 29000.0, "error": ""}]
    row = sb.median_pass(passes)
    assert row["error"] == "perf_analyzer exit 1: lost"
    assert row["passes_infer_s"] == "28000 / failed / 29000"


def test_outputs_sorted_with_each_pass_and_ratios_pass_by_pass(monkeypatch, tmp_path):
    """The targets' table says met or missed from the exact ratio: 28,000
    of a 37,500 limit is 0.7467, which two digits would print as 0.75; and
    the bound the link sets on system ÷ CUDA, 37,500 over 35,000."""
    monkeypatch.setattr(sb, "OUT", str(tmp_path))
    rows = sb.limit_rows(LINK, [1, 100])
    made = {"system_pinned": [28000.0, 25000.0, 29000.0], "cuda": [35000.0, 31250.0, 36250.0]}
    for run in ("cuda", "system_pinned"):  # measured in the other order
        passes = [{"gpus": 1, "window": "1", "run": run, "concurrency": 100, "error": "",
                   "infer_s": v, "cpu_us_per_infer": 300.0} for v in made[run]]
        rows.append(sb.median_pass(passes))
    table = sb.write_outputs(rows, LINK)
    with open(tmp_path / "seed-benchmark.csv") as f:
        written = list(csv.DictReader(f))
    assert [r["run"] for r in written if r["run"] not in sb.LIMITS] == ["system_pinned", "cuda"]
    assert written[-1]["passes_infer_s"] == "35000 / 31250 / 36250"
    assert "| window 1: system (default flags) ÷ CUDA infer/s | 0.800 | ≥ 0.80 | met |" in table
    assert "| window 1: system ÷ CUDA, pass by pass | 0.800 / 0.800 / 0.800 |" in table
    # A CUDA path faster than the link would cap system ÷ CUDA below 1.
    assert "| window 1: the most system ÷ CUDA can be (PCIe limit ÷ CUDA infer/s) | 1.071 |" \
        in table
    assert "| window 1: system (default flags) ÷ PCIe limit | 0.747 | ≥ 0.75 | missed |" \
        in table
    assert "| window 1: server CPU per inference, system ÷ CUDA | 1.000 | ≤ 1.3 | met |" \
        in table


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
