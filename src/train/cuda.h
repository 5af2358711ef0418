/*  cuda.h (internal): the trainer's GPU side (cuda.c), reached only through train.h's verbs; built
 *  with the CUDA backend (UFORM_HAVE_CUDA). This is where a later issue puts the gradient all-reduce
 *  and the global contrastive all-gather: between the step's backward and its optimizer, inside the
 *  step's graph (docs/design.md, "Collectives"). */
#ifndef UFORM_TRAIN_CUDA_H
#define UFORM_TRAIN_CUDA_H

#include "train/trainer.h"

typedef struct uform_train_cuda_t uform_train_cuda_t;

/** The step for `trainer`'s model and options (rows x cells / rows cells), with the model's weights
 *  and the trainer's moments copied up. */
uform_status_t uform_train_cuda_create(uform_trainer_t *trainer, size_t cells, uform_train_cuda_t **result);
/** Copies the model's weights and the trainer's moments up again (after uform_trainer_load_state). */
uform_status_t uform_train_cuda_upload(uform_train_cuda_t *cuda);
/** Fills the next slot from `batch` and launches its step at `learning_rate` as optimizer step `t`;
 *  `finished` is 1 when the step before it ended, with its losses. */
uform_status_t uform_train_cuda_submit(uform_train_cuda_t *cuda, uform_batch_t const *batch, double learning_rate, size_t t,
                                       int *finished, uform_losses_t *losses);
/** Waits for the step in flight (finished 1 and its losses, if any), then downloads the weights
 *  into the model and the moments into the trainer. */
uform_status_t uform_train_cuda_sync(uform_train_cuda_t *cuda, int *finished, uform_losses_t *losses);
void uform_train_cuda_close(uform_train_cuda_t *cuda);

#endif
