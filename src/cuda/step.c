/*  step.c: the training step on one GPU (step.h), masked bytes, contrastive or rerank, assembled from the
 *  kernels of cuda.h and cuBLASLt products. Memory: one arena taken at creation for parameters, gradients,
 *  optimizer state, activations and both batch slots; nothing is allocated per step. Activations:
 *  with recomputation each block keeps only its Float32 input and the backward pass replays the
 *  block's forward into one shared set of buffers; without it every block keeps its own. */
#include "cuda/step.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/cudnn_attention.h"
#include "cuda/encoder.h"
#include "cuda/error.h"
#include "model/tensors.h"

enum { vocabulary_k = 258, logits_stride_k = 264 /* rows 16-byte aligned for the products */ };

/* One block's activations. With recomputation a replayed block shares one set with the others
 * (the first replayed block's), except its attention output and log-sums under keep_attention. */
typedef struct activations_t {
    uint16_t *normed1, *qkv, *attended, *normed2, *gate_up, *hidden;
    float *scales1, *log_sums, *middle, *scales2;
    int replayed;       /* 1: the backward replays this block's forward first */
    int attention_kept; /* 1: that replay skips attention, whose output and log-sums this block kept */
} activations_t;

typedef struct batch_device_t {
    uint32_t *values, *segment_of, *spans, *order, *offsets;
    int32_t *targets, *positions;
    float *scalars;
    uint32_t *anchors, *candidates, *counts;
    uint8_t *labels;
    float *anchor_weights;
    uform_cuda_batch_media_t media[uform_media_kinds_k]; /* rows and mae_rows: the slot's last regions, only their live rows go up */
} batch_device_t;

/* One media kind's scratch (config.media [k] > 0): its vectors in BF16, the product's Float32 rows,
 * its cells' dL/dx in BF16 and the bias's partial sums; with its masked modelling head, the head's. */
typedef struct media_buffers_t {
    uint16_t *vectors, *d_product;
    float *product, *partials;
    uint16_t *mae_gathered, *mae_d_predictions;
    float *mae_predictions, *mae_d_gathered, *mae_partials;
} media_buffers_t;

struct uform_cuda_step_t {
    uform_cuda_step_config_t config;
    char error[512]; /* the first failure's call and code (uform_cuda_step_error) */
    size_t heads, tensors_count;
    char *arena;
    size_t arena_bytes, used, workspace_bytes;
    uform_cuda_gemm_t *gemm;
    uform_cudnn_attention_t *cudnn; /* NULL: attention.cu's kernels */
    cudaStream_t stream, copy_stream;
    cudaGraphExec_t graphs[2];
    int captured[2], warmed;
    cudaEvent_t uploaded[2], done[2];
    uform_cuda_tensor_t *tensors;  /* the objective's parts of the table (model/tensors.h), in its order */
    uform_tensor_info_t *infos;    /* [tensors_count] their table entries */
    uform_cuda_tensor_t **slots;   /* [depth * uform_tensor_kinds_k]: each (block, kind)'s tensor, NULL if untrained */
    float *scratch, *gain_partials, *embed_partials, *rotations;
    size_t batch_bytes, batch_fixed_bytes; /* a slot, and its part before the media rows (uploaded whole) */
    size_t rows_offset[uform_media_kinds_k], mae_rows_offset[uform_media_kinds_k]; /* the media rows' offsets in a slot */
    unsigned char *staging[2], *batch_memory[2];
    batch_device_t batch[2];
    float *loss_host[2];
    float *x;               /* [(L + 1), cells, d]: every block's input, then the final stream */
    activations_t *layers;  /* one per block; replayed blocks share most buffers */
    uint16_t *h, *logits, *d_logits, *dy, *d_gate_up, *d_attended, *d_qkv;
    uint16_t *d_hidden;
    float *final_scales, *losses, *loss, *d_stream, *d_normed, *deltas;
    /* Contrastive: pooled rows, pool weights, embeddings and their gradients, SigLIP's scratch, and
     * the spectral terms' scratch when TCR or Lipschitz is on (`spectral`). */
    uint16_t *pooled, *d_embeddings16;
    float *pool_weights, *embeddings, *d_embeddings, *d_pooled, *query_partials;
    void *siglip_scratch, *spectral_scratch;
    int spectral;
    /* Rerank: the ColBERT rows [cells, colbert_width] (normalized), their inverse norms, their Float32
     * gradient (which first holds the raw rows) and its BF16 copy, MaxSim's scratch. */
    float *colbert, *inverse_norms, *d_colbert;
    uint16_t *d_colbert16;
    void *maxsim_scratch;
    media_buffers_t media[uform_media_kinds_k];
    float *mae_losses; /* [uform_media_kinds_k] each masked modelling head's loss, summed into loss [2] */
};

/* Bump allocation from the arena, 256-byte aligned; a NULL arena only counts. */
static void *take_(uform_cuda_step_t *step, size_t bytes) {
    size_t at = (step->used + 255) / 256 * 256;
    step->used = at + bytes;
    return step->arena ? step->arena + at : NULL;
}

