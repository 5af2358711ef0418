/*  backward.c: the Float32 training pass of one compacted batch: the encoder forward keeping what
 *  its backward needs and the heads' outputs, then (once world.c has run the objectives on them)
 *  MLM's head and every gradient, block by block in reverse.
 *  Products run through OpenBLAS in fixed 64-row chunks spread over the pool, so results do not
 *  depend on the thread count; attention runs one task per (segment, head). */
#include <math.h>
#include <string.h>

#include "core/status.h"
#include "cpu/frontend.h"
#include "cpu/gemm.h"
#include "cpu/ops.h"
#include "train/trainer.h"

#include "model/context.h"

enum { uform_chunk_rows_k = 64 };

typedef struct uform_gemm_job_t {
    int transpose_a, transpose_b;
    size_t m, n, k;
    float const *a, *b;
    size_t a_stride, b_stride, c_stride;
    float beta;
    float *c;
} uform_gemm_job_t;

static void uform_gemm_task_(void *context, size_t index, size_t thread) {
    (void)thread;
    uform_gemm_job_t const *job = context;
    size_t first = index * uform_chunk_rows_k, rows = job->m - first < uform_chunk_rows_k ? job->m - first : uform_chunk_rows_k;
    float const *a = job->transpose_a ? job->a + first : job->a + first * job->a_stride;
    uform_gemm_f32(job->transpose_a, job->transpose_b, rows, job->n, job->k, a, job->a_stride, job->b, job->b_stride,
                   job->beta, job->c + first * job->c_stride, job->c_stride);
}

/* C [m, n] = op(A) op(B) + beta C over the pool. */
static void uform_gemm_(uform_trainer_t *trainer, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                        float const *a, size_t a_stride, float const *b, size_t b_stride, float beta, float *c,
                        size_t c_stride) {
    if (!m || !n) return;
    uform_gemm_job_t job = {transpose_a, transpose_b, m, n, k, a, b, a_stride, b_stride, c_stride, beta, c};
    uform_pool_for(trainer->model->context->pool, (m + uform_chunk_rows_k - 1) / uform_chunk_rows_k, uform_gemm_task_, &job);
}

/* The frontend stage's products (cpu/frontend.h) run on the trainer's pool too. */
static void uform_frontend_gemm_(void *context, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                                 float const *a, size_t a_stride, float const *b, size_t b_stride, float beta, float *c,
                                 size_t c_stride) {
    uform_gemm_(context, transpose_a, transpose_b, m, n, k, a, a_stride, b, b_stride, beta, c, c_stride);
}

/* Y [N, out] = X [N, in] W^T */
static void uform_linear_forward_(uform_trainer_t *trainer, uform_tensor_t const *w, float const *x, size_t n, float *y) {
    uform_gemm_(trainer, 0, 1, n, w->rows, w->columns, x, w->columns, w->parameter, w->columns, 0.0f, y, w->rows);
}

/* dW += dY^T X and, when dx is not NULL, dX = dY W. */
static void uform_linear_backward_(uform_trainer_t *trainer, uform_tensor_t *w, float const *x, float const *dy,
                                   size_t n, float *dx) {
#if defined(UFORM_PLANT_TRANSPOSED_GRADIENT)
    if (strstr(w->name, ".out") && w->rows == w->columns) { /* planted: the out projection's gradient transposed */
        uform_gemm_(trainer, 1, 0, w->columns, w->rows, n, x, w->columns, dy, w->rows, 1.0f, w->gradient, w->rows);
    } else
#endif
    uform_gemm_(trainer, 1, 0, w->rows, w->columns, n, dy, w->rows, x, w->columns, 1.0f, w->gradient, w->columns);
    if (dx) uform_gemm_(trainer, 0, 0, n, w->columns, w->rows, dy, w->rows, w->parameter, w->columns, 0.0f, dx, w->columns);
}

