/*  step.h (internal): the training step on one GPU (masked bytes, or contrastive or rerank with the
 *  opt-in TCR and Lipschitz terms): forward, backward and Adafactor for every tensor, with all device
 *  memory taken at creation and the whole step captured once as a CUDA graph per upload slot. The
 *  host fills one slot's pinned batch while the other slot's step runs; the graph starts by copying
 *  its slot to the device. */
#ifndef UFORM_CUDA_STEP_H
#define UFORM_CUDA_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uform_cuda_step_t uform_cuda_step_t;

typedef enum uform_cuda_objective_t {
    uform_cuda_mlm_k = 0,         /* masked bytes: mlm.head and the fused cross-entropy */
    uform_cuda_contrastive_k = 1, /* the attention pool, pool.proj and Matryoshka SigLIP */
    uform_cuda_rerank_k = 2,      /* rerank.proj per cell, row normalization and the ranked sigmoid over MaxSim */
} uform_cuda_objective_t;

typedef struct uform_cuda_step_config_t {
    size_t width, depth; /* d and L; heads of 64 */
    size_t cells;        /* cells per step (rows x columns), fixed for the graph */
    uform_cuda_objective_t objective;
    /* Contrastive and rerank (and cuDNN attention): the segments capacity, fixed for the graph
     * (cuDNN: every batch lists exactly this many; contrastive and rerank: spans past a batch's own
     * have length 0); the anchors and candidates capacities; pool.proj's rows E (contrastive, and
     * rerank with TCR or Lipschitz); the Matryoshka widths (contrastive). */
    size_t segments, anchors, candidates, embedding_width;
    size_t widths[8], widths_count;
    /* Rerank: rerank.proj's rows, the ColBERT width; MaxSim's kernel is built for 128 (SPEC.md
     * section 3), so the step takes 128 alone. Its anchors (queries) and candidates (documents) are
     * distinct segments of at most 4096 cells each (longer ones would be cut: the caller refuses them). */
    size_t colbert_width;
    /* The media frontends, by kind (media [kind - uform_cell_image_k]: image, video, audio): how many
     * cells of that kind a batch may hold, which sizes its launches and products (src/train/cuda.c:
     * the cells, when the model carries the kind's weight and bias); 0: the step has no such frontend
     * and holds neither tensor. */
    size_t media[uform_media_kinds_k];
    /* Masked bytes with media, 1: that kind's masked vectors train its masked modelling head (mae,
     * mae_video, mae_audio; docs/images.md, docs/audio_video.md), as many as media [k]; 0: a batch
     * with a masked vector of that kind is refused. */
    int mae[uform_media_kinds_k];
    /* Contrastive or rerank, opt-in (0: off), as uform_train_options_t: the total coding rate and
     * Lipschitz weights over Z, the normalized E-wide pool embeddings of segments 0..counts[2]-1 (with
     * rerank the step then also holds and trains pool.query and pool.proj, as the CPU's trainer does),
     * and the power iteration's steps (0: 8, the CPU's default). */
    double tcr_lambda, lipschitz_lambda;
    size_t lipschitz_iterations;
    int recompute;       /* 1: blocks keep only their input; backward replays the forward */
    size_t kept_blocks;  /* with recompute: the last this many blocks keep their activations and are not
                          * replayed (memory to spare traded for time); depth or more is recompute = 0 */
    int keep_attention;  /* with recompute, 1: replayed blocks keep their attention output and log-sums, so
                          * the replay skips attention (2 bytes per cell and width, a block) */
    int tune;            /* on the first (eager) step, time the candidates of 1: cuBLASLt per shape, 2: cuDNN's attention, 3: both */
    int cudnn_attention; /* 1: cuDNN's fused attention (needs `segments` and `longest`; a UFORM_HAVE_CUDNN build) */
    size_t longest;      /* the longest segment, for cuDNN's plan */
    int nondeterministic; /* 1: cuDNN's attention backward adds dQ up with atomics: faster at long segments,
                           * but replays may differ in the last bits (0, the default: bitwise repeatable) */
    double beta1, beta2, clip, weight_decay;
} uform_cuda_step_config_t;

/** One media kind's cells in a batch slot: counts [3] holds their count, the rows'
 *  uform_media_dtype_t and the masked vectors' count, cells [count] each one's cell (ascending; its
 *  value is PAD, a row the byte frontend may read and the media frontend overwrites), rows its vector
 *  [count, values] in that dtype, packed (so that only the live rows go up; a masked cell's is the
 *  blank one it shows). With the kind's mae head, mae_cells [masked] each masked vector's cell
 *  (ascending) and mae_rows [masked, values] its true values, packed too. */
typedef struct uform_cuda_batch_media_t {
    uint32_t *counts, *cells, *mae_cells;
    void *rows, *mae_rows;
} uform_cuda_batch_media_t;

