/*  forward.c: the encoder of SPEC.md section 2 and the heads of section 3 on the CPU. Work is cut
 *  into row tiles (norms, projections, MLP, heads) and (segment, head) pairs (attention), spread
 *  over the model's pool. Float32 everywhere but the inputs of BF16 products. */
#include "cpu/forward.h"

#include <math.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/frontend.h"
#include "cpu/gemm.h"
#include "cpu/kernels.h"
#include "cpu/ops.h"
#include "model/context.h"

/* What the tasks of one pass share. */
typedef struct uform_pass_job_t {
    uform_model_t *model;
    uform_workspace_t *workspace;
    uform_pass_t const *pass;
    uform_block_t const *block;
    size_t tiles;
} uform_pass_job_t;

/* The codes are widened to BF16 (exact) a group of panels at a time, so that the table's BF16 product
 * runs on them, each widening serving every row of the tile. */
void uform_cpu_linear_e4m3(uform_kernels_t const *kernels, uform_weight_t const *matrix, float const *a,
                           size_t a_stride, size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch) {
    size_t depth = matrix->columns, width = matrix->rows, pairs = (depth + 1) / 2;
    for (size_t r = 0; r < rows; ++r) {
        float scale = kernels->quantize_e4m3(a + r * a_stride, depth, scratch->inputs_bf16 + r * depth);
#if defined(UFORM_PLANT_E4M3_SCALE)
        scale = 1.0f; /* planted: the input row's scale dropped */
#endif
        scratch->row_scales[r] = scale;
    }
    for (size_t first = 0; first < width; first += uform_e4m3_panels_k * 16) {
        size_t columns = width - first < uform_e4m3_panels_k * 16 ? width - first : uform_e4m3_panels_k * 16;
        kernels->widen_e4m3(matrix->e4m3 + first * pairs * 2, scratch->panels_bf16, (columns + 15) / 16 * pairs * 32);
        kernels->gemm(scratch->inputs_bf16, depth, scratch->panels_bf16, c + first, c_stride, rows, columns, depth);
    }
    for (size_t r = 0; r < rows; ++r) {
        float *target = c + r * c_stride, scale = scratch->row_scales[r];
        for (size_t i = 0; i < width; ++i) target[i] *= scale * matrix->scales[i];
    }
}

/* The int8 product of the input codes and row scales already in the thread's scratch. */
static void uform_cpu_product_int8_(uform_kernels_t const *kernels, uform_weight_t const *matrix, size_t rows, float *c,
                                    size_t c_stride, uform_scratch_t *scratch) {
    size_t depth = matrix->columns;
    kernels->gemm_int8(scratch->inputs_int8, uform_int8_stride(depth), matrix->int8, matrix->corrections,
                       scratch->row_scales, matrix->scales, c, c_stride, rows, matrix->rows, depth);
}

void uform_cpu_linear_int8(uform_kernels_t const *kernels, uform_weight_t const *matrix, float const *a,
                           size_t a_stride, size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch) {
    size_t depth = matrix->columns, stride = uform_int8_stride(depth);
    for (size_t r = 0; r < rows; ++r)
        scratch->row_scales[r] = kernels->quantize_int8(a + r * a_stride, depth, scratch->inputs_int8 + r * stride);
    uform_cpu_product_int8_(kernels, matrix, rows, c, c_stride, scratch);
}

void uform_cpu_linear(uform_model_t const *model, uform_weight_t const *matrix, float const *a, size_t a_stride,
                      size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch) {
    if (model->precision == uform_precision_f32_k) {
        uform_gemm_f32_nt(a, a_stride, matrix->widened, matrix->columns, c, c_stride, rows, matrix->rows, matrix->columns);
        return;
    }
    uform_kernels_t const *kernels = uform_kernels();
    if (matrix->e4m3) {
        uform_cpu_linear_e4m3(kernels, matrix, a, a_stride, rows, c, c_stride, scratch);
        return;
    }
    if (matrix->int8) {
        uform_cpu_linear_int8(kernels, matrix, a, a_stride, rows, c, c_stride, scratch);
        return;
    }
    for (size_t r = 0; r < rows; ++r)
        kernels->round_bf16(a + r * a_stride, scratch->inputs_bf16 + r * matrix->columns, matrix->columns);
    kernels->gemm(scratch->inputs_bf16, matrix->columns, matrix->packed, c, c_stride, rows, matrix->rows,
                  matrix->columns);
}

