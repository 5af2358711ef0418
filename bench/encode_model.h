/*  encode_model.h: what the encode benchmarks (encode.c, encode_images.c) share: a monotonic clock, and
 *  the model they time, opened with its threads (0: the library's default), precision and device.
 *  Header-only: each benchmark is one program. */
#ifndef UFORM_BENCH_ENCODE_MODEL_H
#define UFORM_BENCH_ENCODE_MODEL_H

#include <string.h>
#include <time.h>

#include "uform/uform.h"

static inline double uform_bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/** Opens the checkpoint at `path` with its products in `precision`, `device` "cpu" or "cuda" (the caller
 *  has refused anything else). `*model` is set either way: close it. */
static inline uform_status_t uform_bench_open(char const *path, size_t threads, uform_precision_t precision,
                                              char const *device, uform_model_t **model) {
    uform_status_t status = uform_model_open(path, model);
    if (status == uform_ok_k && threads) status = uform_model_set_threads(*model, threads);
    if (status == uform_ok_k) status = uform_model_set_precision(*model, precision);
    if (status == uform_ok_k && !strcmp(device, "cuda")) status = uform_model_set_device(*model, uform_device_cuda_k);
    return status;
}

#endif
