/*  encoder.c: the encoder pieces the step and inference share (encoder.h). */
#include "cuda/encoder.h"
#include <cuda_runtime.h>
#include "cuda/check.h"
#include "cuda/error.h"
#include "model/tensors.h"

#define TRY(call)                                                                                                     \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k) return status_;                                                                    \
    } while (0)

uform_status_t uform_cuda_frontend_forward(uform_cuda_gemm_t *g, uform_cuda_frontend_t const *frontend,
                                           uform_cuda_media_t const *media, uint32_t const *values, size_t n, size_t d,
                                           float *x, void *s) {
    TRY(uform_cuda_embed_forward(frontend->bytes, values, n, d, x, s));
    for (size_t k = 0; media && k < uform_media_kinds_k; ++k) {
        uform_cuda_media_t const *m = &media[k];
        if (!m->capacity) continue;
        uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + k);
        uform_media_info_t const *info = uform_media_info(kind);
        if (!frontend->weights[k])
            return uform_cuda_note(uform_missing_k, "frontend_forward: %s cells, and no %s frontend", uform_part_name(info->part),
                                   uform_part_name(info->part));
        size_t p = info->values;
        TRY(uform_cuda_media_vectors(m->rows, m->counts, m->capacity, p, (int)kind, m->vectors, s));
        TRY(uform_cuda_gemm(g, 0, 1, m->capacity, d, p, m->vectors, p, frontend->weights[k], p, NULL, m->product, d, 1, s));
        TRY(uform_cuda_media_scatter(m->product, frontend->biases[k], m->cells, m->counts, m->capacity, d, x, s));
    }
    return uform_ok_k;
}

uform_status_t uform_cuda_frontend_backward(uform_cuda_gemm_t *g, uform_cuda_media_t const *media, float const *d_x,
                                            uint32_t const *order, uint32_t const *offsets, size_t n, size_t d,
                                            float *partials, uform_cuda_frontend_gradients_t const *gradients, void *s) {
    TRY(uform_cuda_embed_backward(d_x, order, offsets, n, d, partials, gradients->bytes, s));
    for (size_t k = 0; media && k < uform_media_kinds_k; ++k) {
        uform_cuda_media_t const *m = &media[k];
        if (!m->capacity) continue;
        size_t p = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->values;
        TRY(uform_cuda_media_gather(d_x, m->cells, m->counts, m->capacity, d, m->d_product, s));
        /* dW [d, values] = dY^T V over the capacity's rows, those past the live ones 0 in both;
         * written, not added, so that cuBLASLt's tuning may replay it. */
        TRY(uform_cuda_gemm(g, 1, 0, d, p, m->capacity, m->d_product, d, m->vectors, p, NULL, gradients->weights[k], p, 1, s));
        TRY(uform_cuda_media_bias_backward(d_x, m->cells, m->counts, m->capacity, d, m->partials, gradients->biases[k], s));
    }
    return uform_ok_k;
}

uform_status_t uform_cuda_mae_head(uform_cuda_gemm_t *g, uform_cuda_mae_t const *mae, uint16_t const *h, size_t d,
                                   float *loss, float *d_h, void *s) {
    if (!mae->capacity) return uform_ok_k;
    size_t m = mae->capacity, p = mae->values;
    TRY(uform_cuda_mae_gather(h, mae->cells, mae->counts, m, d, mae->gathered, s));
    TRY(uform_cuda_gemm(g, 0, 1, m, p, d, mae->gathered, d, mae->head, d, NULL, mae->predictions, p, 1, s));
    TRY(uform_cuda_mae_loss(mae->predictions, mae->bias, mae->targets, mae->counts, m, p, mae->d_predictions,
                            mae->partials, mae->bias_grad, loss, s));
    /* Over the capacity's rows; those past the masked ones are 0 in both operands. */
    TRY(uform_cuda_gemm(g, 1, 0, p, d, m, mae->d_predictions, p, mae->gathered, d, NULL, mae->head_grad, d, 1, s));
    TRY(uform_cuda_gemm(g, 0, 0, m, d, p, mae->d_predictions, p, mae->head, d, NULL, mae->d_gathered, d, 1, s));
    return uform_cuda_mae_scatter_add(mae->d_gathered, mae->cells, mae->counts, m, d, d_h, s);
}