/* The tile's rows [first, first + count) of a pass with `cells` rows. */
static size_t uform_tile_(size_t index, size_t cells, size_t *first) {
    *first = index * uform_tile_rows_k;
    size_t remaining = cells - *first;
    return remaining < uform_tile_rows_k ? remaining : uform_tile_rows_k;
}

static void uform_embed_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_pass_t const *pass = context->pass;
    size_t first, count = uform_tile_(index, pass->cells, &first);
    uform_cells_t const cells = {pass->kinds, pass->values, pass->media};
    uform_frontend_forward(context->model, &cells, first, count, context->workspace->residual,
                           &context->workspace->scratch[thread]);
}

/* A cell's rotated q and k [d] as int8 codes + 128 with a scale per head (quantize_int8), head-major,
 * and k's correction 128 sum_j code_j (the packing takes the 128 off k's codes). */
static void uform_quantize_qk_(uform_model_t const *model, uform_workspace_t *workspace, float const *row, size_t cell) {
    uform_kernels_t const *kernels = uform_kernels();
    size_t d = model->config.width, hw = uform_head_width_k, cells = workspace->cells;
    for (size_t head = 0; head < model->config.heads; ++head) {
        size_t at = head * cells + cell;
        workspace->q_scales[at] = kernels->quantize_int8(row + head * hw, hw, workspace->q_int8 + at * hw);
        uint8_t const *codes = workspace->k_int8 + at * hw;
        workspace->k_scales[at] = kernels->quantize_int8(row + d + head * hw, hw, workspace->k_int8 + at * hw);
#if defined(UFORM_PLANT_INT8_KEY_SCALE)
        workspace->k_scales[at] = 1.0f; /* planted: the key's scale dropped after it made the codes */
#endif
        int32_t sum = 0;
        for (size_t j = 0; j < hw; ++j) sum += codes[j];
        workspace->k_corrections[at] = 128 * (sum - 128 * (int32_t)hw);
    }
}

/* normed = rmsnorm(x); qkv = normed W^T; rotate q and k. Where attention's products are BF16, the
 * tile lands in the thread's scratch and only its BF16 rounding goes out (half the bytes to reread). */
static void uform_qkv_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    uform_workspace_t *workspace = context->workspace;
    uform_scratch_t *scratch = &workspace->scratch[thread];
    uform_kernels_t const *kernels = uform_kernels();
    size_t d = model->config.width, first, count = uform_tile_(index, context->pass->cells, &first);
    int bf16 = model->precision != uform_precision_f32_k; /* E4M3 keeps attention's products in BF16, int8 its p v */
    float *qkv = bf16 ? scratch->gate_up : workspace->qkv + first * 3 * d; /* gate_up: a tile of 8 d columns */
    for (size_t c = first; c < first + count; ++c)
        kernels->rmsnorm(workspace->residual + c * d, context->block->attn_norm->f32, workspace->normed + c * d, d);
    uform_cpu_linear(model, context->block->qkv, workspace->normed + first * d, d, count, qkv, 3 * d, scratch);
    int int8 = model->precision == uform_precision_int8_k; /* int8's scores are an int8 product: v alone in BF16 */
    for (size_t r = 0; r < count; ++r) {
        float *row = qkv + r * 3 * d;
        uform_rope(model, context->pass->positions + 3 * (first + r), row, row + d, 1);
        if (int8) {
            uform_quantize_qk_(model, workspace, row, first + r);
            kernels->round_bf16(row + 2 * d, workspace->qkv_bf16 + (first + r) * 3 * d + 2 * d, d);
        } else if (bf16) {
            kernels->round_bf16(row, workspace->qkv_bf16 + (first + r) * 3 * d, 3 * d);
        }
    }
}

/* A head's k codes + 128 [keys, 64] (rows 64 bytes apart) into uform_pack_int8's layout, as int8:
 * panels of 16 keys, each quad of the depth 64 bytes (a 4-byte group of each key), the last panel's
 * missing keys zero. */
