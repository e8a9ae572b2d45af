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
--server-memory adds the server's memory and order: a POSIX shm object
pinned with cudaHostRegister (a slice per stream, or one slice for all as
perf_analyzer's requests share one region), copies alone, chained with a
kernel on each stream (up, kernel, down), and split as the server runs
them (every copy up on one stream, kernels on their own, every copy down
on another).

--server-order prints one figure, as JSON: the server's order (up, kernel,
down on each of 6 streams) over one registered slice, the best of three
passes; seed_benchmark.py runs it for its chain_limit row.

--sm-pull asks whether the copy engine's fixed cost per copy can be left
out: each input is pulled up by a kernel whose threads read the registered
pages over the link (16 bytes a load, four loads in flight a thread) for
several grid sizes, alone, beside copies down, and in the server's order
(pull, kernel, copy down), beside the copy engine's figures from the same
slice.

Usage: python3 copies_at_size.py [--copies 2400] [--server-memory | --server-order | --sm-pull]
"""
import argparse
import json
import sys
import time

IN_BYTES, OUT_BYTES = 1474560, 846720
CAN_USE_HOST_POINTER = 91  # cudaDevAttrCanUseHostPointerForRegisteredMem

# Copies n 16-byte words from src to dst; each thread keeps four loads in
# flight, since a load from host memory waits a round trip over the link.
PULL_SOURCE = r"""
extern "C" __global__ void pull(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride)
        dst[i] = src[i];
}
"""


def host_buffers(cp, memory, n_streams):
    """(input pointer of stream k, output pointer of stream k, release) for
    memory "malloc_host" (cudaMallocHost, a buffer per stream),
    "registered" (a POSIX shm object pinned with cudaHostRegister as the
    server pins a client's region, a slice per stream) or "registered_one"
    (every stream reads and writes the same slice, as perf_analyzer's one
    input and one output region are used by all its requests)."""
    if memory == "malloc_host":
        h_in = cp.cuda.alloc_pinned_memory(IN_BYTES * n_streams)
        h_out = cp.cuda.alloc_pinned_memory(OUT_BYTES * n_streams)
        return (lambda k: h_in.ptr + k * IN_BYTES, lambda k: h_out.ptr + k * OUT_BYTES,
                lambda: None)
    from pcie_bandwidth import registered_shm
    slices = 1 if memory == "registered_one" else n_streams
    ptr, release = registered_shm((IN_BYTES + OUT_BYTES) * slices)
    out_base = ptr + IN_BYTES * slices
    return (lambda k: ptr + (k % slices) * IN_BYTES,
            lambda k: out_base + (k % slices) * OUT_BYTES, release)


def rate(cp, n_streams, direction, copies, memory="malloc_host", grid=None):
    """Inferences' copies a second for direction "up", "down", "both",
    "chain" (up, a kernel that reads the input and writes the output, down,
    all on stream k) or "split" (the same steps, with every copy up on one
    stream and every copy down on another). With grid (blocks, threads),
    every copy up is a pull kernel of that grid instead of the copy
    engine's."""
    rt = cp.cuda.runtime
    host_in, host_out, release = host_buffers(cp, memory, n_streams)
    copy_in = copy_up(cp, grid)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    dev_in = [cp.empty(IN_BYTES, dtype=cp.uint8) for _ in range(n_streams)]
    dev_out = [cp.empty(OUT_BYTES, dtype=cp.uint8) for _ in range(n_streams)]

    def split(n):
        """Copies up on one stream, kernels on stream k once their input is
        up, copies down on another stream once their kernel is done (the
        order of the per-device copy streams that were tried in the server
        and not kept)."""
        up, down = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
        for i in range(n):
            k = i % n_streams
            copy_in(dev_in[k].data.ptr, host_in(k), up)
            streams[k].wait_event(up.record())
            with streams[k]:
                cp.add(dev_in[k][:OUT_BYTES], 1, out=dev_out[k])
            down.wait_event(streams[k].record())
            rt.memcpyAsync(host_out(k), dev_out[k].data.ptr, OUT_BYTES, rt.memcpyDeviceToHost,
                           down.ptr)
        down.synchronize()

    def copy(n):
        if direction == "split":
            return split(n)
        for i in range(n):
            k = i % n_streams
            if direction in ("up", "both", "chain"):
                copy_in(dev_in[k].data.ptr, host_in(k), streams[k])
            if direction == "chain":
                with streams[k]:
                    cp.add(dev_in[k][:OUT_BYTES], 1, out=dev_out[k])
            if direction in ("down", "both", "chain"):
                rt.memcpyAsync(host_out(k), dev_out[k].data.ptr, OUT_BYTES,
                               rt.memcpyDeviceToHost, streams[k].ptr)
        for s in streams:
            s.synchronize()

    try:
        copy(60)  # warm-up
        t0 = time.perf_counter()
        copy(copies)
        return copies / (time.perf_counter() - t0)
    finally:
        release()


def copy_up(cp, grid):
    """up(device pointer, host pointer, stream): the copy engine's
    cudaMemcpyAsync, or with grid (blocks, threads) the pull kernel reading
    the host pages at their own address (where the device can)."""
    rt = cp.cuda.runtime
    if grid is None:
        return lambda dst, src, s: rt.memcpyAsync(dst, src, IN_BYTES, rt.memcpyHostToDevice, s.ptr)
    import numpy as np
    if not rt.deviceGetAttribute(CAN_USE_HOST_POINTER, cp.cuda.Device().id):
        sys.exit("copies_at_size: this device cannot read registered host memory at its "
                 "host address: no --sm-pull")
    kernel = cp.RawKernel(PULL_SOURCE, "pull")
    words = np.uint64(IN_BYTES // 16)

    def up(dst, src, stream):
        with stream:
            kernel((grid[0],), (grid[1],), (np.uint64(src), np.uint64(dst), words))
    return up


def sm_pull(cp, copies):
    """--sm-pull: the pull kernel against the copy engine, from one
    registered slice over 6 streams, up alone, beside copies down and in the
    server's order."""
    grids = [None, (16, 256), (32, 512), (66, 512), (132, 512), (132, 1024), (264, 512)]
    for direction in ("up", "both", "chain"):
        for grid in grids:
            r = rate(cp, 6, direction, copies, "registered_one", grid)
            what = "copy engine" if grid is None else f"pull {grid[0]}x{grid[1]}"
            nbytes = IN_BYTES if direction == "up" else IN_BYTES + OUT_BYTES
            print(f"{direction:5s} {what:16s} streams  6: {r:7.0f} copies/s "
                  f"{r * nbytes / 1e9:5.1f} GB/s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=2400)
    ap.add_argument("--server-order", action="store_true",
                    help="only the server's order over one registered slice (6 streams), "
                         "the best of three passes, printed as one JSON line "
                         "{\"chain_infer_s\": N} (seed_benchmark.py's chain_limit row)")
    ap.add_argument("--server-memory", action="store_true",
                    help="also the server's memory and order: registered shm, one slice per "
                         "stream or one for all, copies alone, chained with a kernel, and "
                         "split over two copy streams")
    ap.add_argument("--sm-pull", action="store_true",
                    help="only the input pulled up by a kernel reading the registered pages, "
                         "for several grids, against the copy engine")
    args = ap.parse_args()
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - no CuPy, no device: said, not raised
        print(f"copies_at_size: no device: {type(e).__name__}: {e}")
        return 2
    if args.sm_pull:
        sm_pull(cp, args.copies)
        return 0
    if args.server_order:
        best = max(rate(cp, 6, "chain", args.copies, "registered_one") for _ in range(3))
        print(json.dumps({"chain_infer_s": round(best, 1)}))
        return 0
    cells = [(d, n, s, "malloc_host") for d, n in (("up", IN_BYTES), ("down", OUT_BYTES),
                                                  ("both", IN_BYTES + OUT_BYTES))
             for s in (1, 2, 6, 12)]
    if args.server_memory:
        cells += [(d, IN_BYTES + OUT_BYTES, s, m) for m in ("malloc_host", "registered",
                                                             "registered_one")
                  for d in ("both", "chain", "split") for s in (6, 24)
                  if not (m == "malloc_host" and d == "both")]
    for direction, nbytes, n_streams, memory in cells:
        r = rate(cp, n_streams, direction, args.copies, memory)
        print(f"{direction:5s} {memory:14s} streams {n_streams:2d}: {r:7.0f} copies/s "
              f"{r * nbytes / 1e9:5.1f} GB/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
