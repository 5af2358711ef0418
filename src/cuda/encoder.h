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

/** The frontend tensors on the device. The media frontends add their tensors here and their cases
 *  to the two calls below, and nowhere else. */
typedef struct uform_cuda_frontend_t {
    uint16_t const *bytes;        /* embed.bytes [258, d], BF16 */
    uint16_t const *vision_patch; /* vision.patch [d, 1024], BF16; NULL: no vision frontend */
    float const *vision_bias;     /* vision.bias [d] */
} uform_cuda_frontend_t;

/** A pass's image cells on the device (cuda.h's image entries): `capacity` sizes every launch and
 *  product (0: no image cells, nothing launched), counts [2] (device) holds the live count and the
 *  rows' uform_media_dtype_t; cells [capacity] each live image cell's row of x, rows [capacity, 1024]
 *  its patch. The rest is scratch the frontend writes: patches, the BF16 operand the backward's
 *  product reads again; product and d_product, the product's output and the backward's operand. */
typedef struct uform_cuda_images_t {
    size_t capacity;
    uint32_t const *counts, *cells;
    void const *rows;
    uint16_t *patches;   /* [capacity, 1024] BF16 */
    float *product;      /* [capacity, width] Float32 */
    uint16_t *d_product; /* [capacity, width] BF16; the backward only */
    float *partials;     /* uform_cuda_image_bias_partials(capacity, width) floats; the backward only */
} uform_cuda_images_t;

/** The frontend tensors' gradients (Float32): embed.bytes and vision.bias added into, vision.patch
 *  written (as the step's weight products write theirs); vision's NULL without the frontend. */
typedef struct uform_cuda_frontend_gradients_t {
    float *bytes, *vision_patch, *vision_bias;
} uform_cuda_frontend_gradients_t;

/** x [cells, width] (Float32) = each cell's frontend vector: byte cells a row of embed.bytes (an
 *  image cell's value must name a row too, PAD, which the image case then overwrites), image cells
 *  vision.patch p + vision.bias with p rounded to BF16 and the product through cuBLASLt. `images`
 *  NULL or of capacity 0: bytes alone. */
uform_status_t uform_cuda_frontend_forward(uform_cuda_gemm_t *gemm, uform_cuda_frontend_t const *frontend,
                                           uform_cuda_images_t const *images, uint32_t const *values, size_t cells,
                                           size_t width, float *x, void *stream);
/** The frontend tensors' gradients from dL/dx [cells, width]: embed.bytes by the byte cells' order
 *  and offsets (uform_cuda_batch_finish's counting sort, which leaves image cells out), and with
 *  images d vision.patch = dY^T P (dY the image cells' rows of dL/dx in BF16) and d vision.bias +=
 *  the rows of dY's Float32 source: all deterministic. */
uform_status_t uform_cuda_frontend_backward(uform_cuda_gemm_t *gemm, uform_cuda_images_t const *images, float const *d_x,
                                            uint32_t const *order, uint32_t const *offsets, size_t cells, size_t width,
                                            float *partials, uform_cuda_frontend_gradients_t const *gradients,
                                            void *stream);

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

/** The mae head on the device (docs/images.md, "Masked image modelling"): `capacity` sizes every
 *  launch and product (0: nothing launched); counts [3] (device) the live image cells, the rows'
 *  uform_media_dtype_t and the masked patches; cells [capacity] each masked patch's cell, targets
 *  [capacity, 1024] its true pixels in that dtype. The rest is scratch the head writes. */
typedef struct uform_cuda_mae_t {
    size_t capacity;
    uint32_t const *counts, *cells;
    void const *targets;
    uint16_t const *head; /* mae.head [1024, d], BF16 */
    float const *bias;    /* mae.bias [1024] */
    float *head_grad;     /* written, as the step's weight products write theirs */
    float *bias_grad;     /* added into */
    uint16_t *gathered;   /* [capacity, d] BF16: the masked cells' rows of h */
    float *predictions;   /* [capacity, 1024] */
    uint16_t *d_predictions; /* [capacity, 1024] BF16 */
    float *d_gathered;    /* [capacity, d] */
    float *partials;      /* uform_cuda_mae_partials(capacity) floats */
} uform_cuda_mae_t;

/** The mae head forward and back from h [cells, width] (BF16, the final norm's output): p = h
 *  mae.head^T + mae.bias on each masked cell, loss [0] = the mean squared error against the true
 *  pixels, mae.head's and mae.bias's gradients, and dL/dh added into d_h [cells, width] (Float32)
 *  at the masked cells. */
uform_status_t uform_cuda_mae_head(uform_cuda_gemm_t *gemm, uform_cuda_mae_t const *mae, uint16_t const *h, size_t width,
                                   float *loss, float *d_h, void *stream);

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
