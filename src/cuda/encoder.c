/*  encoder.c: the encoder pieces the step and inference share (encoder.h). */
#include "cuda/encoder.h"

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

uform_status_t uform_cuda_block_forward(uform_cuda_gemm_t *g, uform_cudnn_attention_t *cudnn,
                                        uform_cuda_block_weights_t const *w, uform_cuda_block_buffers_t const *a,
                                        float const *x, float const *rotations, uint32_t const *spans,
                                        uint32_t const *segment_of, size_t n, size_t d, int keep_attention,
                                        float *x_next, void *s) {
    TRY(uform_cuda_rmsnorm_forward(x, w->attn_norm, n, d, a->normed1, a->scales1, s));
    TRY(uform_cuda_gemm(g, 0, 1, n, 3 * d, d, a->normed1, d, w->qkv, d, NULL, a->qkv, 3 * d, 0, s));
    TRY(uform_cuda_rope(a->qkv, rotations, n, d, 1, s));
    if (!keep_attention) {
        if (cudnn) TRY(uform_cudnn_attention_forward(cudnn, a->qkv, a->attended, a->log_sums, s));
        else TRY(uform_cuda_attention_forward(a->qkv, spans, segment_of, n, d, a->attended, a->log_sums, s));
    }
    TRY(uform_cuda_gemm(g, 0, 1, n, d, d, a->attended, d, w->out, d, x, a->middle, d, 1, s));
    TRY(uform_cuda_rmsnorm_forward(a->middle, w->mlp_norm, n, d, a->normed2, a->scales2, s));
    TRY(uform_cuda_gemm(g, 0, 1, n, 8 * d, d, a->normed2, d, w->gate_up, d, NULL, a->gate_up, 8 * d, 0, s));
    TRY(uform_cuda_swiglu_forward(a->gate_up, n, 4 * d, a->hidden, s));
    if (x_next) TRY(uform_cuda_gemm(g, 0, 1, n, d, 4 * d, a->hidden, 4 * d, w->down, 4 * d, a->middle, x_next, d, 1, s));
    return uform_ok_k;
}