/* Lays out every buffer; called twice: to count (arena NULL), then to assign. */
static void layout_(uform_cuda_step_t *step) {
    uform_cuda_step_config_t const *c = &step->config;
    size_t n = c->cells, d = c->width, depth = c->depth;
    step->used = 0;
    size_t count = step->tensors_count;
    for (size_t t = 0; t < count; ++t) {
        uform_cuda_tensor_t *tensor = &step->tensors[t];
        uform_tensor_info_t const *info = &step->infos[t];
        snprintf(tensor->name, sizeof(tensor->name), "%s", info->name);
        tensor->rows = info->rows, tensor->columns = info->columns, tensor->is_matrix = info->matrix;
        tensor->parameter = take_(step, tensor->rows * tensor->columns * (tensor->is_matrix ? 2 : 4));
    }
    /* Gradients after all parameters, contiguous for one memset per step. */
    for (size_t t = 0; t < count; ++t) step->tensors[t].gradient = take_(step, step->tensors[t].rows * step->tensors[t].columns * 4);
    size_t scratch = 0;
    for (size_t i = 0; i < count; ++i) {
        uform_cuda_tensor_t *tensor = &step->tensors[i];
        size_t elements = tensor->rows * tensor->columns;
        tensor->row_moment = take_(step, (tensor->is_matrix ? tensor->rows : elements) * 4);
        tensor->column_moment = tensor->is_matrix ? take_(step, tensor->columns * 4) : NULL;
        tensor->first_moment = take_(step, elements * 4);
        size_t needed = uform_cuda_adafactor_scratch(tensor->rows, tensor->columns);
        if (needed > scratch) scratch = needed;
    }
    step->scratch = take_(step, scratch * 4);
    step->gain_partials = take_(step, uform_cuda_rmsnorm_partials(n, d) * 4);
    step->embed_partials = take_(step, uform_cuda_embed_partials(n, d) * 4);
    step->rotations = take_(step, n * 32 * 2 * 4);
    for (int slot = 0; slot < 2; ++slot) {
        size_t before = step->used;
        batch_device_t *b = &step->batch[slot];
        b->values = take_(step, n * 4), b->targets = take_(step, n * 4), b->positions = take_(step, 3 * n * 4);
        b->segment_of = take_(step, n * 4), b->spans = take_(step, 2 * n * 4), b->order = take_(step, n * 4);
        b->offsets = take_(step, 260 * 4), b->scalars = take_(step, 4 * 4);
        b->anchors = take_(step, c->anchors * 4), b->candidates = take_(step, c->candidates * 4), b->counts = take_(step, 3 * 4);
        b->labels = take_(step, c->anchors * c->candidates), b->anchor_weights = take_(step, c->anchors * 4);
        for (size_t k = 0; k < uform_media_kinds_k; ++k) {
            b->media[k].counts = take_(step, 3 * 4), b->media[k].cells = take_(step, c->media[k] * 4);
            b->media[k].mae_cells = take_(step, (c->mae[k] ? c->media[k] : 0) * 4);
        }
        size_t rows_at = (step->used + 255) / 256 * 256, first = (before + 255) / 256 * 256; /* offsets in the arena */
        for (size_t k = 0; k < uform_media_kinds_k; ++k) { /* room for Float32 rows */
            size_t values = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->values;
            step->rows_offset[k] = (step->used + 255) / 256 * 256 - first;
            b->media[k].rows = take_(step, c->media[k] * values * 4);
            step->mae_rows_offset[k] = (step->used + 255) / 256 * 256 - first;
            b->media[k].mae_rows = take_(step, (c->mae[k] ? c->media[k] : 0) * values * 4);
        }
        step->batch_memory[slot] = (unsigned char *)b->values;
        step->batch_bytes = step->used - first, step->batch_fixed_bytes = rows_at - first;
    }
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        media_buffers_t *m = &step->media[k];
        size_t cap = c->media[k], p = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->values;
        if (cap) {
            m->vectors = take_(step, cap * p * 2);
            m->product = take_(step, cap * d * 4), m->d_product = take_(step, cap * d * 2);
            m->partials = take_(step, uform_cuda_media_bias_partials(cap, d) * 4);
        }
        if (c->mae[k]) {
            m->mae_gathered = take_(step, cap * d * 2), m->mae_predictions = take_(step, cap * p * 4);
            m->mae_d_predictions = take_(step, cap * p * 2), m->mae_d_gathered = take_(step, cap * d * 4);
            m->mae_partials = take_(step, uform_cuda_mae_partials(cap, p) * 4);
        }
    }
    step->mae_losses = take_(step, uform_media_kinds_k * 4);
    step->x = take_(step, (depth + 1) * n * d * 4);
    size_t log_sums = n * step->heads;
    if (step->cudnn && uform_cudnn_attention_stats_floats(step->cudnn) > log_sums)
        log_sums = uform_cudnn_attention_stats_floats(step->cudnn);
    activations_t const *shared = NULL; /* the replayed blocks' set */
    for (size_t l = 0; l < depth; ++l) {
        activations_t *a = &step->layers[l];
        int replayed = c->recompute && l < depth - c->kept_blocks;
        if (replayed && shared) {
            *a = *shared;
            if (c->keep_attention) a->attended = take_(step, n * d * 2), a->log_sums = take_(step, log_sums * 4);
        } else {
            a->normed1 = take_(step, n * d * 2), a->qkv = take_(step, n * 3 * d * 2), a->attended = take_(step, n * d * 2);
            a->normed2 = take_(step, n * d * 2), a->gate_up = take_(step, n * 8 * d * 2), a->hidden = take_(step, n * 4 * d * 2);
            a->scales1 = take_(step, n * 4), a->log_sums = take_(step, log_sums * 4), a->middle = take_(step, n * d * 4);
            a->scales2 = take_(step, n * 4);
            if (replayed) shared = a;
        }
        a->replayed = replayed, a->attention_kept = replayed && c->keep_attention;
    }
    step->h = take_(step, n * d * 2), step->final_scales = take_(step, n * 4);
    if (c->objective == uform_cuda_mlm_k) {
        step->logits = take_(step, n * logits_stride_k * 2), step->d_logits = take_(step, n * logits_stride_k * 2);
    } else if (c->objective == uform_cuda_contrastive_k || step->spectral) { /* the pool's buffers */
        size_t segments = c->segments, e = c->embedding_width;
        step->pooled = take_(step, segments * d * 2), step->pool_weights = take_(step, n * step->heads * 4);
        step->embeddings = take_(step, segments * e * 4), step->d_embeddings = take_(step, segments * e * 4);
        step->d_embeddings16 = take_(step, segments * e * 2), step->d_pooled = take_(step, segments * d * 4);
        step->query_partials = take_(step, segments * d * 4);
        if (c->objective == uform_cuda_contrastive_k)
            step->siglip_scratch = take_(step, uform_cuda_siglip_scratch(c->anchors, c->candidates, e, c->widths_count));
        if (step->spectral) step->spectral_scratch = take_(step, uform_cuda_spectral_scratch(segments, e));
    }
    if (c->objective == uform_cuda_rerank_k) {
        size_t w = c->colbert_width;
        step->colbert = take_(step, n * w * 4), step->inverse_norms = take_(step, n * 4);
        step->d_colbert = take_(step, n * w * 4), step->d_colbert16 = take_(step, n * w * 2);
        step->maxsim_scratch = take_(step, uform_cuda_maxsim_scratch(c->anchors, c->candidates));
    }
    if (c->objective == uform_cuda_mlm_k) step->losses = take_(step, n * 4);
    step->loss = take_(step, 4 * 4); /* the total, then its parts: the head's loss, TCR, Lipschitz */
    step->d_stream = take_(step, n * d * 4), step->d_normed = take_(step, n * d * 4), step->dy = take_(step, n * d * 2);
    step->d_hidden = take_(step, n * 4 * d * 2), step->d_gate_up = take_(step, n * 8 * d * 2);
    step->d_attended = take_(step, n * d * 2), step->d_qkv = take_(step, n * 3 * d * 2);
    if (!step->cudnn) step->deltas = take_(step, n * step->heads * 4); /* our backward's scratch */
}

/* Records the first failure of a step: the call that failed, as written (NULL: none), then the noted
 * message, which names the kernel or library call and its error. */
static uform_status_t note_(uform_cuda_step_t *step, uform_status_t status, char const *call) {
    if (!step->error[0]) {
        if (call) snprintf(step->error, sizeof(step->error), "%.240s failed: %s", call, uform_cuda_noted());
        else snprintf(step->error, sizeof(step->error), "%s", uform_cuda_noted());
    }
    return status;
}