/* A block product's fixed E4M3 input scale (`which`: qkv, out, gate_up, down), 0 for row scales (all of them, or
 * out's and down's under UFORM_CUDA_E4M3=mixed). */
static float fixed_(uform_cuda_block_weights_t const *w, int which) { return w->input_scales ? w->input_scale[which] : 0; }

/* D [n, width] = A [n, k] W^T (+ C): BF16 through cuBLASLt, or, where the block has E4M3 codes for W,
 * A's E4M3 codes (quantized here unless `quantized`, the norm or SwiGLU having made them) and the E4M3
 * product, with row scales or the block's bounded per-tensor ones (`which` of them). */
static uform_status_t product_(uform_cuda_gemm_t *g, uform_cuda_block_weights_t const *w, int which,
                               uform_cuda_block_buffers_t const *a, uint16_t const *input, int quantized, size_t n,
                               size_t k, uint16_t const *w16, uint8_t const *w8, float const *w_scales, size_t width,
                               void const *c, void *d, int d_is_f32, void *s) {
    if (!w8) return uform_cuda_gemm(g, 0, 1, n, width, k, input, k, w16, k, c, d, width, d_is_f32, s);
    int tensor = fixed_(w, which) > 0;
    if (!quantized) TRY(uform_cuda_quantize_e4m3(input, n, k, a->codes, a->row_scales, fixed_(w, which), s));
    return uform_cuda_gemm_e4m3(g, n, width, k, a->codes, tensor ? uform_scale_slot(w, which) : a->row_scales, w8, w_scales, c,
                                d, d_is_f32, tensor, s);
}

/* The norm before a product (`which`: qkv or gate_up) over the residual stream's x, making its E4M3
 * codes instead of its BF16 output where the product is E4M3 (y then unread). */
static uform_status_t norm_(void const *x, float const *gain, uform_cuda_block_weights_t const *w, int which,
                            uform_cuda_block_buffers_t const *a, size_t n, size_t d, uint16_t *y, float *scales, void *s) {
    int narrow = (which == 0 ? w->qkv8 : w->gate_up8) != NULL;
    if (a->bf16_residual)
        return uform_cuda_rmsnorm_forward_bf16(x, gain, n, d, narrow ? NULL : y, scales, narrow ? a->codes : NULL,
                                               a->row_scales, fixed_(w, which), s);
    if (!narrow) return uform_cuda_rmsnorm_forward(x, gain, n, d, y, scales, s);
    return uform_cuda_rmsnorm_forward_e4m3(x, gain, n, d, NULL, scales, a->codes, a->row_scales, fixed_(w, which), s);
}

