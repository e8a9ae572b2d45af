"""The GPU model 'yolo' computed in numpy: what
server/src/models/model_yolo.h defines, float32 products and sums in
the kernel's order and one rounding to float16 at the end, so that a
comparison with the kernel's output can be bit for bit.
server/tests/gpu/test_gpu_model.py compares it with the model on a GPU,
test_yolo_kernel_on_cpu.py with the kernel's source run on a CPU."""
import numpy as np

ROWS = 84


def anchors(h, w):
    return sum((h // s) * (w // s) for s in (8, 16, 32))


def weights(window):
    """w(r,t) of model_yolo.h, [rows, taps] float32 (exact)."""
    t = np.arange(3 * window * window)
    w = ((7 * np.arange(ROWS)[:, None] + 13 * t[None, :]) % 17) - 8
    return w.astype(np.float32) / np.float32(64)


def reference(images, window):
    """output0 for images (float16 [3,H,W]): float16 [84, anchors]."""
    _, h, w = images.shape
    x = images.astype(np.float32)
    taps = 3 * window * window
    wt = weights(window)
    k = np.arange(window)
    columns = []  # per stride: the samples, [taps, anchors of the stride]
    for s in (8, 16, 32):
        gy, gx = np.arange(h // s), np.arange(w // s)
        ys = np.clip(gy[:, None] * s - s // 2 + (k[None, :] * 2 * s) // window, 0, h - 1)
        xs = np.clip(gx[:, None] * s - s // 2 + (k[None, :] * 2 * s) // window, 0, w - 1)
        # [c, gy, ky, gx, kx] -> [c, ky, kx, gy, gx] -> [taps, anchors]
        p = x[:, ys[:, :, None, None], xs[None, None, :, :]]
        columns.append(p.transpose(0, 2, 4, 1, 3).reshape(taps, -1))
    samples = np.concatenate(columns, axis=1)
    acc = np.zeros((ROWS, samples.shape[1]), dtype=np.float32)
    for i in range(taps):  # the kernel's order; numpy never fuses the multiply-add
        acc += wt[:, i:i + 1] * samples[i:i + 1, :]
    return acc.astype(np.float16)


def random_images(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-4, 4, size=shape).astype(np.float16)


def one_output_by_hand(images, window, r, stride, gy, gx):
    """output0[r] of the anchor at (gy, gx) of stride, one tap at a time."""
    _, h, w = images.shape
    acc, t = np.float32(0), 0
    for c in range(3):
        for ky in range(window):
            y = min(max(gy * stride - stride // 2 + (ky * 2 * stride) // window, 0), h - 1)
            for kx in range(window):
                xx = min(max(gx * stride - stride // 2 + (kx * 2 * stride) // window, 0), w - 1)
                wgt = np.float32(((7 * r + 13 * t) % 17) - 8) / np.float32(64)
                acc = np.float32(acc + np.float32(wgt * np.float32(images[c, y, xx])))
                t += 1
    return np.float16(acc)