/* A CUDA runtime call of the step's own: its status, the failure recorded with the call as written. */
static uform_status_t cuda_(uform_cuda_step_t *step, cudaError_t code, char const *call) {
    uform_status_t status = uform_cuda_check(code, "the step", call);
    return status == uform_ok_k ? status : note_(step, status, NULL);
}

#define TRY(call)                                                                                                     \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k) return note_(step, status_, #call);                                                \
    } while (0)

#define TRY_CUDA(call)                                                                                                \
    do {                                                                                                              \
        uform_status_t status_ = cuda_(step, (call), #call);                                                          \
        if (status_ != uform_ok_k) return status_;                                                                    \
    } while (0)

/* The trained tensor of `kind` (of `block` for the per-block kinds). */
static uform_cuda_tensor_t *tensor_(uform_cuda_step_t const *step, uform_tensor_kind_t kind, size_t block) {
    return step->slots[block * uform_tensor_kinds_k + kind];
}

/* One block's forward into `a` (encoder.h's, as inference runs it); the down projection (into the
 * next block's input) only when `complete`. A replay skips attention where the block kept it. */
static uform_status_t block_forward_(uform_cuda_step_t *step, batch_device_t const *b, size_t l, activations_t *a,
                                     int complete) {
    size_t n = step->config.cells, d = step->config.width;
    uform_cuda_block_weights_t const w = { /* BF16: training has no E4M3 codes */
        .attn_norm = tensor_(step, uform_tensor_attn_norm_k, l)->parameter,
        .mlp_norm = tensor_(step, uform_tensor_mlp_norm_k, l)->parameter,
        .qkv = tensor_(step, uform_tensor_qkv_k, l)->parameter, .out = tensor_(step, uform_tensor_out_k, l)->parameter,
        .gate_up = tensor_(step, uform_tensor_gate_up_k, l)->parameter, .down = tensor_(step, uform_tensor_down_k, l)->parameter};
    uform_cuda_block_buffers_t const buffers = {.normed1 = a->normed1, .qkv = a->qkv, .attended = a->attended,
                                                .normed2 = a->normed2, .gate_up = a->gate_up, .hidden = a->hidden,
                                                .scales1 = a->scales1, .log_sums = a->log_sums, .middle = a->middle,
                                                .scales2 = a->scales2};
    return uform_cuda_block_forward(step->gemm, step->cudnn, &w, &buffers, step->x + l * n * d, step->rotations, b->spans,
                                    b->segment_of, n, d, !complete && a->attention_kept,
                                    complete ? step->x + (l + 1) * n * d : NULL, step->stream);
}

/* d_stream holds dL/d(block output); leaves dL/d(block input) there and the block's weight gradients. */
static uform_status_t block_backward_(uform_cuda_step_t *step, batch_device_t const *b, size_t l, activations_t *a) {
    size_t n = step->config.cells, d = step->config.width;
    void *s = step->stream;
    uform_cuda_gemm_t *g = step->gemm;
    float const *x = step->x + l * n * d;
    uform_cuda_tensor_t *attn_norm = tensor_(step, uform_tensor_attn_norm_k, l), *qkv = tensor_(step, uform_tensor_qkv_k, l);
    uform_cuda_tensor_t *out = tensor_(step, uform_tensor_out_k, l), *mlp_norm = tensor_(step, uform_tensor_mlp_norm_k, l);
    uform_cuda_tensor_t *gate_up = tensor_(step, uform_tensor_gate_up_k, l), *down = tensor_(step, uform_tensor_down_k, l);
    if (a->replayed) TRY(block_forward_(step, b, l, a, 0));
    /* The MLP; dy holds d_stream in BF16, left there by the norm backward that wrote d_stream. */
    TRY(uform_cuda_gemm(g, 1, 0, d, 4 * d, n, step->dy, d, a->hidden, 4 * d, NULL, down->gradient, 4 * d, 1, s));
    TRY(uform_cuda_gemm(g, 0, 0, n, 4 * d, d, step->dy, d, down->parameter, 4 * d, NULL, step->d_hidden, 4 * d, 0, s));
    TRY(uform_cuda_swiglu_backward(a->gate_up, step->d_hidden, n, 4 * d, step->d_gate_up, s));
    TRY(uform_cuda_gemm(g, 1, 0, 8 * d, d, n, step->d_gate_up, 8 * d, a->normed2, d, NULL, gate_up->gradient, d, 1, s));
    TRY(uform_cuda_gemm(g, 0, 0, n, d, 8 * d, step->d_gate_up, 8 * d, gate_up->parameter, d, NULL, step->d_normed, d, 1, s));
    TRY(uform_cuda_rmsnorm_backward(a->middle, mlp_norm->parameter, a->scales2, step->d_normed, n, d, step->d_stream,
                                    step->dy, step->gain_partials, s));
    TRY(uform_cuda_rmsnorm_gain_reduce(step->gain_partials, n, d, mlp_norm->gradient, s));
    /* Attention. */
    TRY(uform_cuda_gemm(g, 1, 0, d, d, n, step->dy, d, a->attended, d, NULL, out->gradient, d, 1, s));
    TRY(uform_cuda_gemm(g, 0, 0, n, d, d, step->dy, d, out->parameter, d, NULL, step->d_attended, d, 0, s));
    if (step->cudnn)
        TRY(uform_cudnn_attention_backward(step->cudnn, a->qkv, a->attended, a->log_sums, step->d_attended, step->d_qkv, s));
    else
        TRY(uform_cuda_attention_backward(a->qkv, a->attended, a->log_sums, step->d_attended, b->spans, b->segment_of, n,
                                          d, step->deltas, step->d_qkv, s));
    TRY(uform_cuda_rope(step->d_qkv, step->rotations, n, d, -1, s));
    TRY(uform_cuda_gemm(g, 1, 0, 3 * d, d, n, step->d_qkv, 3 * d, a->normed1, d, NULL, qkv->gradient, d, 1, s));
    TRY(uform_cuda_gemm(g, 0, 0, n, d, 3 * d, step->d_qkv, 3 * d, qkv->parameter, d, NULL, step->d_normed, d, 1, s));
    TRY(uform_cuda_rmsnorm_backward(x, attn_norm->parameter, a->scales1, step->d_normed, n, d, step->d_stream,
                                    l ? step->dy : NULL, step->gain_partials, s));
    TRY(uform_cuda_rmsnorm_gain_reduce(step->gain_partials, n, d, attn_norm->gradient, s));
    return uform_ok_k;
}

/* Whether the step holds any masked modelling head. */
static int any_mae_(uform_cuda_step_config_t const *c) {
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        if (c->mae[k]) return 1;
    return 0;
}

/* The masked-byte head and its loss: d_normed gets dL/dh. With masked modelling heads the masked
 * vectors' reconstruction adds its loss (loss [2], the heads' summed in kind order as the CPU
 * trainer sums them; the bytes' in [1], their sum the total) and its dL/dh. */
static uform_status_t mlm_head_(uform_cuda_step_t *step, batch_device_t const *b) {
    size_t n = step->config.cells, d = step->config.width;
    void *s = step->stream;
    uform_cuda_tensor_t *head = tensor_(step, uform_tensor_mlm_head_k, 0);
    int mae = any_mae_(&step->config);
    TRY(uform_cuda_gemm(step->gemm, 0, 1, n, vocabulary_k, d, step->h, d, head->parameter, d, NULL, step->logits,
                        logits_stride_k, 0, s));
    TRY(uform_cuda_cross_entropy(step->logits, logits_stride_k, b->targets, n, &b->scalars[0], step->losses,
                                 step->d_logits, s));
    TRY(uform_cuda_sum(step->losses, n, &b->scalars[0], mae ? step->loss + 1 : step->loss, s));
    TRY(uform_cuda_gemm(step->gemm, 1, 0, vocabulary_k, d, n, step->d_logits, logits_stride_k, step->h, d, NULL,
                        head->gradient, d, 1, s));
    TRY(uform_cuda_gemm(step->gemm, 0, 0, n, d, vocabulary_k, step->d_logits, logits_stride_k, head->parameter, d, NULL,
                        step->d_normed, d, 1, s));
    if (!mae) return uform_ok_k;
    TRY_CUDA(cudaMemsetAsync(step->mae_losses, 0, uform_media_kinds_k * 4, step->stream));
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        if (!step->config.mae[k]) continue;
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        uform_cuda_tensor_t *mae_head = tensor_(step, info->mae_head, 0), *mae_bias = tensor_(step, info->mae_bias, 0);
        media_buffers_t const *m = &step->media[k];
        uform_cuda_mae_t const head_ = {.capacity = step->config.media[k], .values = info->values,
                                        .counts = b->media[k].counts, .cells = b->media[k].mae_cells,
                                        .targets = b->media[k].mae_rows, .head = mae_head->parameter,
                                        .bias = mae_bias->parameter, .head_grad = mae_head->gradient,
                                        .bias_grad = mae_bias->gradient, .gathered = m->mae_gathered,
                                        .predictions = m->mae_predictions, .d_predictions = m->mae_d_predictions,
                                        .d_gathered = m->mae_d_gathered, .partials = m->mae_partials};
        TRY(uform_cuda_mae_head(step->gemm, &head_, step->h, d, step->mae_losses + k, step->d_normed, s));
    }
    TRY(uform_cuda_sum(step->mae_losses, uform_media_kinds_k, NULL, step->loss + 2, s));
    return uform_cuda_sum(step->loss + 1, 2, NULL, step->loss, s);
}