uform_status_t uform_cuda_block_forward(uform_cuda_gemm_t *g, uform_cudnn_attention_t *cudnn,
                                        uform_cuda_block_weights_t const *w, uform_cuda_block_buffers_t const *a,
                                        void const *x, float const *rotations, uint32_t const *spans,
                                        uint32_t const *segment_of, size_t n, size_t d, int keep_attention,
                                        void *x_next, void *s) {
    int wide = !a->bf16_residual; /* the out and down products' C and D: the residual stream's type */
    TRY(norm_(x, w->attn_norm, w, 0, a, n, d, a->normed1, a->scales1, s));
    TRY(product_(g, w, 0, a, a->normed1, 1, n, d, w->qkv, w->qkv8, w->qkv_scales, 3 * d, NULL, a->qkv, 0, s));
    int out_fixed = fixed_(w, uform_scale_out_k) > 0; /* out's input at a bounded scale: attention may code it */
    if (a->fp8_attention && cudnn && !keep_attention && out_fixed && w->out8) { /* q, k, v and the output as codes */
        uint8_t *attended = (uint8_t *)a->attended;
        TRY(uform_cuda_rope_e4m3(a->qkv, rotations, n, d, w->input_scale + uform_scale_q_k, a->codes, s));
        TRY(uform_cuda_check(cudaMemsetAsync(a->codes + n * 3 * d, 0, 3 * d, (cudaStream_t)s), "a block's forward",
                             "zeroing FP8 attention's spare row")); /* the padding segments' q, k and v */
        TRY(uform_cudnn_attention_forward_fp8(cudnn, a->codes, uform_scale_slot(w, uform_scale_q_k),
                                              uform_scale_slot(w, uform_scale_attention_output_k), attended, s));
        TRY(uform_cuda_gemm_e4m3(g, n, d, d, attended, uform_scale_slot(w, uform_scale_out_k), w->out8, w->out_scales, x,
                                 a->middle, wide, 1, s));
    } else {
        int rotating = a->rotate_in_attention && !cudnn && !keep_attention;
        int coded = !rotating && !cudnn && !keep_attention && out_fixed && w->out8; /* ours codes out's input */
        if (!rotating) TRY(uform_cuda_rope(a->qkv, rotations, n, d, 1, s));
        if (rotating)
            TRY(uform_cuda_attention_forward_rotating(a->qkv, rotations, spans, segment_of, n, d, a->attended, a->log_sums, s));
        else if (!keep_attention) {
            if (cudnn) TRY(uform_cudnn_attention_forward(cudnn, a->qkv, a->attended, a->log_sums, s));
            else if (coded)
                TRY(uform_cuda_attention_forward_e4m3(a->qkv, spans, segment_of, n, d, a->codes, fixed_(w, uform_scale_out_k), s));
            else TRY(uform_cuda_attention_forward(a->qkv, spans, segment_of, n, d, a->attended, a->log_sums, s));
        }
        TRY(product_(g, w, 1, a, a->attended, coded, n, d, w->out, w->out8, w->out_scales, d, x, a->middle, wide, s));
    }
    TRY(norm_(a->middle, w->mlp_norm, w, 2, a, n, d, a->normed2, a->scales2, s));
    if (a->gate_up_codes && fixed_(w, uform_scale_down_k) > 0 && w->gate_up8 && w->down8) { /* gate_up coded: half the bytes */
        uint8_t *codes = (uint8_t *)a->gate_up;
        TRY(uform_cuda_gemm_e4m3_codes(g, n, 8 * d, d, a->codes, uform_scale_slot(w, uform_scale_gate_up_k), w->gate_up8,
                                       w->gate_up_scales, uform_scale_slot(w, uform_scale_gate_up_output_k), codes, s));
        TRY(uform_cuda_swiglu_e4m3_codes(codes, w->input_scale[uform_scale_gate_up_output_k], n, 4 * d, a->codes,
                                         fixed_(w, uform_scale_down_k), s));
    } else {
        TRY(product_(g, w, 2, a, a->normed2, 1, n, d, w->gate_up, w->gate_up8, w->gate_up_scales, 8 * d, NULL, a->gate_up, 0, s));
        if (w->down8) /* hidden not kept */
            TRY(uform_cuda_swiglu_e4m3(a->gate_up, n, 4 * d, a->codes, a->row_scales, fixed_(w, uform_scale_down_k), s));
        else TRY(uform_cuda_swiglu_forward(a->gate_up, n, 4 * d, a->hidden, s));
    }
    if (x_next)
        TRY(product_(g, w, 3, a, a->hidden, w->down8 != NULL, n, 4 * d, w->down, w->down8, w->down_scales, d, a->middle, x_next, wide, s));
    return uform_ok_k;
}
