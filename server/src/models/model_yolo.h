/*
 * yolo: a built-in FP16 detector-shaped GPU workload (the seed benchmark of
 * docs/performance.md serves it): FP16 input "images" [3,H,W], FP16 output
 * "output0" [84,A], no batching, H and W multiples of 32, and A = the anchors
 * of the three YOLO scales (strides 8, 16 and 32): 5040 for 3x384x640.
 *
 * What it computes is real but simple, and exactly reproducible on a CPU.
 * Anchor a at stride s sits on grid cell (gy, gx). Its window is K x K
 * samples (K = --yolo-window) per channel, at rows
 *     y(ky) = clamp(gy*s - s/2 + (ky*2*s)/K, 0, H-1)      (integer division)
 * and the columns x(kx) likewise. Tap t = (c*K + ky)*K + kx. Then
 *     output0[r][a] = half( sum over t, in order, of  w(r,t) * images[c][y][x] )
 * with w(r,t) = ((7r + 13t) mod 17 - 8) / 64, every product and every partial
 * sum rounded to float32 (no fused multiply-add), the sum rounded to FP16 at
 * the end (round to nearest even). server/tests/support/yolo_reference.py computes
 * the same in numpy; server/tests/gpu/test_gpu_model.py compares the model
 * with it bit for bit on a GPU, test_yolo_kernel_on_cpu.py the kernel's
 * source run on a CPU.
 *
 * The anchors are ordered stride 8 first, then 16, then 32, each row-major
 * over its grid.
 */
#ifndef SERVER_MODEL_YOLO_H
#define SERVER_MODEL_YOLO_H

#include "models/gpu_instances.h"
#include "models/model_ops.h"

#define YOLO_ROWS 84

extern const model_ops yolo_ops;

/* Start the model's GPU instances (gpu_instances.h) and stop them. */
void yolo_start(const gpu_instances_config *cfg);
void yolo_stop(void);

#endif