/* The attention pool and pool.proj: `embeddings` [segments, E] from h, d_embeddings zeroed. */
static uform_status_t pool_embed_(uform_cuda_step_t *step, batch_device_t const *b) {
    uform_cuda_step_config_t const *c = &step->config;
    size_t d = c->width, segments = c->segments, e = c->embedding_width;
    void *s = step->stream;
    uform_cuda_tensor_t *query = tensor_(step, uform_tensor_pool_query_k, 0), *proj = tensor_(step, uform_tensor_pool_proj_k, 0);
    TRY(uform_cuda_pool_forward(step->h, query->parameter, b->spans, segments, d, step->pooled, step->pool_weights, s));
    TRY(uform_cuda_gemm(step->gemm, 0, 1, segments, e, d, step->pooled, d, proj->parameter, d, NULL, step->embeddings, e,
                        1, s));
    TRY_CUDA(cudaMemsetAsync(step->d_embeddings, 0, segments * e * 4, step->stream));
    return uform_ok_k;
}

/* TCR and Lipschitz on Z, the E-wide embeddings of segments 0..counts[2]-1 (as the CPU's
 * trainer->segments), into loss [2] and [3] and d_embeddings; the total sums the head's loss [1] with them. */
static uform_status_t spectral_(uform_cuda_step_t *step, batch_device_t const *b) {
    uform_cuda_step_config_t const *c = &step->config;
    TRY(uform_cuda_spectral(step->embeddings, c->segments, c->embedding_width, &b->counts[2], c->tcr_lambda,
                            c->lipschitz_lambda, c->lipschitz_iterations, step->loss + 2, step->loss + 3,
                            step->d_embeddings, step->spectral_scratch, step->stream));
    return uform_cuda_sum(step->loss + 1, 3, NULL, step->loss, step->stream);
}

/* From d_embeddings back through pool.proj and the pool: pool.proj's and pool.query's gradients, and
 * dL/dh into d_normed (zeroed first unless `accumulate`, which adds to what a head left there). */
static uform_status_t pool_backward_(uform_cuda_step_t *step, batch_device_t const *b, int accumulate) {
    uform_cuda_step_config_t const *c = &step->config;
    size_t n = c->cells, d = c->width, segments = c->segments, e = c->embedding_width;
    void *s = step->stream;
    uform_cuda_tensor_t *query = tensor_(step, uform_tensor_pool_query_k, 0), *proj = tensor_(step, uform_tensor_pool_proj_k, 0);
    TRY(uform_cuda_round_bf16(step->d_embeddings, segments * e, step->d_embeddings16, s));
    TRY(uform_cuda_gemm(step->gemm, 1, 0, e, d, segments, step->d_embeddings16, e, step->pooled, d, NULL, proj->gradient, d,
                        1, s));
    TRY(uform_cuda_gemm(step->gemm, 0, 0, segments, d, e, step->d_embeddings16, e, proj->parameter, d, NULL, step->d_pooled,
                        d, 1, s));
    if (!accumulate) TRY_CUDA(cudaMemsetAsync(step->d_normed, 0, n * d * 4, step->stream));
    TRY(uform_cuda_pool_backward(step->h, query->parameter, step->pool_weights, step->d_pooled, b->spans, segments, d,
                                 step->d_normed, step->query_partials, s));
    return uform_cuda_pool_query_reduce(step->query_partials, segments, d, query->gradient, s);
}

/* The attention pool, pool.proj, Matryoshka SigLIP and the opt-in spectral terms: d_normed gets dL/dh.
 * Spans past the batch's own have length 0: their pooled rows are zero and nothing scores them. */
