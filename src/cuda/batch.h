/*  batch.h (internal): filling a step slot (step.h) from a training batch, the same for uform_base,
 *  the library's GPU trainer, the benchmark and the parity test. */
#ifndef UFORM_CUDA_BATCH_H
#define UFORM_CUDA_BATCH_H

#include <stddef.h>

#include "cuda/step.h"
#include "uform/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Writes `batch` into `slot` (a step's pinned batch, uform_cuda_step_batch) for a step made with
 *  `config`: values (PAD on padding), targets, positions, each cell's span and the spans, and for
 *  the pair objectives anchors, candidates, labels and counts. Then uform_cuda_batch_finish. Returns
 *  uform_ok_k, or a status with the problem in `error` (a shape the step was not made for, a cell
 *  the step has no frontend for, a target or anchor out of range). */
uform_status_t uform_cuda_batch_fill(uform_cuda_batch_t const *slot, uform_cuda_step_config_t const *config,
                                     uform_batch_t const *batch, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif
#endif
