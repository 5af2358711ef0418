/*  forward.c: inference on one GPU (forward.h). The encoder is the training step's forward
 *  (step.c, block_forward_) kernel for kernel, over the CPU's compacted cells: no padding, each
 *  segment a contiguous run. Attention is cuDNN's fused forward for passes of long segments where
 *  the build has it (a plan per bucket of segment count and longest segment, cuDNN's ragged layout
 *  reading the runs in place), else attention.cu's kernels (any number of segments of any length).
 *  Activations: a BF16 residual stream (Float32 with UFORM_CUDA_RESIDUAL=f32, as the step keeps it),
 *  BF16 product operands (in the E4M3 precision the blocks' four products quantize theirs); the heads'
 *  outputs in Float32. Device memory: one allocation for the weights (replaced on upload), one for the
 *  activations (grown when a larger pass arrives), nothing for training. */
#include "cuda/forward.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "cpu/kernels.h"
#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/encoder.h"
#include "cuda/error.h"
#if defined(UFORM_HAVE_NVJPEG)
#include "cuda/image_decode.h"
#endif

enum {
    vocabulary_k = 258,
    logits_stride_k = 264,        /* rows of the logits 16-byte aligned for the product, as in step.c */
    gemm_workspace_k = 32 << 20,  /* cuBLASLt's workspace */
    capacity_quantum_k = 1024,    /* activations grow in steps of this many cells */
    media_quantum_k = 256,        /* a media kind's launches and product take its cells rounded up to this */
    attention_plans_k = 8,        /* cuDNN attention plans kept, one per shape bucket */
    plan_quantum_k = 64,          /* the smallest bucket of either plan dimension */
    cudnn_longest_k = 256,        /* by default cuDNN runs passes whose longest bucket is at least this (docs/cuda.md) */
};

/* A cuDNN attention plan for passes of at most `segments` segments of at most `longest` cells (powers
 * of two); `refused` remembers a shape cuDNN builds no plan for, so it is not tried again. */
typedef struct attention_plan_t {
    size_t segments, longest, width;
    int fp8; /* the FP8 forward's plan (uform_cudnn_attention_create_fp8) */
    uform_cudnn_attention_t *attention;
    unsigned long long used;
    int refused;
} attention_plan_t;

/* One media kind's cells of a pass: one allocation for `capacity` of them, taken when a pass first
 * has such cells and grown as the activations are; their cells and vectors gathered on the host in
 * `staging`. */
typedef struct forward_media_t {
    size_t capacity, staging_bytes;
    unsigned char *memory;
    uint32_t *counts, *cells;
    void *rows, *staging;
    uint16_t *vectors;
    float *product;
} forward_media_t;

/* UFORM_CUDA_E4M3's schemes: where each product's E4M3 input scale comes from (docs/precision.md). */
enum { e4m3_row_k, e4m3_tensor_k, e4m3_mixed_k };

struct uform_cuda_forward_t {
    int device;
    cudaStream_t stream;
    uform_cuda_gemm_t *gemm;
    /* The weights, one allocation; a head's pointers are NULL when the model lacks it. */
    size_t width, depth, widest, colbert_width;
    int narrow; /* the E4M3 precision: the blocks' products read codes, the activations have room for theirs */
    int bounded; /* e4m3_tensor_k: the weights at one scale a matrix, bounded input scales; e4m3_mixed_k (the default): those,
                  * but out's and down's inputs at a scale per row; e4m3_row_k (0): row scales as the CPU's */
    int wide_residual; /* UFORM_CUDA_RESIDUAL=f32: the residual stream in Float32, else BF16 (in `middle`'s room) */
    int rotate_in_attention; /* UFORM_CUDA_ROTARY=fused: attention.cu rotates q and k as it loads them (no rope pass) */
    int gate_up_codes; /* UFORM_CUDA_GATE_UP=e4m3: with bounded scales, gate_up written as E4M3 codes for SwiGLU */
    int fp8_attention; /* UFORM_CUDA_E4M3_ATTENTION=e4m3: with bounded scales, cuDNN's attention in FP8 where it runs */
    unsigned char *weights;
    void **tensors; /* [model->tensors_count]: each carried tensor's device copy, NULL for the others */
    uint8_t **codes; /* [model->tensors_count]: in the E4M3 precision the blocks' matrices' E4M3 codes, else NULL */
    float **code_scales; /* and their scale per row */
    float *bounded_scales; /* bounded: [depth, uform_scale_slots_k, 4], each block's input_scales (encoder.h) */
    uform_cuda_block_weights_t *blocks;
    uint16_t *embed, *pool_proj, *rerank_proj, *mlm_head, *media_weights[uform_media_kinds_k];
    float *final_norm, *pool_query, *media_biases[uform_media_kinds_k];
    /* Activations for `capacity` cells (segments are at most cells), one allocation. */
    size_t capacity;
    unsigned char *activations;
    uint32_t *values, *segment_of, *spans;
    int32_t *positions;
    float *rotations, *x, *middle, *scales, *log_sums;
    uint16_t *normed, *qkv, *attended, *gate_up, *hidden;
    uint8_t *input_codes; /* E4M3: a product's input [cells, 4 d] */
    float *input_scales;  /* [cells] */
    uint16_t *pooled;
    float *pool_weights, *embeddings, *colbert_raw, *colbert, *inverse_norms, *logits;
    /* Host staging: the segment tables going up, outputs coming down to be scattered. */
    void *staging;
    size_t staging_bytes;
    /* Each media kind's cells of a pass (encoder.h's uform_cuda_media_t). */
    forward_media_t media[uform_media_kinds_k];
    size_t growing; /* the media kind media_layout_ lays out */
    /* Attention through cuDNN where the build has it, for passes of long segments (1), or every pass when
     * UFORM_CUDA_ATTENTION=cudnn pins it (2); 0: attention.cu's kernels always (no cuDNN, or pinned =ours).
     * Plans by shape bucket, the spans padded with empty segments to the bucket's count. */
    int cudnn;
    attention_plan_t plans[attention_plans_k];
    unsigned long long passes;
    uint32_t *plan_spans;
    size_t plan_spans_capacity;
    /* Image patches decoded on this GPU (or staged from the host) for the next pass, grown as needed. */
    float *decoded;
    size_t decoded_capacity;
    void *decoder; /* uform_cuda_decoder_t, made at the first JPEG */
};

/* A kernel entry point's failure (cuda.h): its status, the pass's step `what`, then its noted message. */
#define CHECK(call, what)                                                                                             \
    do {                                                                                                              \
        uform_status_t status_ = (call);                                                                              \
        if (status_ != uform_ok_k)                                                                                    \
            return uform_cuda_fail(error, error_size, status_, "CUDA: %s: %s", what, uform_cuda_noted());             \
    } while (0)