static uform_status_t contrastive_head_(uform_cuda_step_t *step, batch_device_t const *b) {
    uform_cuda_step_config_t const *c = &step->config;
    uform_cuda_tensor_t *scale = tensor_(step, uform_tensor_siglip_scale_k, 0), *bias = tensor_(step, uform_tensor_siglip_bias_k, 0);
    TRY(pool_embed_(step, b));
    /* Without the spectral terms SigLIP's loss is the total; with them the parts sum into it. */
    TRY(uform_cuda_siglip(step->embeddings, c->embedding_width, b->anchors, b->candidates, b->counts, c->anchors,
                          c->candidates, b->labels, b->anchor_weights, c->widths, c->widths_count, scale->parameter, bias->parameter,
                          step->spectral ? step->loss + 1 : step->loss, step->d_embeddings, scale->gradient,
                          bias->gradient, step->siglip_scratch, step->stream));
    if (step->spectral) TRY(spectral_(step, b));
    return pool_backward_(step, b, 0);
}

/* rerank.proj on every cell, the rows normalized (the ColBERT vectors), the ranked sigmoid over MaxSim
 * between the batch's anchors and candidates, and back: d_normed gets dL/dh, as the CPU trainer's
 * rerank branch. With TCR or Lipschitz the pool's embeddings carry them, as on the CPU (which pools
 * whenever they are on), and their gradient adds into d_normed after the head's. Cells outside the
 * anchors and candidates (padding, unscored spans) get ColBERT rows that nothing reads: gradient 0. */
static uform_status_t rerank_head_(uform_cuda_step_t *step, batch_device_t const *b) {
    uform_cuda_step_config_t const *c = &step->config;
    size_t n = c->cells, d = c->width, w = c->colbert_width;
    void *s = step->stream;
    uform_cuda_tensor_t *proj = tensor_(step, uform_tensor_rerank_proj_k, 0), *scale = tensor_(step, uform_tensor_siglip_scale_k, 0);
    uform_cuda_tensor_t *bias = tensor_(step, uform_tensor_siglip_bias_k, 0);
    /* The raw rows (Float32) pass through d_colbert, which is zeroed for the gradient once they are normalized. */
    TRY(uform_cuda_gemm(step->gemm, 0, 1, n, w, d, step->h, d, proj->parameter, d, NULL, step->d_colbert, w, 1, s));
    TRY(uform_cuda_normalize_rows_forward(step->d_colbert, n, w, step->colbert, step->inverse_norms, s));
    TRY_CUDA(cudaMemsetAsync(step->d_colbert, 0, n * w * 4, step->stream));
    if (step->spectral) TRY(pool_embed_(step, b));
    TRY(uform_cuda_maxsim(step->colbert, b->spans, b->anchors, b->candidates, b->counts, c->anchors, c->candidates,
                          b->labels, b->anchor_weights, scale->parameter, bias->parameter, step->spectral ? step->loss + 1 : step->loss,
                          step->d_colbert, scale->gradient, bias->gradient, step->maxsim_scratch, s));
    /* Back through the normalization (in place) and rerank.proj; the gradient enters the products in BF16. */
    TRY(uform_cuda_normalize_rows_backward(step->colbert, step->inverse_norms, step->d_colbert, n, w, step->d_colbert, s));
    TRY(uform_cuda_round_bf16(step->d_colbert, n * w, step->d_colbert16, s));
    TRY(uform_cuda_gemm(step->gemm, 1, 0, w, d, n, step->d_colbert16, w, step->h, d, NULL, proj->gradient, d, 1, s));
    TRY(uform_cuda_gemm(step->gemm, 0, 0, n, d, w, step->d_colbert16, w, proj->parameter, d, NULL, step->d_normed, d, 1, s));
    if (!step->spectral) return uform_ok_k;
    TRY(spectral_(step, b));
    return pool_backward_(step, b, 1);
}

/* The slot's media cells of each kind for the frontend stage (capacity 0 without that frontend: nothing launched). */
static void media_(uform_cuda_step_t const *step, batch_device_t const *b, uform_cuda_media_t media[uform_media_kinds_k]) {
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        media_buffers_t const *m = &step->media[k];
        media[k] = (uform_cuda_media_t){.capacity = step->config.media[k], .counts = b->media[k].counts,
                                        .cells = b->media[k].cells, .rows = b->media[k].rows, .vectors = m->vectors,
                                        .product = m->product, .d_product = m->d_product, .partials = m->partials};
    }
}

/* Whether any tensor of the trunk (the frontends, the blocks and the final norm) takes updates. */
static int trunk_trains_(uform_cuda_step_t const *step) {
    uform_tensor_kind_t const shared[] = {uform_tensor_embed_bytes_k, uform_tensor_vision_patch_k, uform_tensor_vision_bias_k,
                                          uform_tensor_video_tube_k,  uform_tensor_video_bias_k,   uform_tensor_audio_frame_k,
                                          uform_tensor_audio_bias_k,  uform_tensor_final_norm_k};
    for (size_t k = 0; k < sizeof(shared) / sizeof(shared[0]); ++k)
        if (tensor_(step, shared[k], 0) && !tensor_(step, shared[k], 0)->frozen) return 1;
    for (size_t l = 0; l < step->config.depth; ++l)
        for (int k = uform_tensor_attn_norm_k; k <= uform_tensor_down_k; ++k)
            if (!tensor_(step, (uform_tensor_kind_t)k, l)->frozen) return 1;
    return 0;
}