/* RMSNorm backward for one row: adds the gain's gradient and writes dx (or adds it when `accumulate`). */
static void uform_rmsnorm_backward_(float const *x, float scale, float const *gain, float const *d_normed,
                                    float *gain_gradient, float *dx, size_t width, int accumulate) {
    double mean = 0;
    for (size_t i = 0; i < width; ++i) {
        double y = (double)x[i] * scale;
        mean += (double)d_normed[i] * gain[i] * y;
        gain_gradient[i] += (float)(d_normed[i] * y);
    }
    mean /= (double)width;
#if defined(UFORM_PLANT_RMSNORM_BACKWARD)
    mean = 0; /* planted: the term through the shared scale dropped */
#endif
    for (size_t i = 0; i < width; ++i) {
        float value = (float)(scale * ((double)d_normed[i] * gain[i] - (double)x[i] * scale * mean));
        dx[i] = accumulate ? dx[i] + value : value;
    }
}

typedef struct uform_attention_job_t {
    uform_trainer_t *trainer;
    float const *qkv;   /* [N, 3d] of this block */
    float *attended;    /* forward: output [N, d] */
    float const *d_attended; /* backward: dA [N, d] */
    float *d_qkv;       /* backward: [N, 3d] */
} uform_attention_job_t;

/* One (segment, head) task's operands: q, k, v in the block's qkv rows, and the softmax of its scores
 * recomputed into the thread's probabilities. */
typedef struct uform_attention_head_t {
    size_t d, length, stride, start, column; /* start: the segment's first cell; column: the head's first */
    float const *q, *k, *v;
    float *p;
} uform_attention_head_t;

static uform_attention_head_t uform_attention_head_(uform_attention_job_t const *job, size_t index, size_t thread) {
    uform_trainer_t *trainer = job->trainer;
    size_t d = trainer->model->config.width, heads = trainer->model->config.heads, hw = 64;
    uform_span_t const *segment = &trainer->spans[index / heads];
    uform_attention_head_t h = {d, segment->length, 3 * d, segment->start, index % heads * hw, NULL, NULL, NULL,
                                trainer->attention[thread].probabilities};
    h.q = job->qkv + h.start * h.stride + h.column, h.k = h.q + d, h.v = h.q + 2 * d;
    uform_gemm_f32(0, 1, h.length, h.length, hw, h.q, h.stride, h.k, h.stride, 0.0f, h.p, h.length);
    for (size_t i = 0; i < h.length * h.length; ++i) h.p[i] *= 0.125f;
    uform_softmax_rows(h.p, h.length, h.length, h.length);
    return h;
}

static void uform_attention_forward_task_(void *context, size_t index, size_t thread) {
    uform_attention_job_t const *job = context;
    uform_attention_head_t h = uform_attention_head_(job, index, thread);
    uform_gemm_f32(0, 0, h.length, 64, h.length, h.p, h.length, h.v, h.stride, 0.0f,
                   job->attended + h.start * h.d + h.column, h.d);
}

static void uform_attention_backward_task_(void *context, size_t index, size_t thread) {
    uform_attention_job_t const *job = context;
    uform_attention_head_t h = uform_attention_head_(job, index, thread);
    size_t d = h.d, length = h.length, stride = h.stride, hw = 64;
    float const *p = h.p, *d_out = job->d_attended + h.start * d + h.column;
    float *dq = job->d_qkv + h.start * stride + h.column, *dk = dq + d, *dv = dq + 2 * d;
    float *dp = job->trainer->attention[thread].gradient;
    uform_gemm_f32(0, 1, length, length, hw, d_out, d, h.v, stride, 0.0f, dp, length); /* dP = dO V^T */
    uform_gemm_f32(1, 0, length, hw, length, p, length, d_out, d, 0.0f, dv, stride);    /* dV = P^T dO */
    for (size_t r = 0; r < length; ++r) {
        float *gradient = dp + r * length;
        float const *probabilities = p + r * length;
        double dot = 0;
        for (size_t j = 0; j < length; ++j) dot += (double)gradient[j] * probabilities[j];
        for (size_t j = 0; j < length; ++j) gradient[j] = (float)(probabilities[j] * (gradient[j] - dot) * 0.125);
    }
    uform_gemm_f32(0, 0, length, hw, length, dp, length, h.k, stride, 0.0f, dq, stride); /* dQ = dS K / 8 */
    uform_gemm_f32(1, 0, length, hw, length, dp, length, h.q, stride, 0.0f, dk, stride); /* dK = dS^T Q / 8 */
}