/* A CUDA runtime call's failure: out of memory as such, anything else a device failure naming `what`. */
#define CHECK_CUDA(call, what)                                                                                        \
    do {                                                                                                              \
        uform_status_t status_ = uform_cuda_check((call), "CUDA", what);                                              \
        if (status_ != uform_ok_k) return uform_cuda_fail(error, error_size, status_, "%s", uform_cuda_noted());      \
    } while (0)

/* Bump allocation, 256-byte aligned; a NULL base only counts. */
typedef struct layout_t {
    unsigned char *base;
    size_t used;
} layout_t;

static void *take_(layout_t *layout, size_t bytes) {
    size_t at = (layout->used + 255) / 256 * 256;
    layout->used = at + bytes;
    return layout->base ? layout->base + at : NULL;
}

static size_t embeddings_stride_(uform_cuda_forward_t const *context) { return (context->widest + 3) / 4 * 4; }

/* Every tensor the model carries, in the table's order, then the named views the passes read. */
static void weights_layout_(uform_cuda_forward_t *context, uform_model_t const *model, layout_t *layout) {
    for (size_t i = 0; i < model->tensors_count; ++i) {
        uform_tensor_info_t const *info = &model->tensors[i];
        int carried = uform_model_carries(model, info->part);
        int coded = carried && model->precision == uform_precision_e4m3_k &&
                    (info->kind == uform_tensor_qkv_k || info->kind == uform_tensor_out_k ||
                     info->kind == uform_tensor_gate_up_k || info->kind == uform_tensor_down_k);
        /* An E4M3 matrix's BF16 copy is never read on the GPU: only its codes go up. */
        context->tensors[i] = carried && !coded ? take_(layout, info->rows * info->columns * (info->matrix ? 2 : 4)) : NULL;
        context->codes[i] = coded ? take_(layout, info->rows * info->columns) : NULL;
        context->code_scales[i] = coded ? take_(layout, info->rows * 4) : NULL;
    }
    int bounded = context->bounded && model->precision == uform_precision_e4m3_k;
    context->bounded_scales = bounded ? take_(layout, context->depth * uform_scale_slots_k * 4 * sizeof(float)) : NULL;
    uform_config_t const *config = &model->config;
#define AT_(kind, block) context->tensors[uform_tensor_index(config, kind, block)]
    context->embed = AT_(uform_tensor_embed_bytes_k, 0);
    for (size_t i = 0; i < context->depth; ++i) {
        uform_cuda_block_weights_t *block = &context->blocks[i];
        block->attn_norm = AT_(uform_tensor_attn_norm_k, i), block->qkv = AT_(uform_tensor_qkv_k, i);
        block->out = AT_(uform_tensor_out_k, i), block->mlp_norm = AT_(uform_tensor_mlp_norm_k, i);
        block->gate_up = AT_(uform_tensor_gate_up_k, i), block->down = AT_(uform_tensor_down_k, i);
#define CODES_(kind) context->codes[uform_tensor_index(config, kind, i)]
#define SCALES_(kind) context->code_scales[uform_tensor_index(config, kind, i)]
        block->qkv8 = CODES_(uform_tensor_qkv_k), block->qkv_scales = SCALES_(uform_tensor_qkv_k);
        block->out8 = CODES_(uform_tensor_out_k), block->out_scales = SCALES_(uform_tensor_out_k);
        block->gate_up8 = CODES_(uform_tensor_gate_up_k), block->gate_up_scales = SCALES_(uform_tensor_gate_up_k);
        block->down8 = CODES_(uform_tensor_down_k), block->down_scales = SCALES_(uform_tensor_down_k);
        block->input_scales = context->bounded_scales ? context->bounded_scales + uform_scale_slots_k * 4 * i : NULL;
#undef CODES_
#undef SCALES_
    }
    context->final_norm = AT_(uform_tensor_final_norm_k, 0);
    context->pool_query = AT_(uform_tensor_pool_query_k, 0), context->pool_proj = AT_(uform_tensor_pool_proj_k, 0);
    context->rerank_proj = AT_(uform_tensor_rerank_proj_k, 0), context->mlm_head = AT_(uform_tensor_mlm_head_k, 0);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
        context->media_weights[k] = AT_(info->weight, 0), context->media_biases[k] = AT_(info->bias, 0);
    }
#undef AT_
}

static void activations_layout_(uform_cuda_forward_t *context, layout_t *layout, size_t n) {
    size_t d = context->width, heads = d / 64, cw = context->colbert_width;
    context->values = take_(layout, n * 4);
    context->positions = take_(layout, n * 3 * 4);
    context->segment_of = take_(layout, n * 4);
    context->spans = take_(layout, n * 2 * 4);
    context->rotations = take_(layout, n * 32 * 2 * 4);
    context->x = take_(layout, n * d * 4);
    context->middle = take_(layout, n * d * 4);
    context->scales = take_(layout, n * 4);
    context->log_sums = take_(layout, n * heads * 4);
    context->normed = take_(layout, n * d * 2);
    context->qkv = take_(layout, n * 3 * d * 2);
    context->attended = take_(layout, n * d * 2);
    context->gate_up = take_(layout, n * 8 * d * 2);
    context->hidden = context->narrow ? NULL : take_(layout, n * 4 * d * 2); /* E4M3: SwiGLU writes codes */
    context->input_codes = context->narrow ? take_(layout, n * 4 * d) : NULL;
    context->input_scales = context->narrow ? take_(layout, n * 4) : NULL;
    context->pooled = take_(layout, n * d * 2);
    context->pool_weights = take_(layout, n * heads * 4);
    context->embeddings = take_(layout, n * embeddings_stride_(context) * 4);
    context->colbert_raw = take_(layout, n * cw * 4);
    context->colbert = take_(layout, n * cw * 4);
    context->inverse_norms = take_(layout, n * 4);
    context->logits = take_(layout, n * logits_stride_k * 4);
}

/* An environment switch of two values: *chosen is 1 when it names `second`, 0 when unset or `first`;
 * anything else refused. */
static uform_status_t switch_(char const *name, char const *first, char const *second, int *chosen, char *error,
                              size_t error_size) {
    char const *value = getenv(name);
    *chosen = value && !strcmp(value, second);
    if (value && !*chosen && strcmp(value, first))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "%s is %s or %s, not %s", name, first, second, value);
    return uform_ok_k;
}