static void uform_pack_keys_int8_(uint8_t const *codes, size_t keys, int8_t *packed) {
    size_t hw = uform_head_width_k, panel_bytes = 16 * hw;
    size_t full = keys / 16 * 16;
    if (full < keys) memset(packed + full * hw, 0, panel_bytes);
    for (size_t key = 0; key < keys; ++key) {
        int8_t *target = packed + key / 16 * panel_bytes + key % 16 * 4;
        for (size_t quad = 0; quad < hw / 4; ++quad) {
            uint32_t group;
            memcpy(&group, codes + key * hw + quad * 4, 4);
            group ^= 0x80808080u; /* code + 128 -> the code */
            memcpy(target + quad * 64, &group, 4);
        }
    }
}

/* Attention of one (segment, head) pair: its queries against the keys it may see. The BF16 path
 * reads q, k and v rounded to BF16 (int8: q's and k's int8 codes), rounds exp(scores - max) to BF16
 * and divides by the Float32 sum after the product. */
static void uform_attention_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    uform_workspace_t *workspace = context->workspace;
    uform_scratch_t *scratch = &workspace->scratch[thread];
    uform_kernels_t const *kernels = uform_kernels();
    size_t d = model->config.width, heads = model->config.heads, head = index % heads, hw = uform_head_width_k;
    uform_span_t const *segment = &context->pass->segments[index / heads];
#if defined(UFORM_PLANT_MASK_LEAK)
    size_t keys_first = segment->row_start, keys_count = segment->row_length; /* planted: the whole row */
#else
    size_t keys_first = segment->start, keys_count = segment->length;
#endif
    /* Rows of scores and probabilities a little past a power of two apart: 16 rows of an AMX tile
     * 8 KiB apart would share one L1 set. */
    size_t stride = 3 * d, padded = keys_count + keys_count % 2;
    size_t scores_stride = keys_count + uform_attention_skew_k, probabilities_stride = padded + 2 * uform_attention_skew_k;
    float const *q = workspace->qkv + head * hw, *k = q + d, *v = q + 2 * d;
    uint16_t const *q16 = workspace->qkv_bf16 + head * hw, *k16 = q16 + d, *v16 = q16 + 2 * d;
    int bf16 = model->precision != uform_precision_f32_k;
    int int8 = model->precision == uform_precision_int8_k;
    int8_t *keys_int8 = (int8_t *)scratch->keys_packed; /* half the BF16 panels' bytes */
    size_t cells = workspace->cells;
    if (int8) uform_pack_keys_int8_(workspace->k_int8 + (head * cells + keys_first) * hw, keys_count, keys_int8);
    else if (bf16) uform_pack_bf16(k16 + keys_first * stride, keys_count, hw, stride, 1, scratch->keys_packed);
    if (bf16) uform_pack_bf16(v16 + keys_first * stride, hw, keys_count, 1, stride, scratch->values_packed);
    for (size_t tile = 0; tile < segment->length; tile += uform_query_tile_k) {
        size_t rows = segment->length - tile < uform_query_tile_k ? segment->length - tile : uform_query_tile_k;
        size_t first = segment->start + tile;
        float *output = workspace->attention + first * d + head * hw;
        if (bf16) {
            if (int8) {
                size_t queries = head * cells + first, keys = head * cells + keys_first;
                kernels->gemm_int8(workspace->q_int8 + queries * hw, hw, keys_int8, workspace->k_corrections + keys,
                                   workspace->q_scales + queries, workspace->k_scales + keys, scratch->scores,
                                   scores_stride, rows, keys_count, hw);
            } else {
                /* The tile's q rows copied close together: 3d-wide rows 3 KiB apart fall on a few L1 sets. */
                for (size_t r = 0; r < rows; ++r)
                    memcpy(scratch->queries + r * uform_query_stride_k, q16 + (first + r) * stride, hw * sizeof(uint16_t));
                kernels->gemm(scratch->queries, uform_query_stride_k, scratch->keys_packed, scratch->scores, scores_stride,
                              rows, keys_count, hw);
            }
            kernels->softmax_bf16(scratch->scores, rows, keys_count, scores_stride, 0.125f, scratch->probabilities,
                                  probabilities_stride, scratch->sums);
            kernels->gemm(scratch->probabilities, probabilities_stride, scratch->values_packed, output, d, rows, hw, keys_count);
            for (size_t r = 0; r < rows; ++r)
                for (size_t j = 0; j < hw; ++j) output[r * d + j] /= scratch->sums[r];
        } else {
            uform_gemm_f32_nt(q + first * stride, stride, k + keys_first * stride, stride, scratch->scores, keys_count,
                              rows, keys_count, hw);
            for (size_t i = 0; i < rows * keys_count; ++i) scratch->scores[i] *= 0.125f;
            uform_softmax_rows(scratch->scores, rows, keys_count, keys_count);
            uform_gemm_f32_nn(scratch->scores, keys_count, v + keys_first * stride, stride, output, d, rows, hw,
                              keys_count);
        }
    }
}

