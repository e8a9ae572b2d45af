#!/usr/bin/env python3
"""How many of the seed's tensors the link moves a second, copied one by one
as the server copies them: cudaMemcpyAsync of 1,474,560 bytes up (H2D) and
846,720 bytes down (D2H) between page-locked host memory (cudaMallocHost)
and device buffers, round robin over 1, 2, 6 and 12 streams, up alone, down
alone and both at once (one of each per inference). pcie_bandwidth.py's
1 GiB copies give the link's peak; copies of this size also pay each
copy's fixed cost, and this is the rate they reach. Prints one line per
cell:

    up    streams  6:  33881 copies/s  50.0 GB/s

Uses CuPy; exit 2 without it or a device.
Usage: python3 copies_at_size.py [--copies 2400]
"""
import argparse
import sys
import time

IN_BYTES, OUT_BYTES = 1474560, 846720


def rate(cp, n_streams, direction, copies):
    """Inferences' copies a second for direction "up", "down" or "both"."""
    rt = cp.cuda.runtime
    host_in = cp.cuda.alloc_pinned_memory(IN_BYTES * n_streams)
    host_out = cp.cuda.alloc_pinned_memory(OUT_BYTES * n_streams)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    dev_in = [cp.cuda.alloc(IN_BYTES) for _ in range(n_streams)]
    dev_out = [cp.cuda.alloc(OUT_BYTES) for _ in range(n_streams)]

    def copy(n):
        for i in range(n):
            k = i % n_streams
            if direction in ("up", "both"):
                rt.memcpyAsync(dev_in[k].ptr, host_in.ptr + k * IN_BYTES, IN_BYTES,
                               rt.memcpyHostToDevice, streams[k].ptr)
            if direction in ("down", "both"):
                rt.memcpyAsync(host_out.ptr + k * OUT_BYTES, dev_out[k].ptr, OUT_BYTES,
                               rt.memcpyDeviceToHost, streams[k].ptr)
        for s in streams:
            s.synchronize()

    copy(60)  # warm-up
    t0 = time.perf_counter()
    copy(copies)
    return copies / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=2400)
    args = ap.parse_args()
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no CuPy, no device: said, not raised
        print(f"copies_at_size: no device: {type(e).__name__}: {e}")
        return 2
    for direction, nbytes in (("up", IN_BYTES), ("down", OUT_BYTES),
                              ("both", IN_BYTES + OUT_BYTES)):
        for n_streams in (1, 2, 6, 12):
            r = rate(cp, n_streams, direction, args.copies)
            print(f"{direction:5s} streams {n_streams:2d}: {r:7.0f} copies/s "
                  f"{r * nbytes / 1e9:5.1f} GB/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