uform_status_t uform_cuda_forward_create(uform_cuda_forward_t **result, char *error, size_t error_size) {
    *result = NULL;
    int count = 0, code = (int)cudaGetDeviceCount(&count);
    if (code || count < 1) {
        cudaGetLastError(); /* clears the error, so that later calls in the process start clean */
        return uform_cuda_fail(error, error_size, uform_unsupported_k, "no CUDA device (%s)",
                     code ? cudaGetErrorString((cudaError_t)code) : "the driver lists none");
    }
    uform_cuda_forward_t *context = calloc(1, sizeof(*context));
    if (!context) return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "cannot allocate a GPU context");
    *result = context;
    CHECK_CUDA(cudaGetDevice(&context->device), "cudaGetDevice");
    CHECK_CUDA(cudaStreamCreateWithFlags(&context->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    CHECK(uform_cuda_gemm_create(&context->gemm, gemm_workspace_k), "creating cuBLASLt");
    char const *tune = getenv("UFORM_CUDA_TUNE");
    char *end = NULL;
    long candidates = tune ? strtol(tune, &end, 10) : 1;
    if (tune && (!*tune || *end || candidates < 0 || candidates > 64))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                               "UFORM_CUDA_TUNE is 0, 1 or a count of candidates up to 64, not %s", tune);
    uform_cuda_gemm_tune(context->gemm, (int)candidates);
    char const *scales = getenv("UFORM_CUDA_E4M3");
    context->bounded = !scales || !strcmp(scales, "mixed") ? e4m3_mixed_k
                       : !strcmp(scales, "row")                ? e4m3_row_k
                       : !strcmp(scales, "tensor")             ? e4m3_tensor_k
                                                               : -1;
    if (context->bounded < 0)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "UFORM_CUDA_E4M3 is row, tensor or mixed, not %s", scales);
    uform_status_t status = switch_("UFORM_CUDA_RESIDUAL", "bf16", "f32", &context->wide_residual, error, error_size);
    if (status == uform_ok_k) status = switch_("UFORM_CUDA_ROTARY", "separate", "fused", &context->rotate_in_attention, error, error_size);
    if (status == uform_ok_k) status = switch_("UFORM_CUDA_GATE_UP", "bf16", "e4m3", &context->gate_up_codes, error, error_size);
    if (status == uform_ok_k)
        status = switch_("UFORM_CUDA_E4M3_ATTENTION", "bf16", "e4m3", &context->fp8_attention, error, error_size);
    if (status != uform_ok_k) return status;
    if (context->bounded == e4m3_mixed_k && (context->gate_up_codes || context->fp8_attention)) /* both code at out's or down's fixed scale */
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                               "%s=e4m3 needs UFORM_CUDA_E4M3=tensor: with mixed, out's and down's inputs take a scale per row",
                               context->gate_up_codes ? "UFORM_CUDA_GATE_UP" : "UFORM_CUDA_E4M3_ATTENTION");
    size_t cudnn = uform_cudnn_version();
    if (context->fp8_attention && !cudnn)
        return uform_cuda_fail(error, error_size, uform_unsupported_k, "UFORM_CUDA_E4M3_ATTENTION=e4m3, but this build is without cuDNN");
    if (context->fp8_attention && cudnn < uform_cudnn_fp8_attention_least_k) /* wrong answers there, not slow ones */
        return uform_cuda_fail(error, error_size, uform_unsupported_k,
                               "UFORM_CUDA_E4M3_ATTENTION=e4m3 needs cuDNN 9.23 or later, not %zu.%zu: 9.14's FP8 attention over "
                               "ragged segments fails its float64 check (docs/precision.md, \"FP8 attention on a GPU\")",
                               cudnn / 10000, cudnn / 100 % 100);
    char const *pinned = getenv("UFORM_CUDA_ATTENTION");
    if (pinned && strcmp(pinned, "ours") && strcmp(pinned, "cudnn"))
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "UFORM_CUDA_ATTENTION is ours or cudnn, not %s", pinned);
#if defined(UFORM_HAVE_CUDNN)
    context->cudnn = !pinned ? 1 : !strcmp(pinned, "cudnn") ? 2 : 0;
#else
    if (pinned && !strcmp(pinned, "cudnn"))
        return uform_cuda_fail(error, error_size, uform_unsupported_k, "UFORM_CUDA_ATTENTION=cudnn, but this build is without cuDNN");
#endif
    return uform_ok_k;
}

static void plans_destroy_(uform_cuda_forward_t *context) {
    for (size_t i = 0; i < attention_plans_k; ++i) uform_cudnn_attention_destroy(context->plans[i].attention);
    memset(context->plans, 0, sizeof(context->plans));
}

static size_t bucket_(size_t count) {
    size_t bucket = plan_quantum_k;
    while (bucket < count) bucket *= 2;
    return bucket;
}

/* FP8 attention runs: asked for, and the model's products in E4M3 at bounded scales (its q, k, v bounds). */
static int fp8_attention_(uform_cuda_forward_t const *context) { return context->fp8_attention && context->bounded_scales != NULL; }

/* cuDNN's plan for a pass of `segments` segments, the longest `longest` cells, its lengths and offsets
 * prepared from the pass's spans; NULL where the pass runs attention.cu's kernels instead (no cuDNN,
 * pinned, short segments where ours is faster, or a shape cuDNN refused; an FP8 plan refused is an error). A new shape
 * takes the least recently used slot. */
static uform_status_t attention_plan_(uform_cuda_forward_t *context, size_t segments, size_t longest, size_t cells,
                                      uform_cudnn_attention_t **plan, char *error, size_t error_size) {
    *plan = NULL;
    if (!context->cudnn) return uform_ok_k;
    size_t b = bucket_(segments), t = bucket_(longest), slot = 0;
    if (context->cudnn == 1 && t < cudnn_longest_k) return uform_ok_k;
    int fp8 = fp8_attention_(context);
    if (cells > uform_cuda_pass_cells_most(context->width)) {
        if (fp8)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k,
                                   "a pass of %zu cells at width %zu is past cuDNN's 32-bit ragged offsets, which FP8 attention "
                                   "(UFORM_CUDA_E4M3_ATTENTION=e4m3) needs: at most %zu cells a pass",
                                   cells, context->width, uform_cuda_pass_cells_most(context->width));
        return uform_ok_k; /* attention.cu's kernels, which index in 64 bits */
    }
    attention_plan_t *found = NULL;
    for (size_t i = 0; i < attention_plans_k && !found; ++i) {
        attention_plan_t *entry = &context->plans[i];
        if (entry->segments == b && entry->longest == t && entry->width == context->width && entry->fp8 == fp8) found = entry;
        else if (entry->used < context->plans[slot].used) slot = i;
    }
    if (!found) {
        found = &context->plans[slot];
        uform_cudnn_attention_destroy(found->attention);
        *found = (attention_plan_t){.segments = b, .longest = t, .width = context->width, .fp8 = fp8};
        uform_status_t made = fp8 ? uform_cudnn_attention_create_fp8(&found->attention, b, t, context->width)
                                  : uform_cudnn_attention_create_inference(&found->attention, b, t, context->width);
        if (made != uform_ok_k && fp8) { /* asked for: a refusal is an error, not a quiet fall back to BF16 */
            uform_cudnn_attention_destroy(found->attention);
            *found = (attention_plan_t){0};
            CHECK(made, "cuDNN's FP8 attention (UFORM_CUDA_E4M3_ATTENTION=e4m3)");
        }
        if (made != uform_ok_k) {
            uform_cudnn_attention_destroy(found->attention);
            found->attention = NULL, found->refused = 1;
            cudaGetLastError(); /* a refused plan leaves nothing for the next call */
        }
    }
    found->used = ++context->passes;
    if (found->refused) return uform_ok_k;
    if (b > context->plan_spans_capacity) {
        cudaFree(context->plan_spans);
        context->plan_spans_capacity = 0;
        CHECK_CUDA(cudaMalloc((void **)&context->plan_spans, b * 2 * 4), "the padded spans");
        context->plan_spans_capacity = b;
    }
    cudaStream_t s = context->stream;
    CHECK_CUDA(cudaMemcpyAsync(context->plan_spans, context->spans, segments * 2 * 4, cudaMemcpyDeviceToDevice, s), "padding spans");
    CHECK_CUDA(cudaMemsetAsync(context->plan_spans + 2 * segments, 0, (b - segments) * 2 * 4, s), "padding spans");
    CHECK(uform_cudnn_attention_prepare(found->attention, context->plan_spans, cells, s), "cuDNN's ragged offsets");
    *plan = found->attention;
    return uform_ok_k;
}

