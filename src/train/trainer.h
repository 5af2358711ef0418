/*  trainer.h (internal): the trainer's tensors, optimizer state, the activations a Float32
 *  training pass keeps for its backward pass, and the world of ranks a pass simulates (world.c). */
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

/** The rows the ranks of a world exchange, every rank's in rank order: world segment
 *  `segment_offsets[r] + s` is rank r's segment s, world cell `cell_offsets[r] + c` its cell c. */
typedef struct uform_world_t {
    size_t ranks, anchors, candidates;      /* anchors and candidates summed over the ranks */
    size_t *segment_offsets, *cell_offsets; /* [ranks + 1] */
    size_t *anchor_offsets, *candidate_offsets; /* [ranks + 1]: each rank's first in the world's anchors and candidates */
    size_t most_anchors, most_segments;     /* the largest of one rank */
    float *embeddings, *d_embeddings;       /* [world segments][E]: every rank's e (the all-gather), and dL/de */
    float *colbert, *d_colbert;             /* [world cells][ColBERT width] (rerank) */
    float *d_gathered;                      /* the gathered rows' gradient summed over the ranks, before the scatter */
    uform_span_t *spans;                    /* [world segments], in world cells */
    uint32_t *candidates_list;              /* the gathered candidates, world segments rank by rank */
    uint32_t *band_anchors;                 /* one rank's anchors as world segments */
    uint8_t *band_labels;                   /* one rank's band: [its anchors][world candidates] */
    float *scratch;                         /* the band's or the spectral terms' rows */
    double *norms, *spectral;               /* their norms; Gram matrices and power vectors */
} uform_world_t;

/** One rank's rows of a pair objective's band: its anchors against every candidate of the world. */
typedef struct uform_band_t {
    float const *rows;         /* SigLIP: e [world segments][E]; rerank: ColBERT vectors [world cells][width] */
    uform_span_t const *spans; /* rerank: each world segment's cells in `rows` */
    uint32_t const *anchors;   /* world segments */
    size_t anchors_count;
    uint32_t const *candidates; /* world segments */
    size_t candidates_count;
    uint8_t const *labels;      /* [anchors][candidates] */
    float const *weights;       /* [anchors] each anchor's row scale, or NULL for 1 */
    double normalizer;          /* the world's anchors: the loss is a mean over every rank's */
    float *d_anchors;           /* rows' gradient of the anchors (the rank's own) */
    float *d_candidates;        /* rows' gradient of the gathered candidates (summed over the ranks) */
} uform_band_t;

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
    size_t ranks;          /* the world of the pass in flight: MLM's loss is each rank's mean, averaged over them */
    uform_world_t world;   /* carved from world_memory for each pass */
    void *world_memory;
    size_t world_capacity; /* bytes */
};

/** The trained tensor named `name` (SPEC.md section 7), or NULL. */
uform_tensor_t *uform_trainer_tensor(uform_trainer_t const *trainer, char const *name);

/** Checks `batch` (errors begin with `verb`) and compacts it into the trainer for a pass (trainer.c). */
uform_status_t uform_trainer_check_batch(uform_trainer_t *trainer, uform_batch_t const *batch, char const *verb);

/** Loss and gradients of a world of `ranks` batches, each rank's parameter gradients added into the
 *  trainer's (world.c; uform_trainer_gradients is its world of one). Errors begin with `verb`. */
uform_status_t uform_train_world(uform_trainer_t *trainer, uform_batch_t const *batches, size_t ranks,
                                 uform_losses_t *losses, char const *verb);

/** The forward pass of the compacted batch: the encoder, then the pooled embeddings (contrastive,
 *  TCR, Lipschitz) and the ColBERT vectors (rerank) the objectives read (backward.c). */
void uform_train_forward(uform_trainer_t *trainer);
/** The backward pass after uform_train_forward: MLM's head and loss (the rank's own, in `losses`),
 *  then from d_embeddings and d_colbert, which the caller fills, through the heads and the blocks,
 *  adding into every parameter's gradient (backward.c). */
void uform_train_backward(uform_trainer_t *trainer, uform_losses_t *losses);

/** MLM's masked cells of media `kind`: adds its mae head's bias (uform_media_info) to their predictions ([count, values],
 *  h head^T), returns the mean squared error against the targets, leaves its gradient in the
 *  predictions and adds the bias's (objectives.c). docs/images.md, docs/audio_video.md. */
double uform_objective_reconstruction(uform_trainer_t *trainer, uform_cell_kind_t kind);

/** MLM on the logits of the scored cells: fills losses->mlm, leaves the logits' gradient in place (objectives.c). */
void uform_objective_mlm(uform_trainer_t *trainer, uform_losses_t *losses);
/** A band of Matryoshka SigLIP or of the ranked sigmoid: adds the rows' gradients and siglip.scale's
 *  and siglip.bias's, returns the band's share of the loss (objectives.c). SigLIP's `scratch` holds
 *  (anchors + candidates) x 2 E floats and `norms` anchors + candidates doubles. */
double uform_objective_siglip(uform_trainer_t *trainer, uform_band_t const *band, float *scratch, double *norms);
double uform_objective_rerank(uform_trainer_t *trainer, uform_band_t const *band);
/** TCR and Lipschitz over the world's embeddings, adding their gradient to the world's d_embeddings (objectives.c). */
uform_status_t uform_objective_spectral(uform_trainer_t *trainer, uform_world_t *world, uform_losses_t *losses);

#endif
