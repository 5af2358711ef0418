/*  frontend.h (internal): the frontend stage on the CPU, by cell kind (SPEC.md section 1): cells
 *  into the residual stream and, in training, the stream's gradient into the frontend's tensors.
 *  Bytes take a row of embed.bytes; media cells x = W p + b with their kind's tensors from the media
 *  table (uform_media_info, model/tensors.h): image patches (vision.patch, 1024 values), video tubes
 *  (video.tube, 1536), audio frames (audio.frame, 320). The fast path
 *  (cpu/forward.c) computes in the model's precision; the Float32 trainer (train/backward.c) on its
 *  own working copies, through its pooled product. */
#ifndef UFORM_CPU_FRONTEND_H
#define UFORM_CPU_FRONTEND_H

#include "model/model.h"

/** The cells a frontend stage reads: each one's kind and value, and the grid's media buffers. */
typedef struct uform_cells_t {
    uint8_t const *kinds;
    uint32_t const *values;
    uform_media_t const *media; /* [uform_media_kinds_k] */
} uform_cells_t;

/** The fast path: rows first.. of `x` ([cells, d]) for cells [first, first + count), at most a tile
 *  (uform_tile_rows_k) of them, with `scratch` the calling thread's. */
void uform_frontend_forward(uform_model_t const *model, uform_cells_t const *cells, size_t first, size_t count, float *x,
                            uform_scratch_t *scratch);

/** C [m, n] = op(A) op(B) + beta C, the trainer's pooled product (`context` its trainer). */
typedef void uform_frontend_gemm_t(void *context, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                                   float const *a, size_t a_stride, float const *b, size_t b_stride, float beta, float *c,
                                   size_t c_stride);

/** The trainer's side, by media index (kind - uform_cell_image_k): its Float32 tensors and
 *  gradients (NULL where the model does not carry the part), product, and `media` (each kind's
 *  cells' vectors in cell order, [cells of the kind, values], from uform_frontend_gather). */
typedef struct uform_frontend_trainer_t {
    float const *weights[uform_media_kinds_k], *biases[uform_media_kinds_k];
    float *d_bytes, *d_weights[uform_media_kinds_k], *d_biases[uform_media_kinds_k];
    uform_frontend_gemm_t *gemm;
    void *context;
    float *media[uform_media_kinds_k];
} uform_frontend_trainer_t;

/** The number of cells of `kind` among cells [0, count), for sizing a gather. */
size_t uform_frontend_count(uform_cells_t const *cells, size_t count, uform_cell_kind_t kind);
/** Copies the vectors of the cells of media `kind` among cells [0, count), widened, into `rows` in
 *  cell order (the trainer's own copy: the caller's media buffers need not outlive the batch's check). */
void uform_frontend_gather(uform_cells_t const *cells, size_t count, uform_cell_kind_t kind, float *rows);
/** The trainer's forward into `x` ([count, d]) for cells [0, count). */
void uform_frontend_train_forward(uform_model_t const *model, uform_cells_t const *cells, size_t count,
                                  uform_frontend_trainer_t const *trainer, float *x);
/** Adds each cell's row of `d_x` ([count, d], dL/dx of the stream entering the first block) into the
 *  gradients of the frontend tensors that made it, in cell order (sums repeat bitwise). */
void uform_frontend_train_backward(uform_model_t const *model, uform_cells_t const *cells, size_t count, float const *d_x,
                                   uform_frontend_trainer_t const *trainer);

#endif
