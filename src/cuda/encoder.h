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

/** The frontend tensors on the device, the media ones by kind (media [kind - uform_cell_image_k]).
 *  A new frontend adds its tensors here and its case to the two calls below, and nowhere else. */
typedef struct uform_cuda_frontend_t {
    uint16_t const *bytes;                           /* embed.bytes [258, d], BF16 */
    uint16_t const *weights[uform_media_kinds_k];    /* vision.patch [d, 1024], video.tube [d, 1536], audio.frame
                                                      * [d, 320], BF16; NULL: the model lacks that frontend */
    float const *biases[uform_media_kinds_k];        /* vision.bias, video.bias, audio.bias [d] */
} uform_cuda_frontend_t;

/** A pass's cells of one media kind on the device (cuda.h's media entries): `capacity` sizes every
 *  launch and product (0: no such cells, nothing launched), counts [2] (device) holds the live count
 *  and the rows' uform_media_dtype_t; cells [capacity] each live cell's row of x, rows [capacity,
 *  values] its vector. The rest is scratch the frontend writes: vectors, the BF16 operand the
 *  backward's product reads again; product and d_product, the product's output and the backward's operand. */
typedef struct uform_cuda_media_t {
    size_t capacity;
    uint32_t const *counts, *cells;
    void const *rows;
    uint16_t *vectors;   /* [capacity, values] BF16 */
    float *product;      /* [capacity, width] Float32 */
    uint16_t *d_product; /* [capacity, width] BF16; the backward only */
    float *partials;     /* uform_cuda_media_bias_partials(capacity, width) floats; the backward only */
} uform_cuda_media_t;

/** The frontend tensors' gradients (Float32): embed.bytes and the biases added into, the media
 *  weights written (as the step's weight products write theirs); a kind's NULL without its frontend. */
typedef struct uform_cuda_frontend_gradients_t {
    float *bytes, *weights[uform_media_kinds_k], *biases[uform_media_kinds_k];
} uform_cuda_frontend_gradients_t;

/** x [cells, width] (Float32) = each cell's frontend vector: byte cells a row of embed.bytes (a media
 *  cell's value must name a row too, PAD, which its kind's case then overwrites), media cells W v + b
 *  with v rounded to BF16 and the product through cuBLASLt, kind by kind. `media` [uform_media_kinds_k]
 *  (by kind; a capacity of 0: none of that kind) or NULL: bytes alone. */
uform_status_t uform_cuda_frontend_forward(uform_cuda_gemm_t *gemm, uform_cuda_frontend_t const *frontend,
                                           uform_cuda_media_t const *media, uint32_t const *values, size_t cells,
                                           size_t width, float *x, void *stream);
/** The frontend tensors' gradients from dL/dx [cells, width]: embed.bytes by the byte cells' order
 *  and offsets (uform_cuda_batch_finish's counting sort, which leaves media cells out), and for each
 *  media kind present dW = dY^T V (dY its cells' rows of dL/dx in BF16) and db += the rows of dY's
 *  Float32 source: all deterministic. */
uform_status_t uform_cuda_frontend_backward(uform_cuda_gemm_t *gemm, uform_cuda_media_t const *media, float const *d_x,
                                            uint32_t const *order, uint32_t const *offsets, size_t cells, size_t width,
                                            float *partials, uform_cuda_frontend_gradients_t const *gradients,
                                            void *stream);

/** The slots of a block's bounded scales, each first in a 16-byte slot of `input_scales` [uform_scale_slots_k, 4]
 *  (device; cuBLASLt refuses scale pointers less aligned), the same values in `input_scale` (host) up to
 *  uform_scale_v_k: each product's input scale (its bound / 448) in the order qkv, out, gate_up, down; gate_up's
 *  output's (on the device its inverse, 448 over the bound: cuBLASLt's D scale multiplies); FP8 attention's q,
 *  k and v code scales; then, on the device alone, the inverse of out's input scale, at which FP8 attention
 *  codes its output. */
enum {
    uform_scale_qkv_k, uform_scale_out_k, uform_scale_gate_up_k, uform_scale_down_k, uform_scale_gate_up_output_k,
    uform_scale_q_k, uform_scale_k_k, uform_scale_v_k, uform_scale_attention_output_k, uform_scale_slots_k = 16
};

/** One block's weights on the device: BF16 matrices, Float32 norm gains; in the E4M3 precision
 *  (inference only) also the four matrices' E4M3 codes [rows, columns] and Float32 scales [rows]
 *  (uform_e4m3_rows), which the products then use; NULL otherwise. With bounded per-tensor scales
 *  (docs/precision.md) each matrix's scales are one value repeated, and `input_scales` / `input_scale`
 *  hold the slots above; with row scales `input_scales` is NULL. Under UFORM_CUDA_E4M3=mixed, `input_scale`'s out
 *  and down are 0: those products' inputs take a scale per row, and their weights' repeated scale is a vector. */
