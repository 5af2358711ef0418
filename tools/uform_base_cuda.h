/*  uform_base_cuda.h: what uform_base.c calls of uform_base_cuda.c, the masked-byte, contrastive or
 *  rerank step on the GPU fed the batches of the CPU path (built where the CUDA backend is, UFORM_HAVE_CUDA). */
#ifndef UFORM_TOOLS_BASE_CUDA_H
#define UFORM_TOOLS_BASE_CUDA_H

#include <stddef.h>

#include "uform/train.h"

typedef struct uform_base_cuda_t uform_base_cuda_t;
uform_status_t uform_base_cuda_available(char *device, size_t capacity);
/* `anchors` and `candidates`: the batcher's capacities (uform_batcher_stats), which size the contrastive and rerank steps;
 * `recompute` as --recompute: 0 keeps every activation, 1 replays each block, 2 replays each block but its attention. */
uform_status_t uform_base_cuda_create(uform_trainer_t *trainer, size_t rows, size_t columns, size_t anchors,
                                      size_t candidates, int recompute, uform_base_cuda_t **result);
/* Launches the batch as the next step; `finished` tells whether the step before it ended, with `losses`
 * (total and parts; `scored` not set). */
uform_status_t uform_base_cuda_step(uform_base_cuda_t *cuda, uform_batch_t const *batch, double learning_rate,
                                    int *finished, uform_losses_t *losses);
uform_status_t uform_base_cuda_drain(uform_base_cuda_t *cuda, int *finished, uform_losses_t *losses);
uform_status_t uform_base_cuda_download(uform_base_cuda_t *cuda);
void uform_base_cuda_close(uform_base_cuda_t *cuda);

#endif
