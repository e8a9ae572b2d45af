"""The data path of each system-region tensor of the GPU model 'yolo', on a
GPU machine, told by /metrics' shmreg_tensor_path_total and by -v:

- a pinned region is read and written by DMA where it lies (dma_in_place),
  including an output region its client never wrote (holes: pinned all the
  same under the default --pin auto);
- an unpinned one (--pin never) crosses the CPU once per direction: the
  library's guarded copy into or out of the instance's pinned staging
  buffer (staged_copy), never a second copy (no cpu_copy);
- a client that truncates its object gets a 4xx for its request (unpinned:
  the guarded copy faults) and the server serves the next request; a pinned
  region's pages are held by the pin, so its DMA stays safe.

The output of every successful run is checked bit for bit against
yolo_reference.py. $SERVER_BIN names the binary (server/tests/gpu/run.sh
sets it). Without CuPy or a visible device every test is skipped.
"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
sys.path.insert(0, HERE)
from prometheus_text import scrape  # noqa: E402
from yolo_reference import ROWS, random_images, reference  # noqa: E402
# Skips this module too where CuPy or a device is missing.
from test_gpu_model import (SEED_SHAPE, WINDOW, Regions, infer_binary, released,  # noqa: E402
                            start, stop, system_round_trip)
from test_cuda_infer import call, shm_params  # noqa: E402

OUT_BYTES = ROWS * 5040 * 2  # the seed benchmark's output: FP16 [84, 5040]
PATHS = ("dma_in_place", "staged_copy", "cpu_copy", "device_copy", "remote_copy")


def path_totals(server):
    """{(path, direction): (tensors, bytes)} now."""
    _, metrics = scrape(server)
    return {(p, d): (metrics.value("shmreg_tensor_path_total", path=p, direction=d),
                     metrics.value("shmreg_tensor_path_bytes_total", path=p, direction=d))
            for p in PATHS for d in ("input", "output")}


def moved(before, after):
    """The paths that moved between two readings: {(path, direction): (tensors, bytes)}."""
    return {k: (after[k][0] - before[k][0], after[k][1] - before[k][1])
            for k in after if after[k] != before[k]}


def pinned_bytes(server):
    return scrape(server)[1].value("shmreg_pinned_bytes")


def truncate(name):
    """What a hostile client does: shrink its object under the server's mapping."""
    os.truncate(f"/dev/shm/{name}", 0)


def assert_alive(server, regions):
    """The server answers, and a fresh inference through its regions is right."""
    assert call(server, "GET", "v2/health/live")[0] == 200
    system_round_trip(server, regions, 99)


@pytest.fixture
def pinned_server():
    s = start()  # --pin auto, the default
    r = Regions(s)
    yield s, r
    r.close()
    stop(s)


@pytest.fixture
def unpinned_server():
    s = start("-v", "--pin", "never")
    r = Regions(s)
    yield s, r
    r.close()
    stop(s)


def test_output_region_never_written_is_pinned_and_written_by_dma(pinned_server):
    """perf_analyzer's case: the output region is created and registered, never
    written by its client. Under --pin auto both regions are pinned, and both
    tensors go by DMA where they lie."""
    server, regions = pinned_server
    images = random_images(SEED_SHAPE, 11)
    name_in, mem_in = regions.system_region("in", images.nbytes)
    mem_in.buf[:images.nbytes] = images.tobytes()
    name_out, mem_out = regions.system_region("holes", OUT_BYTES)  # no page touched
    assert pinned_bytes(server) >= images.nbytes + OUT_BYTES
    before = path_totals(server)
    status, header, raw = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                       shm_params(name_out, OUT_BYTES))
    assert status == 200 and raw is None, header
    got = np.frombuffer(bytes(mem_out.buf[:OUT_BYTES]), dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))
    assert moved(before, path_totals(server)) == {
        ("dma_in_place", "input"): (1, images.nbytes),
        ("dma_in_place", "output"): (1, OUT_BYTES)}
    released(server)