uform_status_t uform_cuda_device_name(char *name, size_t capacity, char *error, size_t error_size) {
    int count = 0, device = 0, code = (int)cudaGetDeviceCount(&count);
    if (code || count < 1) {
        cudaGetLastError(); /* clears the error, so that later calls in the process start clean */
        return uform_cuda_fail(error, error_size, uform_unsupported_k, "no CUDA device (%s)",
                     code ? cudaGetErrorString((cudaError_t)code) : "the driver lists none");
    }
    struct cudaDeviceProp properties;
    CHECK_CUDA(cudaGetDevice(&device), "cudaGetDevice");
    CHECK_CUDA(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
    snprintf(name, capacity, "%s", properties.name);
    return uform_ok_k;
}

void uform_cuda_forward_destroy(uform_cuda_forward_t *context) {
    if (!context) return;
    cudaSetDevice(context->device);
    if (context->stream) cudaStreamSynchronize(context->stream);
    cudaFree(context->activations);
    for (size_t k = 0; k < uform_media_kinds_k; ++k) cudaFree(context->media[k].memory), free(context->media[k].staging);
    cudaFree(context->weights);
    cudaFree(context->plan_spans);
    cudaFree(context->decoded);
#if defined(UFORM_HAVE_NVJPEG)
    uform_cuda_decoder_free(context->decoder);
#endif
    plans_destroy_(context);
    uform_cuda_gemm_destroy(context->gemm);
    if (context->stream) cudaStreamDestroy(context->stream);
    free(context->blocks);
    free(context->tensors), free(context->codes), free(context->code_scales);
    free(context->staging);
    free(context);
}

int uform_cuda_forward_decodes_jpeg(void) {
#if defined(UFORM_HAVE_NVJPEG)
    return 1;
#else
    return 0;
#endif
}

/* Makes the decoded patches hold `cells`, keeping those already there (a pass's images arrive one by one). */
static uform_status_t reserve_decoded_(uform_cuda_forward_t *context, size_t cells, char *error, size_t error_size) {
    if (cells <= context->decoded_capacity) return uform_ok_k;
    size_t grown = context->decoded_capacity * 2 > cells ? context->decoded_capacity * 2 : cells;
    grown = (grown + capacity_quantum_k - 1) / capacity_quantum_k * capacity_quantum_k;
    float *decoded = NULL;
    CHECK_CUDA(cudaMalloc((void **)&decoded, grown * uform_patch_values_k * sizeof(float)), "holding decoded patches");
    if (context->decoded) {
        cudaError_t code = cudaMemcpyAsync(decoded, context->decoded, context->decoded_capacity * uform_patch_values_k * 4,
                                           cudaMemcpyDeviceToDevice, context->stream);
        if (code == cudaSuccess) code = cudaStreamSynchronize(context->stream);
        if (code != cudaSuccess) cudaFree(decoded);
        CHECK_CUDA(code, "keeping decoded patches");
        cudaFree(context->decoded);
    }
    context->decoded = decoded, context->decoded_capacity = grown;
    return uform_ok_k;
}

uform_status_t uform_cuda_forward_decode_image(uform_cuda_forward_t *context, void const *data, size_t size, char const *name,
                                               size_t first, size_t most, size_t *rows, size_t *columns, char *error,
                                               size_t error_size) {
#if defined(UFORM_HAVE_NVJPEG)
    CHECK_CUDA(cudaSetDevice(context->device), "cudaSetDevice"); /* another context may have run on this thread */
    uform_status_t status = reserve_decoded_(context, first + most, error, error_size);
    if (status != uform_ok_k) return status;
    if (!context->decoder) {
        uform_cuda_decoder_t *decoder = NULL;
        CHECK(uform_cuda_decoder_create(context->stream, &decoder), "creating the JPEG decoder");
        context->decoder = decoder;
    }
    status = uform_cuda_decode_patches(context->decoder, data, size, name, most,
                                       context->decoded + first * uform_patch_values_k, most, rows, columns);
    return status == uform_ok_k ? status : uform_cuda_fail(error, error_size, status, "%s", uform_cuda_noted());
#else
    (void)context, (void)data, (void)size, (void)first, (void)most, (void)rows, (void)columns;
    return uform_cuda_fail(error, error_size, uform_unsupported_k, "%s: this build decodes JPEGs on the host only", name);
#endif
}

uform_status_t uform_cuda_forward_stage_patches(uform_cuda_forward_t *context, float const *patches, size_t first, size_t count,
                                                char *error, size_t error_size) {
    CHECK_CUDA(cudaSetDevice(context->device), "cudaSetDevice");
    uform_status_t status = reserve_decoded_(context, first + count, error, error_size);
    if (status != uform_ok_k) return status;
    /* pageable memory: the call returns once the source is read, so the caller may reuse it */
    CHECK_CUDA(cudaMemcpyAsync(context->decoded + first * uform_patch_values_k, patches,
                               count * uform_patch_values_k * sizeof(float), cudaMemcpyHostToDevice, context->stream),
               "uploading patches decoded on the host");
    return uform_ok_k;
}

float const *uform_cuda_forward_decoded(uform_cuda_forward_t const *context) { return context->decoded; }

/* A matrix's E4M3 codes at one scale, max |w| / 448 (1 for a zero matrix), repeated in scales [rows]. */
static void e4m3_matrix_(uint16_t const *w, size_t count, size_t rows, float *scales, uint8_t *codes) {
    float largest = 0;
    for (size_t i = 0; i < count; ++i) largest = fmaxf(largest, fabsf(uform_bf16_to_f32(w[i])));
    float scale = largest > 0 ? largest / UFORM_E4M3_LARGEST : 1.0f;
    for (size_t i = 0; i < count; ++i) codes[i] = uform_f32_to_e4m3(uform_bf16_to_f32(w[i]) / scale);
    for (size_t r = 0; r < rows; ++r) scales[r] = scale;
}

/* The largest Euclidean norm of rows [first, last) of a BF16 matrix `columns` wide. */
static double largest_row_norm_(uint16_t const *w, size_t first, size_t last, size_t columns) {
    double largest = 0;
    for (size_t r = first; r < last; ++r) {
        double squares = 0;
        for (size_t j = 0; j < columns; ++j) squares += (double)uform_bf16_to_f32(w[r * columns + j]) * uform_bf16_to_f32(w[r * columns + j]);
        largest = fmax(largest, sqrt(squares));
    }
    return largest;
}

static double largest_magnitude_(float const *x, size_t count) {
    double largest = 0;
    for (size_t i = 0; i < count; ++i) largest = fmax(largest, fabs((double)x[i]));
    return largest;
}

/* A block's bounded input scales (docs/precision.md, "The scaling scheme, by measurement"), each a
 * bound on its product's input from the weights alone, over 448: after a norm of gain g, sqrt(d) max|g|;
 * the attention's output, a convex combination of value rows, that times max ||W_v row||; SwiGLU's
 * |silu(a) b| <= max(|a|, 0.28) |b|, a and b bounded as v is; then gate_up's output, the larger of a's and b's;
 * then q and k after rotation (sqrt(2) times their largest column bound: a rotation mixes two) and v. */
static void e4m3_input_scales_(uform_model_t const *model, size_t block, float scales[uform_scale_v_k + 1]) {
    uform_config_t const *config = &model->config;
    size_t d = config->width;
    double root = sqrt((double)d);
    double attn = root * largest_magnitude_(model->weights[uform_tensor_index(config, uform_tensor_attn_norm_k, block)].f32, d);
    double mlp = root * largest_magnitude_(model->weights[uform_tensor_index(config, uform_tensor_mlp_norm_k, block)].f32, d);
    uint16_t const *qkv = model->weights[uform_tensor_index(config, uform_tensor_qkv_k, block)].bf16;
    uint16_t const *gate_up = model->weights[uform_tensor_index(config, uform_tensor_gate_up_k, block)].bf16;
    double gate = mlp * largest_row_norm_(gate_up, 0, 4 * d, d), up = mlp * largest_row_norm_(gate_up, 4 * d, 8 * d, d);
    double v = attn * largest_row_norm_(qkv, 2 * d, 3 * d, d);
    double bounds[uform_scale_v_k + 1] = {attn, v, mlp, fmax(gate, 0.28) * up, fmax(gate, up),
                                          sqrt(2.0) * attn * largest_row_norm_(qkv, 0, d, d),
                                          sqrt(2.0) * attn * largest_row_norm_(qkv, d, 2 * d, d), v};
    for (int i = 0; i <= uform_scale_v_k; ++i)
        scales[i] = bounds[i] > 0 && isfinite(bounds[i]) ? (float)(bounds[i] / UFORM_E4M3_LARGEST) : 1.0f;
}

uform_status_t uform_cuda_forward_upload(uform_cuda_forward_t *context, uform_model_t const *model, char *error,
                                         size_t error_size) {
    CHECK_CUDA(cudaSetDevice(context->device), "cudaSetDevice");
    CHECK_CUDA(cudaStreamSynchronize(context->stream), "waiting for the last pass");
    cudaFree(context->weights);
    context->weights = NULL;
    free(context->blocks);
    size_t d = model->config.width;
    size_t widest = model->config.embedding_widths[model->config.embedding_widths_count - 1];
    int narrow = model->precision == uform_precision_e4m3_k;
    if (d != context->width || widest != context->widest || model->config.colbert_width != context->colbert_width ||
        narrow != context->narrow) {
        cudaFree(context->activations); /* laid out for other shapes: taken again at the next pass */
        context->activations = NULL;
        context->capacity = 0;
        for (size_t k = 0; k < uform_media_kinds_k; ++k)
            cudaFree(context->media[k].memory), context->media[k].memory = NULL, context->media[k].capacity = 0;
    }
    context->width = d, context->depth = model->config.depth, context->narrow = narrow;
    context->widest = widest, context->colbert_width = model->config.colbert_width;
    free(context->tensors), free(context->codes), free(context->code_scales);
    context->blocks = calloc(context->depth, sizeof(*context->blocks));
    context->tensors = calloc(model->tensors_count, sizeof(*context->tensors));
    context->codes = calloc(model->tensors_count, sizeof(*context->codes));
    context->code_scales = calloc(model->tensors_count, sizeof(*context->code_scales));
    if (!context->blocks || !context->tensors || !context->codes || !context->code_scales) return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "cannot allocate the GPU weight table");
    layout_t layout = {NULL, 0};
    weights_layout_(context, model, &layout);
    int code = (int)cudaMalloc((void **)&context->weights, layout.used);
    if (code) {
        context->weights = NULL;
        return uform_cuda_fail(error, error_size, code == (int)cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_unsupported_k,
                     "CUDA: cannot take %.3f GiB of device memory for the weights: %s", layout.used / 1073741824.0,
                     cudaGetErrorString((cudaError_t)code));
    }
    layout = (layout_t){context->weights, 0};
    weights_layout_(context, model, &layout);
    cudaStream_t s = context->stream;
    enum cudaMemcpyKind up = cudaMemcpyHostToDevice;
    for (size_t i = 0; i < model->tensors_count; ++i) {
        uform_tensor_info_t const *info = &model->tensors[i];
        if (!context->tensors[i]) continue;
        void const *host = info->matrix ? (void const *)model->weights[i].bf16 : model->weights[i].f32;
        char what[96];
        snprintf(what, sizeof(what), "uploading %s", info->name);
        size_t bytes = info->rows * info->columns * (info->matrix ? 2 : 4);
        CHECK_CUDA(cudaMemcpyAsync(context->tensors[i], host, bytes, up, s), what);
    }
    CHECK_CUDA(cudaStreamSynchronize(s), "uploading the weights");
    for (size_t i = 0; i < model->tensors_count; ++i) { /* E4M3 codes, made on the host: row scales as the CPU makes them, or one scale a matrix */
        uform_tensor_info_t const *info = &model->tensors[i];
        if (!context->codes[i]) continue;
        uint8_t *codes = malloc(info->rows * info->columns);
        float *scales = malloc(info->rows * sizeof(float));
        if (!codes || !scales) {
            free(codes), free(scales);
            return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "cannot quantize %s to E4M3", info->name);
        }
        if (context->bounded) e4m3_matrix_(model->weights[i].bf16, info->rows * info->columns, info->rows, scales, codes);
        else uform_e4m3_rows(model->weights[i].bf16, info->rows, info->columns, scales, codes);
        cudaError_t copied = cudaMemcpy(context->codes[i], codes, info->rows * info->columns, up);
        if (copied == cudaSuccess) copied = cudaMemcpy(context->code_scales[i], scales, info->rows * sizeof(float), up);
        free(codes), free(scales);
        CHECK_CUDA(copied, "uploading E4M3 codes");
    }
    if (!context->bounded_scales) return uform_ok_k;
    size_t per_block = uform_scale_slots_k * 4;
    float *scales = calloc(context->depth * per_block, sizeof(float));
    if (!scales) return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "cannot hold the E4M3 input scales");
    for (size_t i = 0; i < context->depth; ++i) {
        float *scale = context->blocks[i].input_scale;
        e4m3_input_scales_(model, i, scale);
        float *slots = scales + per_block * i;
        for (size_t j = 0; j <= uform_scale_v_k; ++j) slots[4 * j] = scale[j];
        slots[4 * uform_scale_gate_up_output_k] = 1.0f / scale[uform_scale_gate_up_output_k]; /* cuBLASLt multiplies D by it */
        slots[4 * uform_scale_attention_output_k] = 1.0f / scale[uform_scale_out_k]; /* FP8 attention's output, out's input scale */
        if (context->bounded == e4m3_mixed_k) scale[uform_scale_out_k] = scale[uform_scale_down_k] = 0; /* 0: a scale per row (encoder.h) */
    }
    cudaError_t copied = cudaMemcpy(context->bounded_scales, scales, context->depth * per_block * sizeof(float), up);
    free(scales);
    CHECK_CUDA(copied, "uploading the E4M3 input scales");
    return uform_ok_k;
}