/* The attention pool's forward over every segment: weights, pooled rows, and e = pooled proj^T. */
static void uform_pool_forward_(uform_trainer_t *trainer) {
    uform_config_t const *config = &trainer->model->config;
    size_t d = config->width, heads = config->heads, hw = 64;
    float const *query = trainer->pool_query->parameter;
    for (size_t s = 0; s < trainer->segments; ++s) {
        uform_span_t const *segment = &trainer->spans[s];
        float *pooled = trainer->pooled + s * d;
        memset(pooled, 0, d * sizeof(float));
        for (size_t head = 0; head < heads; ++head) {
            float largest = -INFINITY, sum = 0;
            for (size_t t = 0; t < segment->length; ++t) {
                size_t cell = segment->start + t;
                float const *h = trainer->hidden + cell * d + head * hw;
                float dot = 0;
                for (size_t j = 0; j < hw; ++j) dot += query[head * hw + j] * h[j];
                trainer->pool_weights[cell * heads + head] = dot * 0.125f;
                largest = dot * 0.125f > largest ? dot * 0.125f : largest;
            }
            for (size_t t = 0; t < segment->length; ++t) {
                float *w = &trainer->pool_weights[(segment->start + t) * heads + head];
                sum += (*w = expf(*w - largest));
            }
            for (size_t t = 0; t < segment->length; ++t) {
                size_t cell = segment->start + t;
                float w = (trainer->pool_weights[cell * heads + head] /= sum);
                float const *h = trainer->hidden + cell * d + head * hw;
                for (size_t j = 0; j < hw; ++j) pooled[head * hw + j] += w * h[j];
            }
        }
    }
    uform_linear_forward_(trainer, trainer->pool_proj, trainer->pooled, trainer->segments, trainer->embeddings);
}

/* Backward of the pool from d_embeddings into d_hidden (accumulated) and the pool's gradients. */
static void uform_pool_backward_(uform_trainer_t *trainer, float *d_hidden) {
    uform_config_t const *config = &trainer->model->config;
    size_t d = config->width, heads = config->heads, hw = 64;
    uform_linear_backward_(trainer, trainer->pool_proj, trainer->pooled, trainer->d_embeddings, trainer->segments,
                           trainer->d_pooled);
    float const *query = trainer->pool_query->parameter;
    float *d_query = trainer->pool_query->gradient;
    for (size_t s = 0; s < trainer->segments; ++s) {
        uform_span_t const *segment = &trainer->spans[s];
        float const *d_pooled = trainer->d_pooled + s * d;
        for (size_t head = 0; head < heads; ++head) {
            double mean = 0; /* sum over t of alpha_t dalpha_t */
            for (size_t t = 0; t < segment->length; ++t) {
                size_t cell = segment->start + t;
                float const *h = trainer->hidden + cell * d + head * hw;
                double dalpha = 0;
                for (size_t j = 0; j < hw; ++j) dalpha += (double)d_pooled[head * hw + j] * h[j];
                mean += trainer->pool_weights[cell * heads + head] * dalpha;
            }
            for (size_t t = 0; t < segment->length; ++t) {
                size_t cell = segment->start + t;
                float const *h = trainer->hidden + cell * d + head * hw;
                float *dh = d_hidden + cell * d + head * hw;
                float alpha = trainer->pool_weights[cell * heads + head];
                double dalpha = 0;
                for (size_t j = 0; j < hw; ++j) dalpha += (double)d_pooled[head * hw + j] * h[j];
                float d_score = (float)(alpha * (dalpha - mean) * 0.125);
                for (size_t j = 0; j < hw; ++j) {
                    dh[j] += alpha * d_pooled[head * hw + j] + d_score * query[head * hw + j];
                    d_query[head * hw + j] += d_score * h[j];
                }
            }
        }
    }
}