def test_unpinned_regions_take_one_staged_copy_each_way(unpinned_server):
    """--pin never: one guarded copy into the staging buffer for the input,
    one out of it for the output; the bytes are right; -v says so."""
    server, regions = unpinned_server
    images = random_images(SEED_SHAPE, 12)
    name_in, mem_in = regions.system_region("in", images.nbytes)
    name_out, mem_out = regions.system_region("out", OUT_BYTES + 64)
    mem_in.buf[:images.nbytes] = images.tobytes()
    mem_out.buf[:] = b"\xee" * len(mem_out.buf)
    assert pinned_bytes(server) == 0
    before = path_totals(server)
    status, header, raw = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                       shm_params(name_out, OUT_BYTES, 64))
    assert status == 200 and raw is None, header
    got = np.frombuffer(bytes(mem_out.buf[64:64 + OUT_BYTES]), dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))
    assert bytes(mem_out.buf[:64]) == b"\xee" * 64  # only the output's window is written
    assert moved(before, path_totals(server)) == {
        ("staged_copy", "input"): (1, images.nbytes),
        ("staged_copy", "output"): (1, OUT_BYTES)}
    regions.close()
    _, err = server.stop()
    assert (f"infer 'yolo' tensor paths: input 'images' staged_copy {images.nbytes} bytes; "
            f"output 'output0' staged_copy {OUT_BYTES} bytes") in err, err[-2000:]


def test_inline_input_and_staged_output_mix(unpinned_server):
    """An inline input (the body: not counted) with an unpinned output region:
    only the output is counted, as staged_copy."""
    server, regions = unpinned_server
    images = random_images(SEED_SHAPE, 13)
    name_out, mem_out = regions.system_region("out", OUT_BYTES)
    before = path_totals(server)
    status, header, _ = infer_binary(server, images, None, shm_params(name_out, OUT_BYTES))
    assert status == 200, header
    got = np.frombuffer(bytes(mem_out.buf[:OUT_BYTES]), dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))
    assert moved(before, path_totals(server)) == {("staged_copy", "output"): (1, OUT_BYTES)}


@pytest.mark.parametrize("which", ["input", "output"])
def test_truncating_client_on_the_staged_path_gets_400(unpinned_server, which):
    """Unpinned: the guarded copy meets the lost pages, the request gets 400
    naming the tensor, nothing is counted, and the server goes on."""
    server, regions = unpinned_server
    images = random_images(SEED_SHAPE, 14)
    name_in, mem_in = regions.system_region("in", images.nbytes)
    name_out, _ = regions.system_region("out", OUT_BYTES)
    mem_in.buf[:images.nbytes] = images.tobytes()
    truncate(name_in if which == "input" else name_out)
    before = path_totals(server)
    status, header, _ = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                     shm_params(name_out, OUT_BYTES))
    assert status == 400, header
    tensor = "images" if which == "input" else "output0"
    assert f"{which} '{tensor}'" in header["error"], header
    assert moved(before, path_totals(server)) == {}
    released(server)
    assert_alive(server, regions)


@pytest.mark.parametrize("which", ["input", "output"])
def test_truncating_client_on_the_dma_path_leaves_the_server_alive(pinned_server, which):
    """Pinned: the pin holds the pages, so DMA reads (writes) them whatever
    the client did to its object; the request gets an answer that is not a
    server error, and the server serves the next one."""
    server, regions = pinned_server
    images = random_images(SEED_SHAPE, 15)
    name_in, mem_in = regions.system_region("in", images.nbytes)
    name_out, _ = regions.system_region("out", OUT_BYTES)
    mem_in.buf[:images.nbytes] = images.tobytes()
    assert pinned_bytes(server) >= images.nbytes + OUT_BYTES
    truncate(name_in if which == "input" else name_out)
    status, header, _ = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                     shm_params(name_out, OUT_BYTES))
    assert status == 200 or 400 <= status < 500, (status, header)
    released(server)
    assert_alive(server, regions)
