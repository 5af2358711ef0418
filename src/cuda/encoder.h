/*  encoder.h (internal): the pieces of the encoder that the training step (step.c) and GPU
 *  inference (forward.c) both run, so that inference is the step's forward and not a mirror of it:
 *  the frontend stage by cell kind, and one block of SPEC.md section 2. Host C over the kernels of
 *  cuda.h; every entry returns a status as cuda.h's do (the failed kernel's message noted) and
 *  launches on `stream` without waiting. */
#ifndef UFORM_CUDA_ENCODER_H
#define UFORM_CUDA_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda.h"
#include "cuda/cudnn_attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The frontend tensors on the device. Bytes are the one case so far; the media frontends add
 *  their tensors here and their cases to the two calls below, and nowhere else. */
typedef struct uform_cuda_frontend_t {
    uint16_t const *bytes; /* embed.bytes [258, d], BF16 */
} uform_cuda_frontend_t;

/** x [cells, width] (Float32) = each cell's frontend vector. */
uform_status_t uform_cuda_frontend_forward(uform_cuda_frontend_t const *frontend, uint32_t const *values, size_t cells,
                                           size_t width, float *x, void *stream);
/** The frontend tensors' gradients from dL/dx [cells, width]: embed.bytes by the cells' byte order
 *  and offsets (uform_cuda_batch_finish's counting sort), deterministically. */
uform_status_t uform_cuda_frontend_backward(float const *d_x, uint32_t const *order, uint32_t const *offsets, size_t cells,
                                            size_t width, float *partials, float *d_bytes, void *stream);

/** One block's weights on the device: BF16 matrices, Float32 norm gains. */
typedef struct uform_cuda_block_weights_t {
    float const *attn_norm, *mlp_norm;
    uint16_t const *qkv, *out, *gate_up, *down;
} uform_cuda_block_weights_t;

/** What a block's forward writes. Inference, which keeps nothing, may give one buffer for both
 *  norms' outputs and one for both scales. */
typedef struct uform_cuda_block_buffers_t {
    uint16_t *normed1, *qkv, *attended, *normed2, *gate_up, *hidden; /* BF16 */
    float *scales1, *log_sums, *middle, *scales2;                    /* Float32 */
} uform_cuda_block_buffers_t;

/** The block: x -> middle = x + attention, then (when `x_next` is not NULL) x_next = middle + MLP.
 *  Attention runs cuDNN's plan when `cudnn` is not NULL, else attention.cu's kernels over `spans`
 *  and `segment_of`, and not at all when `keep_attention` (the buffers hold its output already). */
uform_status_t uform_cuda_block_forward(uform_cuda_gemm_t *gemm, uform_cudnn_attention_t *cudnn,
                                        uform_cuda_block_weights_t const *w, uform_cuda_block_buffers_t const *a,
                                        float const *x, float const *rotations, uint32_t const *spans,
                                        uint32_t const *segment_of, size_t cells, size_t width, int keep_attention,
                                        float *x_next, void *stream);

#ifdef __cplusplus
}
#endif
#endif
