#!/usr/bin/env python3
"""Draw seed_benchmark.py's CSV: infer/s against concurrency for system
shared memory pinned (the default), unpinned (--pin never) and CUDA shared
memory, with the PCIe limit and the copies' own rate in the server's order
as lines; one panel per yolo window (the light kernel, --yolo-window 1,
first: the one where the data path sets the pace). One GPU's rows only.

Usage: python3 plot_seed_benchmark.py build/gpu-out/seed-benchmark.csv
         [-o docs/seed-benchmark.png]
Needs matplotlib (pip install matplotlib); nothing else from the GPU run.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_benchmark import LIMITS  # noqa: E402  (the limits' names, said once)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SERIES = (("system_pinned", "system shm, --pin auto (default)", "tab:blue", "o"),
          ("system_unpinned", "system shm, --pin never", "tab:orange", "s"),
          ("cuda", "CUDA shm", "tab:green", "^"))


# The limits drawn as lines: run name, label (seed_benchmark.py's), line style.
LIMIT_STYLES = {"pcie_limit": "--", "mix_limit": "-.", "chain_limit": ":"}
LIMIT_LINES = tuple((run, LIMITS[run][0], style) for run, style in LIMIT_STYLES.items())


def read(path):
    """{window: {run: [(concurrency, infer/s)]}} and {limit run: infer/s}."""
    data, limits = {}, {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["run"] in {name for name, _, _ in LIMIT_LINES}:
                if row["infer_s"]:
                    limits[row["run"]] = float(row["infer_s"])
                continue
            if row["gpus"] != "1" or row["error"] or not row["infer_s"]:
                continue
            data.setdefault(row["window"], {}).setdefault(row["run"], []).append(
                (int(row["concurrency"]), float(row["infer_s"])))
    return data, limits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "seed-benchmark.png"))
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, limits = read(args.csv)
    if not data:
        sys.exit(f"{args.csv}: no measured rows")
    windows = sorted(data, key=lambda w: (w != "1", w))
    fig, axes = plt.subplots(1, len(windows), figsize=(6 * len(windows), 4.5), squeeze=False)
    for ax, window in zip(axes[0], windows):
        for run, label, color, marker in SERIES:
            points = sorted(data[window].get(run, []))
            if points:
                ax.plot([c for c, _ in points], [v for _, v in points], marker=marker,
                        color=color, label=label)
        for run, label, style in LIMIT_LINES:
            if run in limits:
                ax.axhline(limits[run], color="black", linestyle=style,
                           label=f"{label} ({limits[run]:,.0f} infer/s)")
        ax.set_xscale("log")
        concurrencies = sorted({c for pts in data[window].values() for c, _ in pts})
        ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("concurrency (perf_analyzer --concurrency-range)")
        ax.set_ylabel("infer/s")
        ax.set_title("yolo, --yolo-window 1 (light kernel)" if window == "1"
                     else "yolo, the model's default window" if window == "default"
                     else f"yolo, --yolo-window {window}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("System vs CUDA shared memory on one GPU: -b 1, images 3x384x640 FP16 in, 84x5040 FP16 out, gRPC")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