/* Lays out one of the context's device allocations for `capacity` items. */
typedef void layout_fn_t(uform_cuda_forward_t *context, layout_t *layout, size_t capacity);

/* Makes a device allocation (`*memory`, laid out by `lay` for `*capacity` items) hold `needed` items, grown in
 * steps of capacity_quantum_k, and its host staging `item_bytes` an item; `what` names the items. */
static uform_status_t grow_(uform_cuda_forward_t *context, unsigned char **memory, size_t *capacity, layout_fn_t *lay,
                            size_t needed, void **staging, size_t *staging_bytes, size_t item_bytes, char const *what,
                            char *error, size_t error_size) {
    if (needed > *capacity) {
        size_t grown = (needed + capacity_quantum_k - 1) / capacity_quantum_k * capacity_quantum_k;
        CHECK_CUDA(cudaStreamSynchronize(context->stream), "waiting for the last pass");
        cudaFree(*memory);
        *memory = NULL;
        *capacity = 0;
        layout_t layout = {NULL, 0};
        lay(context, &layout, grown);
        int code = (int)cudaMalloc((void **)memory, layout.used);
        if (code) {
            *memory = NULL;
            return uform_cuda_fail(error, error_size, code == (int)cudaErrorMemoryAllocation ? uform_out_of_memory_k : uform_unsupported_k,
                         "CUDA: cannot take %.3f GiB of device memory for a pass of %zu %s: %s",
                         layout.used / 1073741824.0, needed, what, cudaGetErrorString((cudaError_t)code));
        }
        layout = (layout_t){*memory, 0};
        lay(context, &layout, grown);
        *capacity = grown;
    }
    if (*capacity * item_bytes > *staging_bytes) {
        void *grown = malloc(*capacity * item_bytes);
        if (!grown) return uform_cuda_fail(error, error_size, uform_out_of_memory_k, "cannot allocate %zu bytes of host staging",
                                 *capacity * item_bytes);
        free(*staging);
        *staging = grown;
        *staging_bytes = *capacity * item_bytes;
    }
    return uform_ok_k;
}