/* x += attention W_out^T, then the whole MLP of the tile: x += (silu(g) * u) W_down^T. */
static void uform_mlp_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    uform_workspace_t *workspace = context->workspace;
    uform_scratch_t *scratch = &workspace->scratch[thread];
    uform_block_t const *block = context->block;
    uform_kernels_t const *kernels = uform_kernels();
    size_t d = model->config.width, first, count = uform_tile_(index, context->pass->cells, &first);
    float *x = workspace->residual + first * d, *normed = workspace->normed + first * d;
    uform_cpu_linear(model, block->out, workspace->attention + first * d, d, count, scratch->product, d, scratch);
    for (size_t i = 0; i < count * d; ++i) x[i] += scratch->product[i];
    for (size_t r = 0; r < count; ++r) kernels->rmsnorm(x + r * d, block->mlp_norm->f32, normed + r * d, d);
    uform_cpu_linear(model, block->gate_up, normed, d, count, scratch->gate_up, 8 * d, scratch);
    if (model->precision == uform_precision_bf16_k) {
        /* SwiGLU writes the down product's BF16 inputs directly. */
        kernels->swiglu_bf16(scratch->gate_up, count, 4 * d, scratch->inputs_bf16);
        kernels->gemm(scratch->inputs_bf16, 4 * d, block->down->packed, scratch->product, d, count, d, 4 * d);
    } else if (model->precision == uform_precision_int8_k) {
        /* SwiGLU a row at a time, each row quantized for down while it is in L1. */
        size_t stride = uform_int8_stride(4 * d);
        for (size_t r = 0; r < count; ++r) {
            kernels->swiglu_f32(scratch->gate_up + r * 8 * d, 1, 4 * d, scratch->hidden);
            scratch->row_scales[r] = kernels->quantize_int8(scratch->hidden, 4 * d, scratch->inputs_int8 + r * stride);
        }
        uform_cpu_product_int8_(kernels, block->down, count, scratch->product, d, scratch);
    } else if (model->precision == uform_precision_e4m3_k) {
        kernels->swiglu_f32(scratch->gate_up, count, 4 * d, scratch->hidden);
        uform_cpu_linear(model, block->down, scratch->hidden, 4 * d, count, scratch->product, d, scratch);
    } else {
        for (size_t r = 0; r < count; ++r) {
            float const *gate = scratch->gate_up + r * 8 * d, *up = gate + 4 * d;
            float *hidden = scratch->hidden + r * 4 * d;
            for (size_t i = 0; i < 4 * d; ++i) hidden[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
        }
        uform_cpu_linear(model, block->down, scratch->hidden, 4 * d, count, scratch->product, d, scratch);
    }
    for (size_t i = 0; i < count * d; ++i) x[i] += scratch->product[i];
}

static size_t uform_destination_(uform_pass_t const *pass, size_t cell) {
    return pass->destinations ? pass->destinations[cell] : cell;
}