/** One upload slot's batch in pinned host memory, filled by the caller before uform_cuda_step_run. */
typedef struct uform_cuda_batch_t {
    uint32_t *values;     /* [cells] byte values 0..257, MASK = 256 where masked */
    int32_t *targets;     /* [cells] the original byte where scored, else -1 */
    int32_t *positions;   /* [cells, 3] M-RoPE coordinates */
    uint32_t *segment_of; /* [cells] */
    uint32_t *spans;      /* [segments, 2] first cell and length; every cell in the span segment_of names; in
                           * cell order for cuDNN's attention, else any order (contrastive and rerank: the
                           * scored segments first, as uform_forward numbers them) */
    uint32_t *order, *offsets; /* filled by uform_cuda_batch_finish */
    float *scalars;       /* [4] filled by uform_cuda_batch_finish: 1/scored, rate, 1 - b1^t, 1 - b2^t */
    /* Contrastive and rerank: anchor and candidate segments, counts [3] (live anchors, live candidates, and the
     * segments TCR and Lipschitz read: 0..counts[2]-1) and labels [live anchors x live candidates]
     * (row-major, 1: positive). */
    uint32_t *anchors, *candidates, *counts;
    uint8_t *labels;
    float *anchor_weights; /* [live anchors] each anchor's loss scale (1 without the batch's weights) */
    /* The media cells by kind (media [kind - uform_cell_image_k]), at most config.media [k] of each. */
    uform_cuda_batch_media_t media[uform_media_kinds_k];
} uform_cuda_batch_t;

typedef struct uform_cuda_tensor_t {
    char name[48];   /* checkpoint name (SPEC.md section 7) */
    size_t rows, columns;
    int is_matrix;   /* 1: BF16 master [rows, columns]; 0: Float32 vector [rows] */
    void *parameter; /* device */
    float *gradient; /* device, Float32 */
    /* Adafactor's state (device, Float32, zero at creation): R [rows] and C [columns] for a matrix,
     * the unfactored V [rows] for a vector (column_moment NULL), and M [rows x columns]. */
    float *row_moment, *column_moment, *first_moment;
    int frozen; /* set before the first step: no update (and no backward into the trunk when all of it is) */
} uform_cuda_tensor_t;

/** Returns uform_ok_k, or a status with a message in `error`: invalid_argument for a configuration
 *  the step does not take, out_of_memory, unsupported (cuDNN's attention in a build without it), or
 *  device (the failed CUDA, cuBLASLt or cuDNN call). `*step` is set either way: destroy it. */
uform_status_t uform_cuda_step_create(uform_cuda_step_t **step, uform_cuda_step_config_t const *config, char *error,
                                      size_t error_size);
void uform_cuda_step_destroy(uform_cuda_step_t *step);
uform_cuda_batch_t uform_cuda_step_batch(uform_cuda_step_t *step, int slot);
/** The configuration the step runs, as uform_cuda_step_create settled it (batch.h fills slots by it). */
uform_cuda_step_config_t const *uform_cuda_step_config(uform_cuda_step_t const *step);
/** Counts sort of the byte cells (media cells left out) for the embedding backward and the per-step
 *  scalars, for optimizer step t (1-based). */
void uform_cuda_batch_finish(uform_cuda_step_t *step, int slot, double learning_rate, size_t t);
/** Launches the step on `slot` (asynchronous). The first call runs eagerly, later ones replay graphs.
 *  This and the calls below return uform_ok_k, or out_of_memory or device with uform_cuda_step_error
 *  naming the call and the kernel that failed. */
uform_status_t uform_cuda_step_run(uform_cuda_step_t *step, int slot);
/** Waits for the last step launched on `slot`; then its batch may be refilled and its loss read. */
uform_status_t uform_cuda_step_wait(uform_cuda_step_t *step, int slot, float *loss);
/** The first failure's message: the call as written, then the failed kernel's, product's or CUDA call's
 *  noted message (cuda.h) with its error. */
char const *uform_cuda_step_error(uform_cuda_step_t const *step);
/** After uform_cuda_step_wait: that step's loss in parts: [0] the total, [1] the head's loss (masked
 *  bytes, SigLIP or the ranked sigmoid), [2] TCR (-lambda R) and [3] Lipschitz (lambda sigma_max), 0 where off;
 *  with a masked modelling head [2] is the masked vectors' reconstruction instead (summed over kinds). */
void uform_cuda_step_losses(uform_cuda_step_t const *step, int slot, float losses[4]);
/** The parameter tensors, in checkpoint order; `count` receives how many: embed.bytes, (with media
 *  each kind's weight and bias,) each block's six, final_norm, then the objective's heads: mlm.head (and
 *  each masked modelling head's two); or
 *  pool.query, pool.proj, siglip.scale, siglip.bias; or (pool.query, pool.proj with TCR or
 *  Lipschitz,) rerank.proj, siglip.scale, siglip.bias. */
uform_cuda_tensor_t *uform_cuda_step_tensors(uform_cuda_step_t *step, size_t *count);
/** Device bytes taken at creation: the whole footprint, since a step allocates nothing. */
size_t uform_cuda_step_device_bytes(uform_cuda_step_t const *step);
/** With cuDNN's attention, one line naming the plans it runs (timed ones after the first step); "" without. */
char const *uform_cuda_step_attention_plans(uform_cuda_step_t *step);
/** cuBLASLt's plans as uform_cuda_gemm_describe; returns how many split K. */
size_t uform_cuda_step_gemm_plans(uform_cuda_step_t const *step, char *text, size_t size);
/** Forward and backward only (no optimizer, no graph), eagerly on `slot`; for parity checks. */
uform_status_t uform_cuda_step_gradients(uform_cuda_step_t *step, int slot);

#ifdef __cplusplus
}
#endif
#endif
