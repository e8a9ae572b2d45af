#!/usr/bin/env python3
"""The host<->device link's pinned bandwidth, measured as BASELINES.md's
"Physical limits" row was: 1 GiB cudaMemcpyAsync from (to) page-locked host
memory (cudaMallocHost), timed with CUDA events, median of 7; H2D alone,
D2H alone, and both at once (one stream each, timed from the first start
to the last end). Prints one JSON object (GB/s, 1e9 bytes a second):

    {"device": "...", "bytes": N, "repeats": 7,
     "h2d_gbs": ..., "d2h_gbs": ..., "both_gbs": ...}

and, given the sizes of one inference's input and output (--input-bytes,
--output-bytes), the inferences a second the link allows: each inference
needs its input up and its output down, and with both directions busy at
once a second of link time moves at most both_gbs, so the limit is
1 / max(in / h2d, out / d2h, (in + out) / both).
Given those sizes it also times 1 GiB up and, at once, as much down as one
inference's output is to its input ("mix_infer_s": the inferences' worth
that moves a second). That is the link carrying the seed's mix itself,
where the limit above is computed from equal halves.

Beside it, the same H2D and D2H copies from (to) a POSIX shared memory
object page-locked with cudaHostRegister, the way the server pins a
client's region ("reg_h2d_gbs", "reg_d2h_gbs"): pages the kernel placed
one by one rather than the driver's own allocation, so any cost of that
shows here.

--transfer times one inference's trip instead, as a system region's
request takes it at concurrency 1: --input-bytes up, then --output-bytes
down, on one stream, pinned host memory to the device and back, median of
--repeats: {"h2d_us": ..., "d2h_us": ..., "transfer_us": ...}
(light_model_cost.py reads it).

Uses CuPy (the GPU machine's image has it); exit 2 without it or a device.
Usage: python3 pcie_bandwidth.py [--device 0] [--mib 1024] [--repeats 7]
         [--input-bytes 1474560 --output-bytes 846720] [--transfer]
"""
import argparse
import json
import statistics
import sys


def limit_infer_s(bw, in_bytes, out_bytes):
    """Inferences a second the link allows (bw: GB/s of h2d, d2h, both)."""
    seconds = max(in_bytes / (bw["h2d_gbs"] * 1e9), out_bytes / (bw["d2h_gbs"] * 1e9),
                  (in_bytes + out_bytes) / (bw["both_gbs"] * 1e9))
    return 1.0 / seconds


def registered_shm(nbytes):
    """A written POSIX shm mapping of nbytes, page-locked as the server's
    pin does (cudaHostRegisterPortable); (pointer, release)."""
    import ctypes
    import cupy as cp
    from multiprocessing import shared_memory
    shm = shared_memory.SharedMemory(create=True, size=nbytes)
    ptr = ctypes.addressof(ctypes.c_char.from_buffer(shm.buf))
    ctypes.memset(ptr, 1, nbytes)  # written: every page populated before the pin
    cp.cuda.runtime.hostRegister(ptr, nbytes, 1)  # cudaHostRegisterPortable

    def release():
        cp.cuda.runtime.hostUnregister(ptr)
        shm.close()
        shm.unlink()
    return ptr, release


def timed(cp, copies):
    """Seconds from the first copy's start to the last one's end; copies:
    (dst, src, size, kind, stream), each queued on its stream in order."""
    events = []
    for dst, src, size, kind, stream in copies:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        cp.cuda.runtime.memcpyAsync(dst, src, size, kind, stream.ptr)
        end.record(stream)
        events.append((start, end))
    for _, end in events:
        end.synchronize()
    first = events[0][0]
    return max(cp.cuda.get_elapsed_time(first, end) for _, end in events) / 1e3


def transfer(device, in_bytes, out_bytes, repeats):
    """One inference's trip over the link, as the server makes it for a
    system region at concurrency 1: in_bytes up, then out_bytes down, on one
    stream, between page-locked host memory (cudaMallocHost) and device
    buffers; microseconds, the median of repeats (after one of warm-up),
    for each copy alone and for the two in a row."""
    import cupy as cp
    rt = cp.cuda.runtime
    with cp.cuda.Device(device):
        h_in, h_out = cp.cuda.alloc_pinned_memory(in_bytes), cp.cuda.alloc_pinned_memory(out_bytes)
        d_in, d_out = cp.cuda.alloc(in_bytes), cp.cuda.alloc(out_bytes)
        stream = cp.cuda.Stream(non_blocking=True)
        up = (d_in.ptr, h_in.ptr, in_bytes, rt.memcpyHostToDevice, stream)
        down = (h_out.ptr, d_out.ptr, out_bytes, rt.memcpyDeviceToHost, stream)
        result = {}
        for name, copies in (("h2d_us", [up]), ("d2h_us", [down]), ("transfer_us", [up, down])):
            timed(cp, copies)
            seconds = statistics.median(timed(cp, copies) for _ in range(repeats))
            result[name] = round(seconds * 1e6, 1)
        props = rt.getDeviceProperties(device)
        name = props["name"]
        result["device"] = name.decode() if isinstance(name, bytes) else str(name)
    return result


