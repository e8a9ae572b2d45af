"""The GPU model's kernel (server/src/models/yolo_kernel.cu), compiled
by g++ through the small CUDA stand-in of server/tests/support/
yolo_kernel_host/ and run on the CPU, against the numpy reference
(yolo_reference.py), bit for bit. Runs in CI, where there is no GPU: a change
to the kernel's indexing or arithmetic that the reference does not share fails
here, not first on the GPU machine (server/tests/gpu/test_gpu_model.py runs
the real thing there)."""
import os
import subprocess

import numpy as np
import pytest

from server_process import binary
from yolo_reference import ROWS, anchors, one_output_by_hand, random_images, reference, weights


@pytest.fixture(scope="module")
def kernel_on_cpu():
    """The server's build puts it next to $SERVER_BIN where it has a C++20 compiler."""
    path = os.path.join(os.path.dirname(binary()), "shmreg-server-yolo-kernel-host")
    if not os.access(path, os.X_OK):
        pytest.skip("the server was built without a C++ compiler: no yolo-kernel-host")
    return path


def run_on_cpu(exe, tmp_path, images, window):
    _, h, w = images.shape
    files = [str(tmp_path / n) for n in ("images.f16", "weights.f32", "out.f16")]
    images.tofile(files[0])
    np.ascontiguousarray(weights(window).T).tofile(files[1])  # the kernel's [taps][rows]
    subprocess.run([exe, str(h), str(w), str(window), *files], check=True, timeout=120)
    return np.fromfile(files[2], dtype=np.float16).reshape(ROWS, anchors(h, w))


def test_reference_against_one_output_by_hand():
    images = random_images((3, 64, 96), 1)
    out = reference(images, 3)
    assert out.shape == (ROWS, anchors(64, 96))
    n8, n16 = (64 // 8) * (96 // 8), (64 // 16) * (96 // 16)
    for r, stride, gy, gx, a in ((5, 8, 2, 7, 2 * 12 + 7), (83, 16, 3, 5, n8 + 3 * 6 + 5),
                                 (0, 32, 1, 2, n8 + n16 + 1 * 3 + 2)):
        assert out[r, a] == one_output_by_hand(images, 3, r, stride, gy, gx)


@pytest.mark.parametrize("shape, window", [((3, 64, 96), 3), ((3, 64, 96), 32),
                                           ((3, 96, 160), 4), ((3, 32, 32), 7),
                                           ((3, 32, 64), 64)])
def test_kernel_matches_the_reference(kernel_on_cpu, tmp_path, shape, window):
    images = random_images(shape, sum(shape) + window)
    got = run_on_cpu(kernel_on_cpu, tmp_path, images, window)
    want = reference(images, window)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