/* Makes the activations hold `cells` cells and the host staging every table and output of them. */
static uform_status_t reserve_(uform_cuda_forward_t *context, size_t cells, char *error, size_t error_size) {
    size_t d = context->width, cw = context->colbert_width;
    size_t row_bytes = 4 * 4; /* spans (2 per segment, segments <= cells), segment_of and values going up */
    if (d * 2 > row_bytes) row_bytes = d * 2;                   /* h in BF16 coming down */
    if (cw * 4 > row_bytes) row_bytes = cw * 4;                 /* ColBERT vectors */
    if (vocabulary_k * 4 > row_bytes) row_bytes = vocabulary_k * 4; /* logits */
    return grow_(context, &context->activations, &context->capacity, activations_layout_, cells, &context->staging,
                 &context->staging_bytes, row_bytes, "cells", error, error_size);
}

/* Lays out media kind `context->growing`'s buffers for `capacity` cells. */
static void media_layout_(uform_cuda_forward_t *context, layout_t *layout, size_t capacity) {
    forward_media_t *m = &context->media[context->growing];
    size_t values = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + context->growing))->values;
    m->counts = take_(layout, 2 * 4);
    m->cells = take_(layout, capacity * 4);
    m->rows = take_(layout, capacity * values * 4);
    m->vectors = take_(layout, capacity * values * 2);
    m->product = take_(layout, capacity * context->width * 4);
}

/* Makes media kind k's buffers hold `count` cells, and the host staging their cells and vectors. */
static uform_status_t reserve_media_(uform_cuda_forward_t *context, size_t k, size_t count, char *error, size_t error_size) {
    forward_media_t *m = &context->media[k];
    uform_media_info_t const *info = uform_media_info((uform_cell_kind_t)(uform_cell_image_k + k));
    char what[32];
    snprintf(what, sizeof(what), "%s cells", uform_part_name(info->part));
    context->growing = k;
    return grow_(context, &m->memory, &m->capacity, media_layout_, count, &m->staging, &m->staging_bytes,
                 4 + info->values * 4, what, error, error_size);
}

/* Uploads the pass's values (with PAD at media cells, a row the byte lookup may read) and each media
 * kind's cells and vectors, in its buffer's dtype; fills the media to give the frontend stage. */