/* The frontend stage's weights, gradients and gathered media vectors (cpu/frontend.h). */
static uform_frontend_trainer_t uform_frontend_of_(uform_trainer_t *trainer) {
    uform_config_t const *config = &trainer->model->config;
    uform_frontend_trainer_t frontend = {.d_bytes = trainer->embed->gradient, .gemm = uform_frontend_gemm_, .context = trainer};
    for (size_t media = 0; media < uform_media_kinds_k; ++media) {
        uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + media);
        uform_tensor_t *weight = trainer->by_index[uform_tensor_index(config, uform_media_info(kind)->weight, 0)];
        uform_tensor_t *bias = trainer->by_index[uform_tensor_index(config, uform_media_info(kind)->bias, 0)];
        frontend.weights[media] = weight ? weight->parameter : NULL, frontend.biases[media] = bias ? bias->parameter : NULL;
        frontend.d_weights[media] = weight ? weight->gradient : NULL, frontend.d_biases[media] = bias ? bias->gradient : NULL;
        frontend.media[media] = trainer->media[media];
    }
    return frontend;
}

void uform_train_forward(uform_trainer_t *trainer) {
    uform_model_t *model = trainer->model;
    uform_config_t const *config = &model->config;
    size_t n = trainer->active, d = config->width, depth = config->depth, heads = config->heads;
    uform_train_options_t const *options = &trainer->options;
    int wants_pool = options->objective == uform_objective_contrastive_k || options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    uform_attention_job_t attention = {.trainer = trainer};

    uform_cells_t const cells = {trainer->kinds, trainer->values, NULL}; /* media already gathered */
    uform_frontend_trainer_t frontend = uform_frontend_of_(trainer);
    uform_frontend_train_forward(model, &cells, n, &frontend, trainer->inputs);
    for (size_t l = 0; l < depth; ++l) {
        uform_block_tensors_t const *block = &trainer->blocks[l];
        float *x = trainer->inputs + l * n * d, *qkv = trainer->qkv + l * n * 3 * d;
        float *attended = trainer->attended + l * n * d, *middle = trainer->middle + l * n * d;
        float *gate_up = trainer->gate_up + l * n * 8 * d, *next = trainer->inputs + (l + 1) * n * d;
        for (size_t c = 0; c < n; ++c)
            trainer->scales1[l * n + c] = uform_rmsnorm(x + c * d, block->attn_norm->parameter, trainer->normed + c * d, d);
        uform_linear_forward_(trainer, block->qkv, trainer->normed, n, qkv);
        for (size_t c = 0; c < n; ++c) uform_rope(model, trainer->positions + 3 * c, qkv + c * 3 * d, qkv + c * 3 * d + d, 1);
        attention.qkv = qkv;
        attention.attended = attended;
        uform_pool_for(model->context->pool, trainer->segments * heads, uform_attention_forward_task_, &attention);
        uform_linear_forward_(trainer, block->out, attended, n, middle);
        for (size_t i = 0; i < n * d; ++i) middle[i] += x[i];
        for (size_t c = 0; c < n; ++c)
            trainer->scales2[l * n + c] = uform_rmsnorm(middle + c * d, block->mlp_norm->parameter, trainer->normed + c * d, d);
        uform_linear_forward_(trainer, block->gate_up, trainer->normed, n, gate_up);
        for (size_t c = 0; c < n; ++c)
            for (size_t i = 0; i < 4 * d; ++i) {
                float g = gate_up[c * 8 * d + i], u = gate_up[c * 8 * d + 4 * d + i];
                trainer->swiglu[c * 4 * d + i] = g / (1.0f + expf(-g)) * u;
            }
        uform_linear_forward_(trainer, block->down, trainer->swiglu, n, next);
        for (size_t i = 0; i < n * d; ++i) next[i] += middle[i];
    }
    float const *last = trainer->inputs + depth * n * d;
    for (size_t c = 0; c < n; ++c)
        trainer->final_scales[c] = uform_rmsnorm(last + c * d, trainer->final_norm->parameter, trainer->hidden + c * d, d);

    if (wants_pool) uform_pool_forward_(trainer);
    if (options->objective == uform_objective_rerank_k) {
        size_t width = config->colbert_width;
        uform_linear_forward_(trainer, trainer->rerank_proj, trainer->hidden, n, trainer->colbert_raw);
        for (size_t c = 0; c < n; ++c) {
            double norm = 0;
            for (size_t i = 0; i < width; ++i) norm += (double)trainer->colbert_raw[c * width + i] * trainer->colbert_raw[c * width + i];
            float inverse = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
            for (size_t i = 0; i < width; ++i) trainer->colbert[c * width + i] = trainer->colbert_raw[c * width + i] * inverse;
        }
    }
}

