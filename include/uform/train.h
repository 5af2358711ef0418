/*  train.h: training (SPEC.md sections 4 and 5) on the CPU in Float32, or on one GPU as CUDA
 *  graphs. A trainer wraps a model: it computes the loss and every parameter's gradient for a
 *  batch, and applies Adafactor with a first moment, updating the model's weights in place (BF16
 *  matrices, Float32 norm scales and vectors). Gradients and optimizer state are readable by
 *  tensor name, for tests and tools. On the GPU the weights and moments live on the device between
 *  uform_trainer_sync calls, which bring them back into the model and the trainer.
 */
#ifndef UFORM_TRAIN_H
#define UFORM_TRAIN_H

#include "uform/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum uform_objective_t {
    uform_objective_mlm_k = 0,         /* span-masked byte modelling: mean cross-entropy at masked cells */
    uform_objective_contrastive_k = 1, /* Matryoshka SigLIP over the pooled embeddings */
    uform_objective_rerank_k = 2,      /* ranked sigmoid over MaxSim of ColBERT vectors */
} uform_objective_t;

typedef struct uform_train_options_t {
    uform_objective_t objective;
    double learning_rate;    /* peak; 0: the tier's */
    size_t warmup_steps;     /* linear warm-up from 0 to the peak */
    size_t total_steps;      /* cosine decay from the peak to 0 at this step (0: constant after warm-up) */
    double beta1, beta2;     /* 0.9, 0.999 */
    double clip;             /* update clipping threshold, 1.0 */
    double weight_decay;     /* 0 */
    double tcr_lambda;       /* total coding rate weight, 0 = off */
    double lipschitz_lambda; /* spectral penalty weight, 0 = off */
    size_t lipschitz_iterations; /* power-iteration steps, 8 */
    /* Where the steps run. CUDA: the calling thread's current GPU, one CUDA graph a step over a fixed
     * batch shape; the CPU's activations are not taken. */
    uform_device_t device;       /* uform_device_cpu_k (the default) or uform_device_cuda_k */
    size_t rows;                 /* cuda: rows per batch; each holds cells / rows columns */
    size_t anchors, candidates;  /* cuda, contrastive and rerank: the most anchors and candidates a batch lists */
    int recompute;               /* cuda: 0 keeps every activation, 1 (default) replays each block's forward in the
                                  * backward pass, 2 replays it but keeps its attention output */
    /* The parts that train, comma-separated part names ("rerank,siglip"; SPEC.md section 7's prefixes:
     * bytes, vision, video, audio, encoder, pool, rerank, mlm, siglip, mae); the rest stay as loaded,
     * their moments too. NULL or "": every part. Read at uform_trainer_create only. */
    char const *train_only;
} uform_train_options_t;

/** Fills the defaults: SPEC.md's (objective MLM, the tier's learning rate, no warm-up or decay), the CPU. */
UFORM_API void uform_train_options_default(uform_train_options_t *options);

/** A training batch: a grid plus what the objective scores, all caller-owned.
 *  - MLM: `targets[cell]` is the original byte id (0..255) at a masked cell, -1 elsewhere; the
 *    grid holds MASK (256) there.
 *  - Contrastive and rerank: segments are numbered as `uform_forward` numbers them (row by row,
 *    in order of first cell). `anchors` lists the anchor segments, `candidates` the candidate
 *    segments (positives, hard negatives and every other item), and `labels[a * candidates_count
 *    + c]` is 1 when candidate c is a positive of anchor a, else 0. `anchor_weights`, when set,
 *    scales each anchor's row of the pair loss (a mixture source's `loss_weight`; NULL: all 1). */
typedef struct uform_batch_t {
    uform_grid_t grid;
    int32_t const *targets;      /* [rows * columns] or NULL */
    uint32_t const *anchors;     /* [anchors_count] */
    size_t anchors_count;
    uint32_t const *candidates;  /* [candidates_count] */
    size_t candidates_count;
    uint8_t const *labels;       /* [anchors_count * candidates_count] */
    float const *anchor_weights; /* [anchors_count] finite and >= 0, or NULL for 1 each */
} uform_batch_t;

/** The loss of one batch and its parts (each already weighted, summing to `total`). */
typedef struct uform_losses_t {
    double total;
    double mlm;          /* mean cross-entropy over masked cells */
    double siglip;       /* Matryoshka SigLIP, mean over widths */
    double rerank;       /* ranked sigmoid */
    double tcr;          /* -lambda R */
    double lipschitz;    /* lambda sigma_max */
    double reconstruction; /* MLM: mean squared error of the masked media cells, each kind's summed (docs/images.md, audio_video.md) */
    size_t scored;       /* masked byte cells (MLM) or anchors (pairs); CPU steps only */
    size_t reconstructed; /* MLM: masked media cells (patches, tubes, frames); CPU steps only */
    size_t step;         /* the optimizer step (1-based) they are of; 0 for uform_trainer_gradients */
} uform_losses_t;

typedef struct uform_trainer_t uform_trainer_t;

