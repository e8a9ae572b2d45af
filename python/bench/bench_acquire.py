#!/usr/bin/env python3
"""acquire+release from Python, one thread: shmreg against a pure-Python
registry (a dict under a threading.Lock doing the same bookkeeping), and the
cost of a zero-copy array from a region (np.from_dlpack, memoryview), and a
guarded copy of 1 MiB out of a region (Region.read_into) against a numpy copy
of the same mapped bytes.

    python python/bench/bench_acquire.py [--seconds S] [--repeat N]

Needs the installed package (pip install .) and numpy. Prints a Markdown
table; docs/performance.md ("Python") has figures and how to read them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np

import shmreg


class DictRegion:
    __slots__ = ("key", "offset", "byte_size", "refs")

    def __init__(self, key: str, offset: int, byte_size: int) -> None:
        self.key, self.offset, self.byte_size, self.refs = key, offset, byte_size, 0


class DictRef:
    """What DictRegistry.acquire returns: one counted reference."""

    __slots__ = ("registry", "region", "offset", "byte_size")

    def __init__(self, registry: DictRegistry, region: DictRegion, offset: int, byte_size: int) -> None:
        self.registry, self.region, self.offset, self.byte_size = registry, region, offset, byte_size

    def release(self) -> None:
        region = self.region
        if region is not None:
            self.region = None
            with self.registry.lock:
                region.refs -= 1


class DictRegistry:
    """The registry a Python server writes itself: a dict of regions under one
    threading.Lock, a reference count per region, bounds checked on acquire."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.regions: dict[str, DictRegion] = {}

    def register(self, name: str, key: str, byte_size: int, offset: int = 0) -> None:
        with self.lock:
            if name in self.regions:
                raise KeyError(name)
            self.regions[name] = DictRegion(key, offset, byte_size)

    def acquire(self, name: str, offset: int, byte_size: int) -> DictRef:
        with self.lock:
            region = self.regions.get(name)
            if region is None:
                raise KeyError(name)
            if offset > region.byte_size or byte_size > region.byte_size - offset:
                raise IndexError(name)
            region.refs += 1
        return DictRef(self, region, offset, byte_size)


def rate(loop, seconds: float) -> float:
    """Operations per second of loop(n), which runs n operations."""
    n = 1000
    while True:  # calibrate: one batch takes about a tenth of the time
        t = time.perf_counter()
        loop(n)
        dt = time.perf_counter() - t
        if dt > seconds / 10:
            break
        n *= 2
    batches, done, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or batches < 3:
        loop(n)
        done += n
        batches += 1
    return done / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=1.0, help="per measurement (default 1)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per measurement; the best and the median are shown")
    args = ap.parse_args()

    key = f"/shmreg-bench-py-{os.getpid()}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, 1 << 20)
    os.close(fd)
    try:
        reg = shmreg.Registry(pin_policy="never")
        reg.register_system("input0", key, 1 << 20)
        baseline = DictRegistry()
        baseline.register("input0", key, 1 << 20)

        def shmreg_pairs(n: int) -> None:
            acquire = reg.acquire
            for _ in range(n):
                acquire("input0", 0, 4096).release()

        def shmreg_with(n: int) -> None:
            acquire = reg.acquire
            for _ in range(n):
                with acquire("input0", 0, 4096):
                    pass

        def dict_pairs(n: int) -> None:
            acquire = baseline.acquire
            for _ in range(n):
                acquire("input0", 0, 4096).release()

        region = reg.acquire("input0", 0, 4096)
        whole = reg.acquire("input0", 0, 1 << 20)
        mapped = np.frombuffer(whole, np.uint8)  # the same bytes, read in place
        out = np.empty(1 << 20, np.uint8)

        def read_into(n: int) -> None:
            copy = whole.read_into
            for _ in range(n):
                copy(out)

        def numpy_copy(n: int) -> None:
            for _ in range(n):
                np.copyto(out, mapped)

        def from_dlpack(n: int) -> None:
            f = np.from_dlpack
            for _ in range(n):
                f(region)

        def view(n: int) -> None:
            for _ in range(n):
                memoryview(region)

        def empty(n: int) -> None:
            for _ in range(n):
                pass

        cases = [
            ("shmreg: acquire(...).release()", shmreg_pairs),
            ("shmreg: with acquire(...):", shmreg_with),
            ("dict + threading.Lock: acquire(...).release()", dict_pairs),
            ("np.from_dlpack(region)", from_dlpack),
            ("memoryview(region)", view),
            ("region.read_into(1 MiB)", read_into),
            ("np.copyto(1 MiB of the mapping)", numpy_copy),
            ("empty loop", empty),
        ]
        results: dict[str, list[float]] = {}
        for r in range(args.repeat):
            for name, fn in cases if r % 2 == 0 else reversed(cases):
                results.setdefault(name, []).append(rate(fn, args.seconds))
        region.release()
        del mapped
        whole.release()
        reg.close()

        med = {name: statistics.median(v) for name, v in results.items()}
        best = {name: max(v) for name, v in results.items()}
        print(f"Python {'.'.join(map(str, os.sys.version_info[:3]))}, numpy {np.__version__}, "
              f"shmreg {shmreg.__version__}, {os.cpu_count()} CPUs, {args.repeat} x {args.seconds} s "
              f"per measurement, load average {os.getloadavg()[0]:.2f} at the end")
        print()
        # Best: the run least disturbed by other work on the machine (timeit's
        # advice for loops like these); median: the typical run.
        print("| measure | ns each, best | ns each, median | best less the empty loop |")
        print("| --- | ---: | ---: | ---: |")
        loop_ns = 1e9 / best["empty loop"]
        for name, _ in cases:
            if name == "empty loop":
                continue
            print(f"| {name} | {1e9 / best[name]:.0f} | {1e9 / med[name]:.0f} | {1e9 / best[name] - loop_ns:.0f} |")
        pair, base = "shmreg: acquire(...).release()", "dict + threading.Lock: acquire(...).release()"
        print()
        print(f"shmreg / dict+Lock: {best[pair] / best[base]:.2f}x best, {med[pair] / med[base]:.2f}x median "
              f"(target >= 3x); empty loop {loop_ns:.0f} ns an iteration")
        guarded, plain = "region.read_into(1 MiB)", "np.copyto(1 MiB of the mapping)"
        print(f"read_into / numpy copy of 1 MiB: {best[plain] / best[guarded]:.2f}x the time best, "
              f"{med[plain] / med[guarded]:.2f}x median (target <= 1.2x)")
    finally:
        os.unlink("/dev/shm" + key)


if __name__ == "__main__":
    main()