def measure(device, nbytes, repeats, in_bytes=0, out_bytes=0):
    import cupy as cp
    rt = cp.cuda.runtime
    with cp.cuda.Device(device):
        h_up = cp.cuda.alloc_pinned_memory(nbytes)
        h_down = cp.cuda.alloc_pinned_memory(nbytes)
        d_up = cp.cuda.alloc(nbytes)
        d_down = cp.cuda.alloc(nbytes)
        s_up, s_down = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
        h2d, d2h = rt.memcpyHostToDevice, rt.memcpyDeviceToHost
        up = (d_up.ptr, h_up.ptr, nbytes, h2d, s_up)
        down = (h_down.ptr, d_down.ptr, nbytes, d2h, s_down)
        timed(cp, [up]), timed(cp, [down])  # warm-up: first-touch of the pinned pages
        result = {}
        for name, copies, moved in (("h2d_gbs", [up], nbytes), ("d2h_gbs", [down], nbytes),
                                    ("both_gbs", [up, down], 2 * nbytes)):
            seconds = statistics.median(timed(cp, copies) for _ in range(repeats))
            result[name] = round(moved / seconds / 1e9, 2)
        if in_bytes and out_bytes:
            # Both directions at once in one inference's proportions: what
            # the link moves when it carries the seed's mix rather than
            # equal halves (a transfer one way also costs the other way
            # some of its capacity, so both_gbs alone can flatter the mix).
            down_bytes = nbytes * out_bytes // in_bytes
            mix = [up, (h_down.ptr, d_down.ptr, down_bytes, d2h, s_down)]
            seconds = statistics.median(timed(cp, mix) for _ in range(repeats))
            result["mix_infer_s"] = round(nbytes / in_bytes / seconds, 1)
        reg_ptr, release = registered_shm(nbytes)
        try:
            reg_up = (d_up.ptr, reg_ptr, nbytes, h2d, s_up)
            reg_down = (reg_ptr, d_down.ptr, nbytes, d2h, s_down)
            timed(cp, [reg_up]), timed(cp, [reg_down])
            for name, copies in (("reg_h2d_gbs", [reg_up]), ("reg_d2h_gbs", [reg_down])):
                seconds = statistics.median(timed(cp, copies) for _ in range(repeats))
                result[name] = round(nbytes / seconds / 1e9, 2)
        finally:
            release()
        props = rt.getDeviceProperties(device)
        name = props["name"]
        result["device"] = name.decode() if isinstance(name, bytes) else str(name)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--input-bytes", type=int, default=0)
    ap.add_argument("--output-bytes", type=int, default=0)
    ap.add_argument("--transfer", action="store_true",
                    help="time one inference's copies (--input-bytes up, then --output-bytes "
                         "down) instead of the link's bandwidth")
    args = ap.parse_args()
    if args.transfer and not (args.input_bytes and args.output_bytes):
        ap.error("--transfer needs --input-bytes and --output-bytes")
    try:
        if args.transfer:
            result = transfer(args.device, args.input_bytes, args.output_bytes, args.repeats)
            result.update(input_bytes=args.input_bytes, output_bytes=args.output_bytes,
                          repeats=args.repeats)
            print(json.dumps(result))
            return 0
        result = measure(args.device, args.mib << 20, args.repeats, args.input_bytes,
                         args.output_bytes)
    except ImportError as e:
        print(json.dumps({"error": f"no CuPy: {e}"}))
        return 2
    except Exception as e:  # noqa: BLE001 - no device, no driver: said, not raised
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 2
    result.update(bytes=args.mib << 20, repeats=args.repeats)
    if args.input_bytes or args.output_bytes:
        result["limit_infer_s"] = round(limit_infer_s(result, args.input_bytes,
                                                      args.output_bytes), 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