/* Everything of one step on the stream: gradients, then (with `optimize`) the Adafactor updates. */
static uform_status_t enqueue_(uform_cuda_step_t *step, int slot, int optimize) {
    uform_cuda_step_config_t const *c = &step->config;
    size_t n = c->cells, d = c->width, depth = c->depth;
    void *s = step->stream;
    batch_device_t const *b = &step->batch[slot];
    uform_cuda_tensor_t *embed = tensor_(step, uform_tensor_embed_bytes_k, 0), *final_norm = tensor_(step, uform_tensor_final_norm_k, 0);
    uform_cuda_tensor_t *last_tensor = &step->tensors[step->tensors_count - 1];
    char *gradients = (char *)step->tensors[0].gradient;
    size_t gradient_bytes = (size_t)((char *)last_tensor->gradient - gradients) + last_tensor->rows * last_tensor->columns * 4;
    TRY_CUDA(cudaMemsetAsync(gradients, 0, gradient_bytes, step->stream));
    TRY(uform_cuda_rope_table(b->positions, n, step->rotations, s));
    if (step->cudnn) TRY(uform_cudnn_attention_prepare(step->cudnn, b->spans, n, s));
    uform_cuda_media_t media[uform_media_kinds_k];
    media_(step, b, media);
    uform_cuda_frontend_t frontend = {.bytes = embed->parameter};
    uform_cuda_frontend_gradients_t frontend_gradients = {.bytes = embed->gradient};
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        uform_cuda_tensor_t *weight = tensor_(step, info->weight, 0), *bias = tensor_(step, info->bias, 0);
        if (!weight || !bias) continue;
        frontend.weights[k] = weight->parameter, frontend.biases[k] = bias->parameter;
        frontend_gradients.weights[k] = weight->gradient, frontend_gradients.biases[k] = bias->gradient;
    }
    TRY(uform_cuda_frontend_forward(step->gemm, &frontend, media, b->values, n, d, step->x, s));
    for (size_t l = 0; l < depth; ++l) TRY(block_forward_(step, b, l, &step->layers[l], 1));
    float const *last = step->x + depth * n * d;
    TRY(uform_cuda_rmsnorm_forward(last, final_norm->parameter, n, d, step->h, step->final_scales, s));
    TRY(c->objective == uform_cuda_mlm_k           ? mlm_head_(step, b)
        : c->objective == uform_cuda_contrastive_k ? contrastive_head_(step, b)
                                                   : rerank_head_(step, b));
    if (trunk_trains_(step)) { /* a head-only run skips it: nothing below the heads takes an update */
        TRY_CUDA(cudaMemsetAsync(step->d_stream, 0, n * d * 4, step->stream));
        TRY(uform_cuda_rmsnorm_backward(last, final_norm->parameter, step->final_scales, step->d_normed, n, d, step->d_stream,
                                        step->dy, step->gain_partials, s));
        TRY(uform_cuda_rmsnorm_gain_reduce(step->gain_partials, n, d, final_norm->gradient, s));
        for (size_t l = depth; l-- > 0;) TRY(block_backward_(step, b, l, &step->layers[l]));
        TRY(uform_cuda_frontend_backward(step->gemm, media, step->d_stream, b->order, b->offsets, n, d, step->embed_partials,
                                         &frontend_gradients, s));
    }
    TRY_CUDA(cudaMemcpyAsync(step->loss_host[slot], step->loss, 4 * 4, cudaMemcpyDeviceToHost, step->stream));
    if (!optimize) return uform_ok_k;
    for (size_t i = 0; i < step->tensors_count; ++i) {
        uform_cuda_tensor_t *t = &step->tensors[i];
        if (t->frozen) continue;
        if (t->is_matrix)
            TRY(uform_cuda_adafactor_matrix(t->parameter, t->gradient, t->row_moment, t->column_moment, t->first_moment,
                                            t->rows, t->columns, &b->scalars[1], c->beta1, c->beta2, c->clip,
                                            c->weight_decay, step->scratch, s));
        else
            TRY(uform_cuda_adafactor_vector(t->parameter, t->gradient, t->row_moment, t->first_moment, t->rows,
                                            &b->scalars[1], c->beta1, c->beta2, c->clip, c->weight_decay, s));
    }
    return uform_ok_k;
}

uform_status_t uform_cuda_step_create(uform_cuda_step_t **result, uform_cuda_step_config_t const *config, char *error,
                                      size_t error_size) {
    *result = NULL;
    if (!config->width || config->width % 64 || !config->depth || !config->cells)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                     "uform_cuda_step_create: width must be a positive multiple of 64, depth and cells positive");
    if (config->objective == uform_cuda_contrastive_k &&
        (!config->segments || !config->anchors || !config->candidates || !config->embedding_width ||
         !config->widths_count || config->widths_count > 8 || config->anchors > config->segments ||
         config->candidates > config->segments))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                     "uform_cuda_step_create: the contrastive step needs segments, anchors and candidates (each within "
                     "the segments), pool.proj's width and 1 to 8 Matryoshka widths");
    if (config->objective == uform_cuda_rerank_k &&
        (!config->segments || !config->anchors || !config->candidates || config->colbert_width != 128 ||
         config->anchors > config->segments || config->candidates > config->segments))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                     "uform_cuda_step_create: the rerank step needs segments, anchors and candidates (each within the "
                     "segments) and a rerank.proj of 128 rows (MaxSim's width), not %zu", config->colbert_width);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        char const *name = uform_part_name(uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->part);
        if (config->media[k] > config->cells)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                   "uform_cuda_step_create: %zu %s cells exceed the step's %zu cells", config->media[k], name,
                                   config->cells);
        if (config->mae[k] && (config->objective != uform_cuda_mlm_k || !config->media[k]))
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                   "uform_cuda_step_create: the %s masked modelling head needs the masked-bytes objective "
                                   "and the %s frontend (media > 0)", name, name);
    }
    if ((unsigned)config->objective > (unsigned)uform_cuda_rerank_k)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "uform_cuda_step_create: unknown objective %d",
                     (int)config->objective);
    int spectral = config->tcr_lambda > 0 || config->lipschitz_lambda > 0;
    if (!(config->tcr_lambda >= 0) || !(config->lipschitz_lambda >= 0) ||
        (spectral && (config->objective == uform_cuda_mlm_k || !config->segments || !config->embedding_width)))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                     "uform_cuda_step_create: TCR and Lipschitz weights must be >= 0, and need the contrastive or rerank "
                     "objective and pool.proj's width");
    /* TCR factors the smaller Gram form, segments x segments or E x E, in one block's shared memory. */
    size_t gram = config->segments < config->embedding_width ? config->segments : config->embedding_width;
    if (config->tcr_lambda > 0 && gram > 6144)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                     "uform_cuda_step_create: TCR factors a %zu x %zu Gram matrix, more than 6144 rows (fewer segments "
                     "or a narrower pool.proj)", gram, gram);
    uform_cuda_step_t *step = calloc(1, sizeof(*step));
    if (!step)
        return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "uform_cuda_step_create: out of host memory");
    step->config = *config;
    if (!config->recompute || config->kept_blocks >= config->depth) /* every block kept: no recomputation */
        step->config.recompute = 0, step->config.kept_blocks = 0, step->config.keep_attention = 0;
    step->heads = config->width / 64;
    step->spectral = spectral;
    if (!step->config.lipschitz_iterations) step->config.lipschitz_iterations = 8; /* the CPU trainer's default */
    /* The objective's parts of the table: the bytes frontend (and each media kind's it holds), the encoder and the heads it trains. */
    unsigned parts = UFORM_PART(uform_part_bytes_k) | UFORM_PART(uform_part_encoder_k);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        if (config->media[k]) parts |= UFORM_PART(info->part);
        if (config->mae[k]) parts |= UFORM_PART(info->mae);
    }
    if (config->objective == uform_cuda_mlm_k) parts |= UFORM_PART(uform_part_mlm_k);
    else parts |= UFORM_PART(uform_part_siglip_k) | (config->objective == uform_cuda_rerank_k ? UFORM_PART(uform_part_rerank_k) : 0);
    if (config->objective == uform_cuda_contrastive_k || spectral) parts |= UFORM_PART(uform_part_pool_k);
    uform_config_t shape = {.width = config->width, .depth = config->depth, .heads = config->width / 64,
                            .embedding_widths = {config->embedding_width}, .embedding_widths_count = 1,
                            .colbert_width = config->colbert_width};
    step->tensors_count = uform_tensor_list(&shape, parts, NULL);
    step->tensors = calloc(step->tensors_count, sizeof(*step->tensors));
    step->infos = calloc(step->tensors_count, sizeof(*step->infos));
    step->slots = calloc(config->depth * uform_tensor_kinds_k, sizeof(*step->slots));
    step->layers = calloc(config->depth, sizeof(*step->layers));
    *result = step;
    if (!step->tensors || !step->infos || !step->slots || !step->layers)
        return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "uform_cuda_step_create: out of host memory");
    uform_tensor_list(&shape, parts, step->infos);
    for (size_t t = 0; t < step->tensors_count; ++t)
        step->slots[step->infos[t].block * uform_tensor_kinds_k + step->infos[t].kind] = &step->tensors[t];
    if (config->cudnn_attention) {
#if defined(UFORM_HAVE_CUDNN)
        if (!config->segments || !config->longest)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                   "uform_cuda_step_create: cuDNN attention needs segments and longest");
        if (config->cells * 3 * config->width > (size_t)INT32_MAX) /* cuDNN's ragged offsets count qkv's elements in 32 bits */
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                   "uform_cuda_step_create: %zu cells of width %zu pass cuDNN's 32-bit ragged offsets "
                                   "(at most %zu cells a step); use fewer rows or attention.cu's kernels",
                                   config->cells, config->width, (size_t)INT32_MAX / (3 * config->width));
        uform_status_t planned = uform_cudnn_attention_create(&step->cudnn, config->segments, config->longest,
                                                              config->width, !config->nondeterministic,
                                                              (config->tune & 2) != 0);
        if (planned != uform_ok_k)
            return uform_cuda_fail(error, error_size, planned, "uform_cuda_step_create: %s", uform_cuda_noted());