void uform_train_backward(uform_trainer_t *trainer, uform_losses_t *losses) {
    uform_model_t *model = trainer->model;
    uform_config_t const *config = &model->config;
    size_t n = trainer->active, d = config->width, depth = config->depth, heads = config->heads;
    uform_train_options_t const *options = &trainer->options;
    int wants_pool = options->objective == uform_objective_contrastive_k || options->tcr_lambda > 0 || options->lipschitz_lambda > 0;
    uform_attention_job_t attention = {.trainer = trainer};
    uform_cells_t const cells = {trainer->kinds, trainer->values, NULL};
    uform_frontend_trainer_t frontend = uform_frontend_of_(trainer);
    float const *last = trainer->inputs + depth * n * d;

    /* The heads: MLM's loss is the rank's own; d_embeddings and d_colbert come from the world. */
    float *d_hidden = trainer->d_normed;
    memset(d_hidden, 0, n * d * sizeof(float));
    if (options->objective == uform_objective_mlm_k) {
        size_t scored = 0;
        for (size_t c = 0; c < n; ++c)
            if (trainer->targets[c] >= 0) memcpy(trainer->d_attended + scored++ * d, trainer->hidden + c * d, d * sizeof(float));
        losses->scored = scored;
        if (scored) {
            uform_linear_forward_(trainer, trainer->mlm_head, trainer->d_attended, scored, trainer->logits);
            uform_objective_mlm(trainer, losses);
            /* The gathered h rows stay in d_attended for the head's weight gradient. */
            uform_linear_backward_(trainer, trainer->mlm_head, trainer->d_attended, trainer->logits, scored, trainer->d_qkv);
            for (size_t k = 0; k < scored; ++k)
                for (size_t i = 0; i < d; ++i) d_hidden[trainer->scored[k] * d + i] += trainer->d_qkv[k * d + i];
        }
        /* Masked media cells: pred = h head^T + bias against the true vectors, kind by kind
         * (docs/images.md, docs/audio_video.md). */
        losses->reconstructed = 0;
        for (size_t media = 0; media < uform_media_kinds_k; ++media) {
            uform_reconstruction_t *r = &trainer->reconstructions[media];
            uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + media);
            if (!r->count) continue;
            uform_tensor_t *head = trainer->by_index[uform_tensor_index(config, uform_media_info(kind)->mae_head, 0)];
            for (size_t k = 0; k < r->count; ++k)
                memcpy(trainer->d_attended + k * d, trainer->hidden + r->cells[k] * d, d * sizeof(float));
            uform_linear_forward_(trainer, head, trainer->d_attended, r->count, r->predictions);
            losses->reconstruction += uform_objective_reconstruction(trainer, kind);
            uform_linear_backward_(trainer, head, trainer->d_attended, r->predictions, r->count, trainer->d_qkv);
            for (size_t k = 0; k < r->count; ++k)
                for (size_t i = 0; i < d; ++i) d_hidden[r->cells[k] * d + i] += trainer->d_qkv[k * d + i];
            losses->reconstructed += r->count;
        }
    }
    if (options->objective == uform_objective_rerank_k) {
        size_t width = config->colbert_width;
        for (size_t c = 0; c < n; ++c) { /* normalize backward: (dc - c (c . dc)) / |raw| */
            float const *vector = trainer->colbert + c * width;
            float *gradient = trainer->d_colbert + c * width;
            double dot = 0, norm = 0;
            for (size_t i = 0; i < width; ++i) {
                dot += (double)vector[i] * gradient[i];
                norm += (double)trainer->colbert_raw[c * width + i] * trainer->colbert_raw[c * width + i];
            }
            float inverse = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
            for (size_t i = 0; i < width; ++i) gradient[i] = (float)((gradient[i] - vector[i] * dot) * inverse);
        }
        uform_linear_backward_(trainer, trainer->rerank_proj, trainer->hidden, trainer->d_colbert, n, trainer->d_qkv);
        for (size_t i = 0; i < n * d; ++i) d_hidden[i] += trainer->d_qkv[i];
    }
    if (wants_pool) uform_pool_backward_(trainer, d_hidden);

    /* Backward through the final norm and the blocks; d_stream carries dL/dx. */
    float *d_stream = trainer->d_stream;
    for (size_t c = 0; c < n; ++c)
        uform_rmsnorm_backward_(last + c * d, trainer->final_scales[c], trainer->final_norm->parameter, d_hidden + c * d,
                                trainer->final_norm->gradient, d_stream + c * d, d, 0);
    for (size_t l = depth; l-- > 0;) {
        uform_block_tensors_t *block = &trainer->blocks[l];
        float const *x = trainer->inputs + l * n * d, *qkv = trainer->qkv + l * n * 3 * d;
        float const *attended = trainer->attended + l * n * d, *middle = trainer->middle + l * n * d;
        float const *gate_up = trainer->gate_up + l * n * 8 * d;
        /* MLP: recompute its normed input and SwiGLU output from what was kept. */
        for (size_t c = 0; c < n; ++c) {
            float scale = trainer->scales2[l * n + c];
            for (size_t i = 0; i < d; ++i) trainer->normed[c * d + i] = middle[c * d + i] * scale * block->mlp_norm->parameter[i];
            for (size_t i = 0; i < 4 * d; ++i) {
                float g = gate_up[c * 8 * d + i], u = gate_up[c * 8 * d + 4 * d + i];
                trainer->swiglu[c * 4 * d + i] = g / (1.0f + expf(-g)) * u;
            }
        }
        uform_linear_backward_(trainer, block->down, trainer->swiglu, d_stream, n, trainer->d_hidden);
        for (size_t c = 0; c < n; ++c)
            for (size_t i = 0; i < 4 * d; ++i) {
                float g = gate_up[c * 8 * d + i], u = gate_up[c * 8 * d + 4 * d + i], dh = trainer->d_hidden[c * 4 * d + i];
                float sigmoid = 1.0f / (1.0f + expf(-g));
                trainer->d_gate_up[c * 8 * d + i] = dh * u * sigmoid * (1.0f + g * (1.0f - sigmoid));
                trainer->d_gate_up[c * 8 * d + 4 * d + i] = dh * g * sigmoid;
            }
        uform_linear_backward_(trainer, block->gate_up, trainer->normed, trainer->d_gate_up, n, d_hidden);
        for (size_t c = 0; c < n; ++c) /* d_stream becomes dL/d middle */
            uform_rmsnorm_backward_(middle + c * d, trainer->scales2[l * n + c], block->mlp_norm->parameter,
                                    d_hidden + c * d, block->mlp_norm->gradient, d_stream + c * d, d, 1);
        /* Attention. */
        uform_linear_backward_(trainer, block->out, attended, d_stream, n, trainer->d_attended);
        attention.qkv = qkv;
        attention.d_attended = trainer->d_attended;
        attention.d_qkv = trainer->d_qkv;
        uform_pool_for(model->context->pool, trainer->segments * heads, uform_attention_backward_task_, &attention);
        for (size_t c = 0; c < n; ++c)
            uform_rope(model, trainer->positions + 3 * c, trainer->d_qkv + c * 3 * d, trainer->d_qkv + c * 3 * d + d, -1);
        for (size_t c = 0; c < n; ++c) {
            float scale = trainer->scales1[l * n + c];
            for (size_t i = 0; i < d; ++i) trainer->normed[c * d + i] = x[c * d + i] * scale * block->attn_norm->parameter[i];
        }
        uform_linear_backward_(trainer, block->qkv, trainer->normed, trainer->d_qkv, n, d_hidden);
        for (size_t c = 0; c < n; ++c) /* d_stream becomes dL/dx of the block's input */
            uform_rmsnorm_backward_(x + c * d, trainer->scales1[l * n + c], block->attn_norm->parameter, d_hidden + c * d,
                                    block->attn_norm->gradient, d_stream + c * d, d, 1);
    }
    uform_frontend_train_backward(model, &cells, n, d_stream, &frontend);
}
