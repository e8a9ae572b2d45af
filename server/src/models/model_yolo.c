/* The yolo model's shapes, weights and run (model_yolo.h says what it computes). */
#include "models/model_yolo.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gpu_instances.h"
#include "models/models.h"

static unsigned window_; /* K of model_yolo.h, from --yolo-window */

static size_t anchors(int64_t h, int64_t w)
{
    return (size_t)((h / 8) * (w / 8) + (h / 16) * (w / 16) + (h / 32) * (w / 32));
}

static int check_input(const tensor *in, const char *model_name, char *err, size_t errlen)
{
    int64_t h = in->shape[1], w = in->shape[2];
    if (h <= 0 || w <= 0 || h % 32 || w % 32 || h > 32768 || w > 32768) {
        char got[128];
        snprintf(err, errlen, "input '%s' of model '%s' must be [3,H,W] with H and W positive "
                              "multiples of 32 (at most 32768), got %s", in->name, model_name,
                 tensor_shape_string(in->shape, in->ndims, got, sizeof got));
        return -1;
    }
    return 0;
}

static void describe(const tensor *const *in, tensor *out)
{
    size_t a = anchors(in[0]->shape[1], in[0]->shape[2]);
    out[0] = (tensor){.name = "output0", .datatype = "FP16", .ndims = 2,
                      .shape = {YOLO_ROWS, (int64_t)a}, .byte_size = YOLO_ROWS * a * 2};
}

static server_status ready(char *err, size_t errlen)
{
    char why[400];
    server_status st = gpu_instances_ready(why, sizeof why);
    if (st)
        snprintf(err, errlen, "model 'yolo' is not available: %s", why);
    return st;
}

static server_status run(const tensor *const *in, tensor *out, model_phases *ph, char *err,
                         size_t errlen)
{
    gpu_job job = {.in = in[0], .out = &out[0], .height = (int)in[0]->shape[1],
                   .width = (int)in[0]->shape[2]};
    server_status st = gpu_instances_run(&job, ph, err, errlen);
    if (st == STATUS_NOT_READY) /* not available: say which model */
        return ready(err, errlen) ? STATUS_NOT_READY : st;
    return st;
}

/* A started run's end, from the GPU scheduler. */
static void run_ended(gpu_pending *g, server_status st)
{
    model_run_ended((model_pending *)((char *)g - offsetof(model_pending, gpu)), st);
}

static server_status start(const tensor *const *in, tensor *out, model_pending *p)
{
    p->gpu = (gpu_pending){.job = {.in = in[0], .out = &out[0], .height = (int)in[0]->shape[1],
                                   .width = (int)in[0]->shape[2]},
                           .ph = &p->ph, .err = p->err, .errlen = p->errlen, .done = run_ended};
    return gpu_instances_submit(&p->gpu);
}

/* Triton's config fields for where the instances run, and the window. */
static void config(model_config *cfg)
{
    unsigned n_devices = 0;
    unsigned n = gpu_instances_placement(cfg->group.gpus, MODEL_MAX_GPUS, &n_devices);
    /* replaces the CPU group */
    cfg->group.count = n_devices ? (int)(n / n_devices) : 0;
    cfg->group.kind = "KIND_GPU";
    cfg->group.lists_gpus = 1;
    cfg->group.n_gpus = n_devices;
    cfg->parameters[0].key = "window";
    snprintf(cfg->parameters[0].string_value, sizeof cfg->parameters[0].string_value, "%u",
             window_);
    cfg->n_parameters = 1;
}

const model_ops yolo_ops = {
    .check_input = check_input,
    .describe = describe,
    .ready = ready,
    .run = run,
    .start = start,
    .config = config,
};

void yolo_start(const gpu_instances_config *cfg)
{
    window_ = cfg->window;
    size_t taps = 3 * (size_t)window_ * window_;
    float *w = malloc(taps * YOLO_ROWS * sizeof *w);
    if (w) {
        /* w(r,t) of model_yolo.h, laid out [t][r] so that a thread reads the
         * weights of its rows for one tap together. Exact in float32. */
        for (size_t t = 0; t < taps; t++)
            for (size_t r = 0; r < YOLO_ROWS; r++)
                w[t * YOLO_ROWS + r] = (float)((long)((7 * r + 13 * t) % 17) - 8) / 64.0f;
    }
    gpu_instances_start(cfg, w, w ? taps * YOLO_ROWS : 0);
    free(w);
}

void yolo_stop(void)
{
    gpu_instances_stop();
}