#else
        return uform_cuda_fail(error, error_size, uform_unsupported_k,
                     "uform_cuda_step_create: built without cuDNN's frontend (scripts/setup.sh fetches it)");
#endif
    }
    layout_(step);
    step->arena_bytes = step->used;
    uform_status_t status = uform_cuda_check(cudaMalloc((void **)&step->arena, step->arena_bytes), "uform_cuda_step_create",
                                             "cudaMalloc");
    if (status != uform_ok_k)
        return uform_cuda_fail(error, error_size, status, "%s, taking %.2f GiB of device memory", uform_cuda_noted(),
                               step->arena_bytes / 1073741824.0);
    layout_(step);
    step->workspace_bytes = 64u << 20;
    if ((status = uform_cuda_gemm_create(&step->gemm, step->workspace_bytes)) != uform_ok_k)
        return uform_cuda_fail(error, error_size, status, "uform_cuda_step_create: %s", uform_cuda_noted());
    uform_cuda_gemm_tune(step->gemm, config->tune & 1);
    cudaError_t code = cudaSuccess;
    for (int slot = 0; slot < 2 && !code; ++slot) {
        code = cudaMallocHost((void **)&step->staging[slot], step->batch_bytes);
        if (!code) code = cudaMallocHost((void **)&step->loss_host[slot], 4 * sizeof(float));
        if (!code) code = cudaEventCreateWithFlags(&step->uploaded[slot], cudaEventDisableTiming);
        if (!code) code = cudaEventCreateWithFlags(&step->done[slot], cudaEventDisableTiming);
    }
    if (!code) code = cudaStreamCreateWithFlags(&step->stream, cudaStreamNonBlocking);
    if (!code) code = cudaStreamCreateWithFlags(&step->copy_stream, cudaStreamNonBlocking);
    if (!code) code = cudaMemset(step->arena, 0, step->arena_bytes); /* moments start at zero */
    status = uform_cuda_check(code, "uform_cuda_step_create", "taking its pinned slots, events and streams");
    if (status != uform_ok_k) return uform_cuda_fail(error, error_size, status, "%s", uform_cuda_noted());
    for (int slot = 0; slot < 2; ++slot) memset(step->staging[slot], 0, step->batch_bytes);
    return uform_ok_k;
}

void uform_cuda_step_destroy(uform_cuda_step_t *step) {
    if (!step) return;
    if (step->stream) cudaStreamSynchronize(step->stream);
    for (int slot = 0; slot < 2; ++slot) {
        if (step->captured[slot]) cudaGraphExecDestroy(step->graphs[slot]);
        if (step->staging[slot]) cudaFreeHost(step->staging[slot]);
        if (step->loss_host[slot]) cudaFreeHost(step->loss_host[slot]);
        if (step->uploaded[slot]) cudaEventDestroy(step->uploaded[slot]);
        if (step->done[slot]) cudaEventDestroy(step->done[slot]);
    }
    if (step->stream) cudaStreamDestroy(step->stream);
    if (step->copy_stream) cudaStreamDestroy(step->copy_stream);
    uform_cuda_gemm_destroy(step->gemm);
#if defined(UFORM_HAVE_CUDNN)
    uform_cudnn_attention_destroy(step->cudnn);
#endif
    cudaFree(step->arena);
    free(step->tensors), free(step->infos), free(step->slots), free(step->layers);
    free(step);
}

uform_cuda_batch_t uform_cuda_step_batch(uform_cuda_step_t *step, int slot) {
    batch_device_t const *b = &step->batch[slot];
    unsigned char *host = step->staging[slot], *base = step->batch_memory[slot];
#define HOST_VIEW(pointer) ((void *)(host + ((unsigned char *)(pointer) - base)))
    uform_cuda_batch_t view = {HOST_VIEW(b->values), HOST_VIEW(b->targets), HOST_VIEW(b->positions), HOST_VIEW(b->segment_of),
                               HOST_VIEW(b->spans), HOST_VIEW(b->order), HOST_VIEW(b->offsets), HOST_VIEW(b->scalars),
                               HOST_VIEW(b->anchors), HOST_VIEW(b->candidates), HOST_VIEW(b->counts), HOST_VIEW(b->labels),
                               HOST_VIEW(b->anchor_weights), {{0}}};
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        view.media[k] = (uform_cuda_batch_media_t){HOST_VIEW(b->media[k].counts), HOST_VIEW(b->media[k].cells),
                                                   HOST_VIEW(b->media[k].mae_cells), HOST_VIEW(b->media[k].rows),
                                                   HOST_VIEW(b->media[k].mae_rows)};
#undef HOST_VIEW
    return view;
}

/* Whether cell c (walked in ascending order) is a media cell, each kind's list advanced past it. */
static int media_cell_(uform_cuda_step_t const *step, uform_cuda_batch_t const *b, size_t next[uform_media_kinds_k], size_t c) {
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        size_t live = step->config.media[k] ? b->media[k].counts[0] : 0;
        if (next[k] < live && b->media[k].cells[next[k]] == c) return (int)++next[k];
    }
    return 0;
}