typedef struct uform_cuda_block_weights_t {
    float const *attn_norm, *mlp_norm;
    uint16_t const *qkv, *out, *gate_up, *down;
    uint8_t const *qkv8, *out8, *gate_up8, *down8;
    float const *qkv_scales, *out_scales, *gate_up_scales, *down_scales;
    float const *input_scales;
    float input_scale[uform_scale_v_k + 1];
} uform_cuda_block_weights_t;

/** A bounded scale's device slot (16-byte aligned, as cuBLASLt and cuDNN read it). */
static inline float const *uform_scale_slot(uform_cuda_block_weights_t const *w, int slot) { return w->input_scales + 4 * slot; }

/** What a block's forward writes. Inference, which keeps nothing, may give one buffer for both
 *  norms' outputs and one for both scales. The residual stream (x, middle, x_next) is Float32, or
 *  BF16 where `bf16_residual` is set (inference: the out and down products add into it in BF16). */
typedef struct uform_cuda_block_buffers_t {
    uint16_t *normed1, *qkv, *attended, *normed2, *gate_up, *hidden; /* BF16 */
    float *scales1, *log_sums;                                       /* Float32 */
    void *middle;                                                    /* the residual stream's type */
    float *scales2;
    uint8_t *codes;     /* E4M3 weights only: a product's input as E4M3 codes [cells, 4 width] */
    float *row_scales;  /* and their scales [cells] */
    int bf16_residual;
    int rotate_in_attention; /* inference: attention.cu rotates q and k as it loads them (no rope pass); not with cuDNN */
    int gate_up_codes; /* inference at bounded E4M3 scales: gate_up written as E4M3 codes (in gate_up's room), SwiGLU reads them */
    int fp8_attention; /* inference at bounded E4M3 scales with an FP8 cuDNN plan: q, k, v coded by the rope pass (in codes'
                        * room), the output coded by cuDNN (in attended's room) for the out product */
} uform_cuda_block_buffers_t;

/** A masked modelling head on the device (docs/images.md, "Masked image modelling";
 *  docs/audio_video.md): mae, mae_video or mae_audio over its kind's masked vectors of `values`
 *  (1024, 1536, 320). `capacity` sizes every launch and product (0: nothing launched); counts [3]
 *  (device) the kind's live cells, the rows' uform_media_dtype_t and the masked vectors; cells
 *  [capacity] each masked vector's cell, targets [capacity, values] its true values in that dtype.
 *  The rest is scratch the head writes. */
typedef struct uform_cuda_mae_t {
    size_t capacity, values;
    uint32_t const *counts, *cells;
    void const *targets;
    uint16_t const *head;    /* the head [values, d], BF16 */
    float const *bias;       /* its bias [values] */
    float *head_grad;        /* written, as the step's weight products write theirs */
    float *bias_grad;        /* added into */
    uint16_t *gathered;      /* [capacity, d] BF16: the masked cells' rows of h */
    float *predictions;      /* [capacity, values] */
    uint16_t *d_predictions; /* [capacity, values] BF16 */
    float *d_gathered;       /* [capacity, d] */
    float *partials;         /* uform_cuda_mae_partials(capacity, values) floats */
} uform_cuda_mae_t;

/** A masked modelling head forward and back from h [cells, width] (BF16, the final norm's output):
 *  p = h head^T + bias on each masked cell, loss [0] = the mean squared error against the true
 *  values, the head's and bias's gradients, and dL/dh added into d_h [cells, width] (Float32) at the
 *  masked cells. */
uform_status_t uform_cuda_mae_head(uform_cuda_gemm_t *gemm, uform_cuda_mae_t const *mae, uint16_t const *h, size_t width,
                                   float *loss, float *d_h, void *stream);

/** The block: x -> middle = x + attention, then (when `x_next` is not NULL) x_next = middle + MLP
 *  (x, middle and x_next in the residual stream's type, buffers' `bf16_residual`).
 *  Attention runs cuDNN's plan when `cudnn` is not NULL, else attention.cu's kernels over `spans`
 *  and `segment_of`, and not at all when `keep_attention` (the buffers hold its output already). */
uform_status_t uform_cuda_block_forward(uform_cuda_gemm_t *gemm, uform_cudnn_attention_t *cudnn,
                                        uform_cuda_block_weights_t const *w, uform_cuda_block_buffers_t const *a,
                                        void const *x, float const *rotations, uint32_t const *spans,
                                        uint32_t const *segment_of, size_t cells, size_t width, int keep_attention,
                                        void *x_next, void *stream);

#ifdef __cplusplus
}
#endif
#endif