static uform_status_t upload_cells_(uform_cuda_forward_t *context, uform_pass_t const *pass, uint32_t *values_staging,
                                    uform_cuda_media_t media[uform_media_kinds_k], char *error, size_t error_size) {
    size_t n = pass->cells, counts[uform_media_kinds_k] = {0}, total = 0;
    cudaStream_t s = context->stream;
    enum cudaMemcpyKind up = cudaMemcpyHostToDevice;
    memset(media, 0, uform_media_kinds_k * sizeof(*media));
    for (size_t c = 0; pass->kinds && c < n; ++c)
        if (pass->kinds[c] >= uform_cell_image_k && pass->kinds[c] <= uform_cell_audio_k) counts[pass->kinds[c] - uform_cell_image_k]++, total++;
    if (!total) {
        CHECK_CUDA(cudaMemcpyAsync(context->values, pass->values, n * 4, up, s), "uploading values");
        return uform_ok_k;
    }
    for (size_t c = 0; c < n; ++c) {
        int is_media = pass->kinds[c] >= uform_cell_image_k && pass->kinds[c] <= uform_cell_audio_k;
        values_staging[c] = is_media ? uform_pad_k : pass->values[c];
    }
    CHECK_CUDA(cudaMemcpyAsync(context->values, values_staging, n * 4, up, s), "uploading values");
    for (size_t k = 0; k < uform_media_kinds_k; ++k) {
        if (!counts[k]) continue;
        uform_cell_kind_t kind = (uform_cell_kind_t)(uform_cell_image_k + k);
        uform_media_info_t const *info = uform_media_info(kind);
        char const *name = uform_part_name(info->part);
        uform_media_t const *buffer = pass->media ? &pass->media[k] : NULL;
        if (!context->media_weights[k] || !buffer || !buffer->data)
            return uform_cuda_fail(error, error_size, uform_missing_k, "a pass of %zu %s cells, and %s", counts[k], name,
                                   context->media_weights[k] ? "no media buffer for them" : "no such frontend in the GPU's copy of the weights");
        if (buffer->dtype != uform_media_f32_k && buffer->dtype != uform_media_bf16_k)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "the %s buffer's dtype %d is neither Float32 nor BF16",
                                   name, (int)buffer->dtype);
        uform_status_t status = reserve_media_(context, k, counts[k], error, error_size);
        if (status != uform_ok_k) return status;
        forward_media_t *m = &context->media[k];
        size_t row_bytes = info->values * (buffer->dtype == uform_media_bf16_k ? 2 : 4), next = 0;
        uint32_t *cells = m->staging;
        unsigned char *rows = (unsigned char *)(cells + m->capacity);
        uint32_t *sources = (uint32_t *)rows; /* rows already on the device: which row each cell reads */
        for (size_t c = 0; c < n; ++c) {
            if (pass->kinds[c] != (uint8_t)kind) continue;
            if (pass->values[c] >= buffer->count)
                return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "%s cell %zu names row %u of %zu", name, c,
                                       pass->values[c], buffer->count);
            cells[next] = (uint32_t)c;
            if (pass->media_on_device) sources[next++] = pass->values[c];
            else memcpy(rows + next++ * row_bytes, (unsigned char const *)buffer->data + (size_t)pass->values[c] * row_bytes, row_bytes);
        }
        uint32_t live[2] = {(uint32_t)counts[k], (uint32_t)buffer->dtype};
        CHECK_CUDA(cudaMemcpyAsync(m->counts, live, sizeof(live), up, s), "uploading a media count");
        CHECK_CUDA(cudaMemcpyAsync(m->cells, cells, counts[k] * 4, up, s), "uploading media cells");
        if (!pass->media_on_device)
            CHECK_CUDA(cudaMemcpyAsync(m->rows, rows, counts[k] * row_bytes, up, s), "uploading media vectors");
        for (size_t i = 0, run; pass->media_on_device && i < next; i += run) { /* one copy a run of consecutive rows */
            for (run = 1; i + run < next && sources[i + run] == sources[i] + run;) ++run;
            CHECK_CUDA(cudaMemcpyAsync((unsigned char *)m->rows + i * row_bytes,
                                       (unsigned char const *)buffer->data + (size_t)sources[i] * row_bytes, run * row_bytes,
                                       cudaMemcpyDeviceToDevice, s),
                       "gathering decoded media vectors");
        }
        size_t capacity = (counts[k] + media_quantum_k - 1) / media_quantum_k * media_quantum_k;
        media[k] = (uform_cuda_media_t){.capacity = capacity, .counts = m->counts, .cells = m->cells, .rows = m->rows,
                                        .vectors = m->vectors, .product = m->product};
    }
    return uform_ok_k;
}

/* The residual stream: x itself (Float32), or in BF16 the first half of `middle`'s room, the block's
 * middle the second half. */
static void *stream_(uform_cuda_forward_t const *context) { return context->wide_residual ? (void *)context->x : context->middle; }
static void *middle_(uform_cuda_forward_t const *context, size_t n) {
    return context->wide_residual ? (void *)context->middle : (uint16_t *)context->middle + n * context->width;
}

/* One block, as the step runs it (encoder.h): x -> middle -> x; nothing kept, so one buffer serves both norms. */
static uform_status_t block_forward_(uform_cuda_forward_t *context, uform_cudnn_attention_t *plan, size_t l, size_t n,
                                     char *error, size_t error_size) {
    uform_cuda_block_buffers_t const buffers = {.normed1 = context->normed, .qkv = context->qkv, .attended = context->attended,
                                                .normed2 = context->normed, .gate_up = context->gate_up, .hidden = context->hidden,
                                                .scales1 = context->scales, .log_sums = context->log_sums,
                                                .middle = middle_(context, n), .scales2 = context->scales,
                                                .codes = context->input_codes, .row_scales = context->input_scales,
                                                .bf16_residual = !context->wide_residual,
                                                .rotate_in_attention = context->rotate_in_attention,
                                                .gate_up_codes = context->gate_up_codes,
                                                .fp8_attention = fp8_attention_(context)};
    void *x = stream_(context);
    CHECK(uform_cuda_block_forward(context->gemm, plan, &context->blocks[l], &buffers, x, context->rotations, context->spans,
                                   context->segment_of, n, context->width, 0, x, context->stream),
          "a block's forward");
    return uform_ok_k;
}

static size_t destination_(uform_pass_t const *pass, size_t cell) {
    return pass->destinations ? pass->destinations[cell] : cell;
}

/* Downloads `rows` rows of `bytes` bytes (`pitch` apart on the device) and writes row i at
 * target + destination(i) * bytes. */
static uform_status_t download_rows_(uform_cuda_forward_t *context, uform_pass_t const *pass, void const *source,
                                     size_t pitch, size_t bytes, size_t rows, void *target, char *error, size_t error_size) {
    cudaStream_t s = context->stream;
    void *landing = pass->destinations ? context->staging : target;
    CHECK_CUDA(cudaMemcpy2DAsync(landing, bytes, source, pitch, bytes, rows, cudaMemcpyDeviceToHost, s), "downloading outputs");
    CHECK_CUDA(cudaStreamSynchronize(s), "the pass");
    if (pass->destinations)
        for (size_t i = 0; i < rows; ++i)
            memcpy((unsigned char *)target + destination_(pass, i) * bytes, (unsigned char const *)context->staging + i * bytes,
                   bytes);
    return uform_ok_k;
}

