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
                                           uform_cuda_images_t const *images, uint32_t const *values, size_t n, size_t d,
                                           float *x, void *s) {
    TRY(uform_cuda_embed_forward(frontend->bytes, values, n, d, x, s));
    if (!images || !images->capacity) return uform_ok_k;
    if (!frontend->vision_patch) return uform_cuda_note(uform_missing_k, "frontend_forward: image cells, and no vision.patch");
    size_t m = images->capacity, p = uform_patch_values_k;
    TRY(uform_cuda_image_patches(images->rows, images->counts, m, images->patches, s));
    TRY(uform_cuda_gemm(g, 0, 1, m, d, p, images->patches, p, frontend->vision_patch, p, NULL, images->product, d, 1, s));
    return uform_cuda_image_scatter(images->product, frontend->vision_bias, images->cells, images->counts, m, d, x, s);
}

uform_status_t uform_cuda_frontend_backward(uform_cuda_gemm_t *g, uform_cuda_images_t const *images, float const *d_x,
                                            uint32_t const *order, uint32_t const *offsets, size_t n, size_t d,
                                            float *partials, uform_cuda_frontend_gradients_t const *gradients, void *s) {
    TRY(uform_cuda_embed_backward(d_x, order, offsets, n, d, partials, gradients->bytes, s));
    if (!images || !images->capacity) return uform_ok_k;
    size_t m = images->capacity, p = uform_patch_values_k;
    TRY(uform_cuda_image_gather(d_x, images->cells, images->counts, m, d, images->d_product, s));
    /* d vision.patch [d, 1024] = dY^T P over the capacity's rows, those past the live ones 0 in both;
     * written, not added, so that cuBLASLt's tuning may replay it. */
    TRY(uform_cuda_gemm(g, 1, 0, d, p, m, images->d_product, d, images->patches, p, NULL, gradients->vision_patch, p, 1,
                        s));
    return uform_cuda_image_bias_backward(d_x, images->cells, images->counts, m, d, images->partials,
                                          gradients->vision_bias, s);
}

uform_status_t uform_cuda_mae_head(uform_cuda_gemm_t *g, uform_cuda_mae_t const *mae, uint16_t const *h, size_t d,
                                   float *loss, float *d_h, void *s) {
    if (!mae->capacity) return uform_ok_k;
    size_t m = mae->capacity, p = uform_patch_values_k;
    TRY(uform_cuda_mae_gather(h, mae->cells, mae->counts, m, d, mae->gathered, s));
    TRY(uform_cuda_gemm(g, 0, 1, m, p, d, mae->gathered, d, mae->head, d, NULL, mae->predictions, p, 1, s));
    TRY(uform_cuda_mae_loss(mae->predictions, mae->bias, mae->targets, mae->counts, m, mae->d_predictions, mae->partials,
                            mae->bias_grad, loss, s));
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