/* h = rmsnorm(x, final_norm) and the per-cell heads of the tile. */
static void uform_final_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    uform_pass_t const *pass = context->pass;
    uform_workspace_t *workspace = context->workspace;
    uform_scratch_t *scratch = &workspace->scratch[thread];
    size_t d = model->config.width, first, count = uform_tile_(index, pass->cells, &first);
    float *h = workspace->normed + first * d;
    uform_kernels_t const *kernels = uform_kernels();
    for (size_t r = 0; r < count; ++r) kernels->rmsnorm(workspace->residual + (first + r) * d, model->final_norm->f32, h + r * d, d);
    if (pass->hidden)
        for (size_t r = 0; r < count; ++r)
            memcpy(pass->hidden + uform_destination_(pass, first + r) * d, h + r * d, d * sizeof(float));
    if (pass->colbert) {
        size_t width = model->rerank_proj->rows;
        uform_cpu_linear(model, model->rerank_proj, h, d, count, scratch->gate_up, width, scratch);
        for (size_t r = 0; r < count; ++r) {
            float const *vector = scratch->gate_up + r * width;
            double norm = 0;
            for (size_t i = 0; i < width; ++i) norm += (double)vector[i] * vector[i];
            float scale = norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
            float *target = pass->colbert + uform_destination_(pass, first + r) * width;
            for (size_t i = 0; i < width; ++i) target[i] = vector[i] * scale;
        }
    }
    if (pass->logits) {
        uform_cpu_linear(model, model->mlm_head, h, d, count, scratch->gate_up, uform_vocabulary_k, scratch);
        for (size_t r = 0; r < count; ++r)
            memcpy(pass->logits + uform_destination_(pass, first + r) * uform_vocabulary_k,
                   scratch->gate_up + r * uform_vocabulary_k, uform_vocabulary_k * sizeof(float));
    }
}

/* The attention pool of one segment: per head, softmax over its cells of query . h / 8. */
static void uform_pool_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    uform_workspace_t *workspace = context->workspace;
    float *weights = workspace->scratch[thread].scores;
    size_t d = model->config.width, hw = uform_head_width_k;
    uform_span_t const *segment = &context->pass->segments[index];
    float *pooled = workspace->pooled + index * d;
    memset(pooled, 0, d * sizeof(float));
    for (size_t head = 0; head < model->config.heads; ++head) {
        float const *query = model->pool_query->f32 + head * hw;
        for (size_t t = 0; t < segment->length; ++t) {
            float const *h = workspace->normed + (segment->start + t) * d + head * hw;
            float dot = 0;
            for (size_t j = 0; j < hw; ++j) dot += query[j] * h[j];
            weights[t] = dot * 0.125f;
        }
        uform_softmax_rows(weights, 1, segment->length, segment->length);
        for (size_t t = 0; t < segment->length; ++t) {
            float const *h = workspace->normed + (segment->start + t) * d + head * hw;
            for (size_t j = 0; j < hw; ++j) pooled[head * hw + j] += weights[t] * h[j];
        }
    }
}

static void uform_project_task_(void *context_pointer, size_t index, size_t thread) {
    uform_pass_job_t const *context = context_pointer;
    uform_model_t *model = context->model;
    size_t d = model->config.width, widest = model->pool_proj->rows, first;
    size_t count = uform_tile_(index, context->pass->segments_count, &first);
    uform_cpu_linear(model, model->pool_proj, context->workspace->pooled + first * d, d, count,
                  context->pass->pooled + first * widest, widest, &context->workspace->scratch[thread]);
}

static size_t uform_tiles_(size_t rows) { return (rows + uform_tile_rows_k - 1) / uform_tile_rows_k; }

void uform_cpu_forward(uform_context_t *run, uform_pass_t const *pass) {
    uform_model_t *model = run->model;
    uform_pool_t *pool = run->pool;
    uform_pass_job_t context = {.model = model, .workspace = &run->workspace, .pass = pass};
    size_t tiles = uform_tiles_(pass->cells);
    uform_pool_for(pool, tiles, uform_embed_task_, &context);
    for (size_t i = 0; i < model->config.depth; ++i) {
        context.block = &model->blocks[i];
        uform_pool_for(pool, tiles, uform_qkv_task_, &context);
        uform_pool_for(pool, pass->segments_count * model->config.heads, uform_attention_task_, &context);
        uform_pool_for(pool, tiles, uform_mlp_task_, &context);
    }
    uform_pool_for(pool, tiles, uform_final_task_, &context);
    if (pass->pooled) {
        uform_pool_for(pool, pass->segments_count, uform_pool_task_, &context);
        uform_pool_for(pool, uform_tiles_(pass->segments_count), uform_project_task_, &context);
    }
}