void uform_cuda_batch_finish(uform_cuda_step_t *step, int slot, double learning_rate, size_t t) {
    uform_cuda_batch_t b = uform_cuda_step_batch(step, slot);
    size_t n = step->config.cells, scored = 0;
    memset(b.offsets, 0, 260 * 4);
    /* Media cells (ascending in each kind's cells) hold PAD for the byte lookup; their gradient is their frontend's. */
    size_t next[uform_media_kinds_k] = {0};
    for (size_t c = 0; c < n; ++c) {
        if (media_cell_(step, &b, next, c)) continue;
        b.offsets[b.values[c] + 1]++, scored += b.targets[c] >= 0;
    }
    for (size_t v = 0; v < vocabulary_k; ++v) b.offsets[v + 1] += b.offsets[v];
    uint32_t cursor[vocabulary_k];
    memcpy(cursor, b.offsets, sizeof(cursor));
    memset(next, 0, sizeof(next));
    for (size_t c = 0; c < n; ++c)
        if (!media_cell_(step, &b, next, c)) b.order[cursor[b.values[c]]++] = (uint32_t)c;
    b.scalars[0] = scored ? 1.0f / (float)scored : 0.0f;
    uform_cuda_adafactor_schedule(learning_rate, step->config.beta1, step->config.beta2, t, &b.scalars[1]);
}

/* The slot's fixed part and its live media rows (packed at the end, kind by kind) go up. */
static uform_status_t upload_(uform_cuda_step_t *step, int slot) {
    uform_cuda_batch_t const view = uform_cuda_step_batch(step, slot);
    TRY_CUDA(cudaMemcpyAsync(step->batch_memory[slot], step->staging[slot], step->batch_fixed_bytes, cudaMemcpyHostToDevice,
                             step->copy_stream));
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        size_t capacity = step->config.media[k];
        if (!capacity) continue;
        uint32_t const *counts = view.media[k].counts;
        size_t live = counts[0] < capacity ? counts[0] : capacity, masked = counts[2] < capacity ? counts[2] : capacity;
        size_t row_bytes = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k))->values *
                           (counts[1] == uform_media_bf16_k ? 2 : 4);
        if (live)
            TRY_CUDA(cudaMemcpyAsync(step->batch_memory[slot] + step->rows_offset[k], step->staging[slot] + step->rows_offset[k],
                                     live * row_bytes, cudaMemcpyHostToDevice, step->copy_stream));
        if (step->config.mae[k] && masked)
            TRY_CUDA(cudaMemcpyAsync(step->batch_memory[slot] + step->mae_rows_offset[k],
                                     step->staging[slot] + step->mae_rows_offset[k], masked * row_bytes,
                                     cudaMemcpyHostToDevice, step->copy_stream));
    }
    TRY_CUDA(cudaEventRecord(step->uploaded[slot], step->copy_stream));
    TRY_CUDA(cudaStreamWaitEvent(step->stream, step->uploaded[slot], 0));
    return uform_ok_k;
}

static uform_status_t run_(uform_cuda_step_t *step, int slot) {
    TRY(upload_(step, slot));
    if (!step->warmed) { /* eagerly once: loads every kernel and product plan before any capture */
        TRY(enqueue_(step, slot, 1));
        step->warmed = 1;
        TRY_CUDA(cudaEventRecord(step->done[slot], step->stream));
        return uform_ok_k;
    }
    if (!step->captured[slot]) {
        cudaGraph_t graph;
        TRY_CUDA(cudaStreamBeginCapture(step->stream, cudaStreamCaptureModeThreadLocal));
        uform_status_t status = enqueue_(step, slot, 1);
        uform_status_t ended = cuda_(step, cudaStreamEndCapture(step->stream, &graph), "cudaStreamEndCapture");
        if (status != uform_ok_k || ended != uform_ok_k) return status != uform_ok_k ? status : ended;
        status = cuda_(step, cudaGraphInstantiate(&step->graphs[slot], graph, 0), "cudaGraphInstantiate");
        cudaGraphDestroy(graph);
        if (status != uform_ok_k) return status;
        step->captured[slot] = 1;
    }
    TRY_CUDA(cudaGraphLaunch(step->graphs[slot], step->stream));
    TRY_CUDA(cudaEventRecord(step->done[slot], step->stream));
    return uform_ok_k;
}

static uform_status_t gradients_(uform_cuda_step_t *step, int slot) {
    TRY(upload_(step, slot));
    TRY(enqueue_(step, slot, 0));
    TRY_CUDA(cudaEventRecord(step->done[slot], step->stream));
    return uform_ok_k;
}

uform_status_t uform_cuda_step_run(uform_cuda_step_t *step, int slot) { return run_(step, slot); }

uform_status_t uform_cuda_step_gradients(uform_cuda_step_t *step, int slot) { return gradients_(step, slot); }

uform_status_t uform_cuda_step_wait(uform_cuda_step_t *step, int slot, float *loss) {
    uform_status_t status = cuda_(step, cudaEventSynchronize(step->done[slot]), "cudaEventSynchronize(step->done[slot])");
    if (status == uform_ok_k && loss) *loss = *step->loss_host[slot];
    return status;
}

char const *uform_cuda_step_error(uform_cuda_step_t const *step) { return step->error; }

void uform_cuda_step_losses(uform_cuda_step_t const *step, int slot, float losses[4]) {
    memcpy(losses, step->loss_host[slot], 4 * sizeof(float));
    if (any_mae_(&step->config)) losses[3] = 0; /* the parts were written: bytes, then reconstruction */
    else if (!step->spectral) losses[1] = losses[0], losses[2] = losses[3] = 0; /* the head's loss was written as the total */
}

uform_cuda_step_config_t const *uform_cuda_step_config(uform_cuda_step_t const *step) { return &step->config; }

uform_cuda_tensor_t *uform_cuda_step_tensors(uform_cuda_step_t *step, size_t *count) {
    *count = step->tensors_count;
    return step->tensors;
}

size_t uform_cuda_step_gemm_plans(uform_cuda_step_t const *step, char *text, size_t size) {
    return uform_cuda_gemm_describe(step->gemm, text, size);
}

char const *uform_cuda_step_attention_plans(uform_cuda_step_t *step) {
    return step->cudnn ? uform_cudnn_attention_plans(step->cudnn) : "";
}

size_t uform_cuda_step_device_bytes(uform_cuda_step_t const *step) {
    size_t bytes = step->arena_bytes + step->workspace_bytes;
#if defined(UFORM_HAVE_CUDNN)
    if (step->cudnn) bytes += uform_cudnn_attention_device_bytes(step->cudnn);
#endif
    return bytes;
}