/** Creates a trainer over `model` (which it uses, not owns; keep the model open longer).
 *  Takes the memory a batch of `cells` cells needs, on the options' device: for CUDA the step
 *  (rows x cells / rows cells), a copy of the weights and of the optimizer state on the GPU.
 *  uform_unsupported_k in a build without the CUDA backend, where no GPU is usable, or for what the
 *  GPU step lacks (TCR or Lipschitz with the MLM objective). */
UFORM_API uform_status_t uform_trainer_create(uform_model_t *model, uform_train_options_t const *options, size_t cells,
                                    uform_trainer_t **trainer);
UFORM_API void uform_trainer_close(uform_trainer_t *trainer);

/** Loss and every parameter's gradient (Float32) for the batch; the weights do not change. CPU only. */
UFORM_API uform_status_t uform_trainer_gradients(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses);
/** The loss and gradients of a world of `ranks` data-parallel ranks, each with its own batch
 *  (`batches[ranks]`), simulated one rank at a time on the CPU with the gathers and reductions a
 *  multi-GPU run makes (docs/training.md, "World N on the CPU"): contrastive and rerank score each
 *  rank's anchors against every rank's candidates (a mean over the world's anchors); TCR's Gram is
 *  the world's; MLM and Lipschitz are each rank's own, averaged over the ranks. The parameter
 *  gradients are the world's (the ranks' summed), ready for uform_trainer_apply; `losses` are the
 *  world's. A world of one is uform_trainer_gradients. Each batch fits the trainer's cells. CPU
 *  only: a CUDA trainer gets uform_unsupported_k. */
UFORM_API uform_status_t uform_trainer_gradients_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                                 uform_losses_t *losses);
/** uform_trainer_gradients_world, then uform_trainer_apply: one step of the world. CPU only. */
UFORM_API uform_status_t uform_trainer_step_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                            uform_losses_t *losses);
/** One Adafactor step with the gradients of the last `uform_trainer_gradients` (or `_world`) call. CPU only. */
UFORM_API uform_status_t uform_trainer_apply(uform_trainer_t *trainer);
/** Both: gradients, then the step; the losses of this batch. On CUDA: uform_trainer_submit, then
 *  uform_trainer_sync (which waits for the step and brings the weights back: slower than submitting). */
UFORM_API uform_status_t uform_trainer_step(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses);
/** Starts a step on the batch. CUDA: the step runs on the GPU while the caller prepares the next
 *  batch, and `finished` is 1 when the step submitted before it has ended, with that step's losses
 *  (their `step` says which). CPU: the step runs now; `finished` is 1 with its own losses. */
UFORM_API uform_status_t uform_trainer_submit(uform_trainer_t *trainer, uform_batch_t const *batch, int *finished,
                                    uform_losses_t *losses);
/** Waits for the step in flight (`finished` 1 with its losses if there was one) and brings the GPU's
 *  weights and optimizer state back into the model and the trainer, so that they can be read, saved
 *  or run. A no-op on the CPU (finished 0). Reading or saving a GPU trainer's state before it fails. */
UFORM_API uform_status_t uform_trainer_sync(uform_trainer_t *trainer, int *finished, uform_losses_t *losses);
/** Steps taken so far, and the learning rate the next step will use. */
UFORM_API size_t uform_trainer_steps(uform_trainer_t const *trainer);
UFORM_API double uform_trainer_learning_rate(uform_trainer_t const *trainer);

typedef enum uform_slot_t {
    uform_slot_parameter_k = 0, /* the weight as the forward pass sees it, widened to Float32 */
    uform_slot_gradient_k = 1,
    uform_slot_first_moment_k = 2,  /* M */
    uform_slot_row_moment_k = 3,    /* R (matrices) or the unfactored V (vectors) */
    uform_slot_column_moment_k = 4, /* C (matrices only) */
} uform_slot_t;

/** Copies one tensor's slot by SPEC.md name ("blocks.0.qkv", "siglip.scale", ...) into `values`,
 *  which holds `count` floats: a parameter's or gradient's element count, R's rows, C's columns. */
UFORM_API uform_status_t uform_trainer_read(uform_trainer_t const *trainer, char const *name, uform_slot_t slot, float *values,
                                  size_t count);

/** Writes / reads the optimizer state (moments, step) as a SafeTensors file, atomically. */
UFORM_API uform_status_t uform_trainer_save_state(uform_trainer_t const *trainer, char const *path);
UFORM_API uform_status_t uform_trainer_load_state(uform_trainer_t *trainer, char const *path);

/** Saves a training checkpoint: `directory/step-NNNNNNNN/` holding model.safetensors, README.md,
 *  optimizer.safetensors and trainer.json (the caller's `state_json`, e.g. the data position),
 *  then points `directory/latest` at it with an atomic rename, and removes older step folders
 *  beyond the newest `keep`. An interrupted save leaves `latest` on the previous whole checkpoint. */
UFORM_API uform_status_t uform_checkpoint_save(uform_model_t const *model, uform_trainer_t const *trainer, char const *directory,
                                     char const *command, char const *state_json, size_t keep);
/** Resolves `directory` (a step folder, a checkpoint folder, or an output folder with `latest`)
 *  to the folder holding model.safetensors. */
UFORM_API uform_status_t uform_checkpoint_resolve(char const *directory, char *resolved, size_t capacity);

#ifdef __cplusplus
}
#endif
#endif