uform_status_t uform_cuda_forward_run(uform_cuda_forward_t *context, uform_pass_t const *pass, char *error,
                                      size_t error_size) {
    size_t n = pass->cells, segments = pass->segments_count, d = context->width, cw = context->colbert_width;
    if (!n) return uform_ok_k;
    if ((pass->pooled && !context->pool_proj) || (pass->colbert && !context->rerank_proj) || (pass->logits && !context->mlm_head))
        return uform_cuda_fail(error, error_size, uform_missing_k, "the GPU's copy of the weights lacks a head this pass needs");
    if (!segments || segments > n)
        return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "a pass of %zu cells with %zu segments", n, segments);
    CHECK_CUDA(cudaSetDevice(context->device), "cudaSetDevice");
    uform_status_t status = reserve_(context, n, error, error_size);
    if (status != uform_ok_k) return status;
    cudaStream_t s = context->stream;
    enum cudaMemcpyKind up = cudaMemcpyHostToDevice;

    /* The segment tables attention.cu and pool.cu read: (first cell, length) per segment, and
     * each cell's segment; segments are contiguous runs in cell order covering every cell. */
    uint32_t *spans = context->staging, *segment_of = spans + 2 * segments;
    size_t covered = 0, longest = 0;
    for (size_t segment = 0; segment < segments; ++segment) {
        uform_span_t const *span = &pass->segments[segment];
        if (span->length > longest) longest = span->length;
        if (span->start != covered || !span->length || span->start + span->length > n)
            return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "segment %zu (cells %zu..+%zu) is not the next run of cells",
                         segment, span->start, span->length);
        spans[2 * segment] = (uint32_t)span->start;
        spans[2 * segment + 1] = (uint32_t)span->length;
        for (size_t t = 0; t < span->length; ++t) segment_of[span->start + t] = (uint32_t)segment;
        covered += span->length;
    }
    if (covered != n) return uform_cuda_fail(error, error_size, uform_invalid_argument_k, "segments cover %zu of %zu cells", covered, n);
    uform_cuda_media_t media[uform_media_kinds_k];
    status = upload_cells_(context, pass, segment_of + n, media, error, error_size);
    if (status != uform_ok_k) return status;
    CHECK_CUDA(cudaMemcpyAsync(context->positions, pass->positions, n * 3 * 4, up, s), "uploading positions");
    CHECK_CUDA(cudaMemcpyAsync(context->spans, spans, segments * 2 * 4, up, s), "uploading spans");
    CHECK_CUDA(cudaMemcpyAsync(context->segment_of, segment_of, n * 4, up, s), "uploading segments");
    /* The pageable copies above have left the staging buffer when they return; the stream orders the rest. */

    CHECK(uform_cuda_rope_table(context->positions, n, context->rotations, s), "the M-RoPE table");
    uform_cuda_frontend_t frontend = {.bytes = context->embed};
    for (size_t k = 0; k < uform_media_kinds_k; ++k)
        frontend.weights[k] = context->media_weights[k], frontend.biases[k] = context->media_biases[k];
    CHECK(uform_cuda_frontend_forward(context->gemm, &frontend, media, context->values, n, d, context->x, s),
          "the frontend stage");
    if (!context->wide_residual) CHECK(uform_cuda_round_bf16(context->x, n * d, stream_(context), s), "the residual stream in BF16");
    uform_cudnn_attention_t *plan = NULL;
    if ((status = attention_plan_(context, segments, longest, n, &plan, error, error_size)) != uform_ok_k) return status;
    for (size_t l = 0; l < context->depth; ++l) {
        status = block_forward_(context, plan, l, n, error, error_size);
        if (status != uform_ok_k) return status;
    }
    uint16_t *h = context->normed; /* h = rmsnorm(x, final_norm), BF16: the heads' operand */
    CHECK(context->wide_residual ? uform_cuda_rmsnorm_forward(context->x, context->final_norm, n, d, h, context->scales, s)
                                 : uform_cuda_rmsnorm_forward_bf16(stream_(context), context->final_norm, n, d, h, context->scales,
                                                                   NULL, NULL, 0, s),
          "rmsnorm (final_norm)");
    if (pass->colbert) {
        CHECK(uform_cuda_gemm(context->gemm, 0, 1, n, cw, d, h, d, context->rerank_proj, d, NULL, context->colbert_raw, cw, 1, s),
              "the rerank.proj product");
        CHECK(uform_cuda_normalize_rows_forward(context->colbert_raw, n, cw, context->colbert, context->inverse_norms, s),
              "normalizing ColBERT rows");
    }
    if (pass->logits)
        CHECK(uform_cuda_gemm(context->gemm, 0, 1, n, vocabulary_k, d, h, d, context->mlm_head, d, NULL, context->logits,
                              logits_stride_k, 1, s), "the mlm.head product");
    size_t e = context->widest, e_stride = embeddings_stride_(context);
    if (pass->pooled) {
        CHECK(uform_cuda_pool_forward(h, context->pool_query, context->spans, segments, d, context->pooled,
                                      context->pool_weights, s), "the attention pool");
        CHECK(uform_cuda_gemm(context->gemm, 0, 1, segments, e, d, context->pooled, d, context->pool_proj, d, NULL,
                              context->embeddings, e_stride, 1, s), "the pool.proj product");
    }
    CHECK_CUDA(cudaStreamSynchronize(s), "the pass");

    if (pass->pooled) { /* one row per segment, in order: no destinations */
        CHECK_CUDA(cudaMemcpy2DAsync(pass->pooled, e * 4, context->embeddings, e_stride * 4, e * 4, segments,
                                cudaMemcpyDeviceToHost, s), "downloading embeddings");
        CHECK_CUDA(cudaStreamSynchronize(s), "downloading embeddings");
    }
    if (pass->colbert) {
        status = download_rows_(context, pass, context->colbert, cw * 4, cw * 4, n, pass->colbert, error, error_size);
        if (status != uform_ok_k) return status;
    }
    if (pass->logits) {
        status = download_rows_(context, pass, context->logits, logits_stride_k * 4, vocabulary_k * 4, n, pass->logits,
                                error, error_size);
        if (status != uform_ok_k) return status;
    }
    if (pass->hidden) { /* BF16 h widened exactly to Float32 */
        uint16_t const *rows = context->staging;
        CHECK_CUDA(cudaMemcpyAsync(context->staging, h, n * d * 2, cudaMemcpyDeviceToHost, s), "downloading h");
        CHECK_CUDA(cudaStreamSynchronize(s), "downloading h");
        for (size_t i = 0; i < n; ++i) {
            float *target = pass->hidden + destination_(pass, i) * d;
            for (size_t j = 0; j < d; ++j) {
                uint32_t bits = (uint32_t)rows[i * d + j] << 16;
                memcpy(&target[j], &bits, sizeof(bits));
            }
        }
    }
    return uform_ok_k;
}
