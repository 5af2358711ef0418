/*  trainer.h (internal): the trainer's tensors, optimizer state and the activations a Float32
 *  training pass keeps for its backward pass. */
#ifndef UFORM_TRAIN_TRAINER_H
#define UFORM_TRAIN_TRAINER_H

#include "model/model.h"
#include "model/safetensors.h"
#include "uform/train.h"

/** One trained tensor: its Float32 working copy, where its master lives, gradient and moments. */
typedef struct uform_tensor_t {
    char name[uform_max_name_k];
    size_t rows, columns; /* vectors are rows x 1 */
    int factored;         /* matrices: R and C; vectors: one unfactored V in `row` */
    float *parameter;     /* what the pass computes with */
    uint16_t *master_bf16; /* the model's BF16 matrix, or NULL */
    float *master_f32;     /* the model's Float32 vector, or NULL */
    float *gradient, *first, *row, *column;
    int frozen;           /* outside the options' train_only parts: never updated */
} uform_tensor_t;

/** A block's trained tensors, by name or by kind (as uform_block_t). */
typedef union uform_block_tensors_t {
    struct {
        uform_tensor_t *attn_norm, *qkv, *out, *mlp_norm, *gate_up, *down;
    };
    uform_tensor_t *kinds[uform_block_kinds_k];
} uform_block_tensors_t;

/** MLM's masked media cells of one kind: their cells, true vectors and the head's predictions
 *  ([capacity, values]). */
typedef struct uform_reconstruction_t {
    size_t *cells, count, capacity;
    float *targets, *predictions;
} uform_reconstruction_t;

/** Per-thread scratch of one attention task: probabilities and their gradient. */
typedef struct uform_attention_scratch_t {
    float *probabilities, *gradient;
} uform_attention_scratch_t;

struct uform_trainer_t {
    uform_model_t *model;
    uform_train_options_t options;
    uform_tensor_t *tensors; /* every tensor the model carries, in the table's order */
    size_t tensors_count, steps;
    uform_tensor_t **by_index; /* [model->tensors_count]: the trained tensor of each table index, NULL if not carried */
    int has_gradients; /* the last uform_trainer_gradients succeeded and no step has used it yet */
    struct uform_train_cuda_t *cuda; /* the GPU's side (train/cuda.h) when options.device is CUDA, else NULL */
    int device_ahead;  /* CUDA: a step was submitted since the last sync, so the GPU's state is newer */
    uform_block_tensors_t *blocks;
#define UFORM_TRAINED_FIELD_(field, kind) uform_tensor_t *field; /* NULL when the model does not carry it */
    UFORM_NAMED_TENSORS(UFORM_TRAINED_FIELD_)
#undef UFORM_TRAINED_FIELD_

    size_t cells;   /* capacity */
    size_t longest; /* attention scratch holds segments up to this length */
    /* Activations, [depth] x [cells] x width as noted. */
    float *inputs;     /* [depth + 1][cells][d]: the residual stream entering each block, then leaving the last */
    float *scales1, *scales2; /* [depth][cells] inverse RMS of the two norms */
    float *qkv;        /* [depth][cells][3d], q and k rotated */
    float *attended;   /* [depth][cells][d], attention output before `out` */
    float *middle;     /* [depth][cells][d], the stream between attention and MLP */
    float *gate_up;    /* [depth][cells][8d] */
    float *hidden, *final_scales; /* [cells][d] final-normed h, [cells] */
    /* Backward scratch. */
    float *d_stream, *d_normed, *d_qkv, *d_gate_up, *d_hidden, *d_attended, *normed, *swiglu;
    /* Heads. */
    float *pooled, *pool_weights, *embeddings, *d_embeddings, *d_pooled; /* [cells][d], [cells][heads], [cells][E] */
    float *colbert_raw, *colbert, *d_colbert;                            /* [cells][128] */
    float *logits;                                                       /* [cells][258] at scored cells */
    float *update;                                                       /* Adafactor's U of one tensor */
    double *spectral; /* [E * E + 2 E]: TCR and Lipschitz's Gram matrix and vectors, when they are on */
    size_t *scored;                                                      /* [cells] scored cells */
    /* The compacted batch, and each media kind's cell vectors in cell order ([media_capacity, values]). */
    uint8_t *kinds;
    float *media[uform_media_kinds_k];
    size_t media_capacity[uform_media_kinds_k];
    /* MLM's masked media cells, by media index (kind - uform_cell_image_k). */
    uform_reconstruction_t reconstructions[uform_media_kinds_k];
    uint32_t *values;
    int32_t *positions, *targets;
    size_t *destinations;
    uform_span_t *spans;
    size_t active, segments;
    uform_attention_scratch_t *attention; /* one per pool thread */
    size_t attention_threads;
};

/** The trained tensor named `name` (SPEC.md section 7), or NULL. */
uform_tensor_t *uform_trainer_tensor(uform_trainer_t const *trainer, char const *name);

/** Loss and gradients of the compacted batch already in the trainer (see backward.c). */
uform_status_t uform_train_pass(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses);

/** MLM's masked cells of media `kind`: adds its mae head's bias (uform_media_info) to their predictions ([count, values],
 *  h head^T), returns the mean squared error against the targets, leaves its gradient in the
 *  predictions and adds the bias's (objectives.c). docs/images.md, docs/audio_video.md. */
double uform_objective_reconstruction(uform_trainer_t *trainer, uform_cell_kind_t kind);

/** The objectives on the heads' outputs: fill losses and d_embeddings / d_colbert / logits' gradient,
 *  and the gradients of siglip.scale and siglip.bias (objectives.c). */
void uform_objective_mlm(uform_trainer_t *trainer, uform_losses_t *losses);
void uform_objective_siglip(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses);
void uform_objective_rerank(uform_trainer_t *trainer, uform_batch_t const *batch, uform_losses_t *losses);
uform_status_t uform_objective_spectral(uform_trainer_t *trainer, uform_losses_t *losses);

#endif
