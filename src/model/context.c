/*  context.c: contexts (context.h): creation, devices, threads, the workspace, and running a pass. */
#include "model/context.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "cpu/forward.h"
#include "cpu/kernels.h"
#if defined(UFORM_HAVE_CUDA)
#include "cuda/forward.h"
#endif

uform_status_t uform_context_open(uform_model_t *model, uform_device_t device, size_t threads, char const *verb,
                                  uform_context_t **result) {
    if (threads > 1024) return uform_fail(uform_invalid_argument_k, "%s: %zu threads is too many", verb, threads);
    uform_context_t *context = calloc(1, sizeof(*context));
    if (!context) return uform_fail(uform_out_of_memory_k, "%s: cannot allocate a context", verb);
    context->model = model;
    uform_status_t status = uform_pool_create(threads, &context->pool);
    if (status == uform_ok_k) status = uform_workspace_reserve(context, 2 * model->config.columns);
    if (status == uform_ok_k && device != uform_device_cpu_k) status = uform_context_move(context, device, verb);
    if (status != uform_ok_k) {
        uform_context_close(context);
        return status;
    }
    *result = context;
    return uform_ok_k;
}

void uform_context_close(uform_context_t *context) {
    if (!context) return;
#if defined(UFORM_HAVE_CUDA)
    uform_cuda_forward_destroy(context->cuda);
#endif
    uform_pool_destroy(context->pool);
    uform_arena_destroy(&context->workspace.arena);
    free(context->workspace.scratch);
    free(context);
}

uform_status_t uform_context_move(uform_context_t *context, uform_device_t device, char const *verb) {
    if (device != uform_device_cpu_k && device != uform_device_cuda_k)
        return uform_fail(uform_invalid_argument_k, "%s: unknown device %d (cpu %d or cuda %d)", verb, (int)device,
                          (int)uform_device_cpu_k, (int)uform_device_cuda_k);
    if (device == uform_device_cpu_k) {
#if defined(UFORM_HAVE_CUDA)
        uform_cuda_forward_destroy(context->cuda);
#endif
        context->cuda = NULL;
        context->device = uform_device_cpu_k;
        return uform_ok_k;
    }
#if !defined(UFORM_HAVE_CUDA)
    return uform_fail(uform_unsupported_k, "%s: this libuform was built without the CUDA backend (it is built where CMake "
                                           "finds nvcc, with UFORM_CUDA=ON)", verb);
#else
    if (context->device == uform_device_cuda_k) return uform_ok_k;
    uform_model_t *model = context->model;
    if (model->precision == uform_precision_f32_k || model->precision == uform_precision_int8_k)
        return uform_fail(uform_unsupported_k, "%s: the GPU runs the BF16 and E4M3 precisions, and this model is set to %s", verb,
                          model->precision == uform_precision_f32_k ? "Float32"
                                                                    : "int8 (int8 products run on the CPU only): set the "
                                                                      "precision to bf16 or e4m3 first");
    uform_model_prepare(model); /* the CPU's copies stay current too */
    char error[512] = "";
    uform_cuda_forward_t *cuda = NULL;
    uform_status_t status = uform_cuda_forward_create(&cuda, error, sizeof(error));
    if (status == uform_ok_k) status = uform_cuda_forward_upload(cuda, model, error, sizeof(error));
    if (status != uform_ok_k) {
        uform_cuda_forward_destroy(cuda);
        return uform_fail(status, "%s: %s", verb, error);
    }
    context->cuda = cuda;
    context->uploaded = model->version;
    context->device = uform_device_cuda_k;
    return uform_ok_k;
#endif
}

uform_status_t uform_context_threads(uform_context_t *context, size_t threads) {
    uform_pool_t *pool;
    UFORM_TRY(uform_pool_create(threads, &pool));
    uform_pool_destroy(context->pool);
    context->pool = pool;
    return uform_workspace_reserve(context, context->workspace.cells);
}

uform_status_t uform_context_pass(uform_context_t *context, uform_pass_t const *pass) {
    uform_model_t *model = context->model;
    uform_model_prepare(model);
#if defined(UFORM_HAVE_CUDA)
    if (context->device == uform_device_cuda_k) {
        if (model->precision == uform_precision_int8_k || model->precision == uform_precision_f32_k)
            return uform_fail(uform_unsupported_k, "GPU pass: the model was set to %s since this context moved to the GPU, "
                              "which runs bf16 and e4m3 only%s", uform_precision_name(model->precision),
                              model->precision == uform_precision_int8_k ? " (int8 products run on the CPU only)" : "");
        char error[512] = "";
        uform_status_t status = uform_ok_k;
        if (context->uploaded != model->version &&
            (status = uform_cuda_forward_upload(context->cuda, model, error, sizeof(error))) == uform_ok_k)
            context->uploaded = model->version;
        if (status == uform_ok_k) status = uform_cuda_forward_run(context->cuda, pass, error, sizeof(error));
        return status == uform_ok_k ? status : uform_fail(status, "GPU pass: %s", error);
    }
#endif
    uform_cpu_forward(context, pass);
    return uform_ok_k;
}

uform_status_t uform_workspace_reserve(uform_context_t *context, size_t cells) {
    uform_model_t const *model = context->model;
    uform_workspace_t *workspace = &context->workspace;
    size_t threads = uform_pool_threads(context->pool);
    if (cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "a pass of %zu cells exceeds the most a workspace holds, %d", cells,
                          uform_max_cells_k);
    if (cells < model->config.columns) cells = model->config.columns;
    if (workspace->arena.base && cells <= workspace->cells && threads == workspace->scratch_threads) return uform_ok_k;
    if (cells < workspace->cells) cells = workspace->cells;
    size_t d = model->config.width, span = cells; /* the longest segment is at most all the cells */
    size_t tile = uform_tile_rows_k, query_tile = uform_query_tile_k, head = uform_head_width_k;
    size_t vocabulary_columns = uform_vocabulary_k > 8 * d ? uform_vocabulary_k : 8 * d;
    size_t wide = 4 * d > uform_tube_values_k ? 4 * d : uform_tube_values_k; /* the MLP's inputs, or a media frontend's */
    size_t packed_keys = uform_packed_size(span, head), packed_values = uform_packed_size(head, span + 1);
    size_t panels_bf16 = uform_e4m3_panels_k * uform_packed_size(16, wide);
    size_t per_thread = 64 * 14 + query_tile * uform_query_stride_k * sizeof(uint16_t) + tile * sizeof(float) + panels_bf16 + tile * wide * sizeof(uint16_t) + tile * vocabulary_columns * sizeof(float) +
                        tile * wide * sizeof(float) + tile * d * sizeof(float) + query_tile * (span + uform_attention_skew_k) * sizeof(float) +
                        query_tile * (span + 1 + 2 * uform_attention_skew_k) * sizeof(uint16_t) + query_tile * sizeof(float) + packed_keys + packed_values;
    size_t colbert = model->config.colbert_width, widest = model->config.embedding_widths[model->config.embedding_widths_count - 1];
    size_t shared = 64 * 16 + cells * d * sizeof(float) * 4 + cells * 3 * d * sizeof(float) +
                    cells * colbert * sizeof(float) + model->config.columns * colbert * sizeof(float) +
                    cells * widest * sizeof(float) + cells * (4 * sizeof(uint32_t) + 1 + sizeof(size_t) + sizeof(uform_span_t)) + 64;
    uform_arena_t arena;
    if (uform_arena_create(&arena, shared + threads * per_thread) != uform_ok_k)
        return uform_fail(uform_out_of_memory_k, "cannot allocate a workspace for %zu cells (%zu bytes)", cells,
                          shared + threads * per_thread);
    uform_scratch_t *scratch = calloc(threads, sizeof(*scratch));
    if (!scratch) {
        uform_arena_destroy(&arena);
        return uform_fail(uform_out_of_memory_k, "cannot allocate thread scratch");
    }
    uform_arena_destroy(&workspace->arena);
    free(workspace->scratch);
    workspace->arena = arena;
    workspace->scratch = scratch;
    workspace->scratch_threads = threads;
    workspace->cells = cells;
    workspace->residual = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->normed = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->qkv = uform_arena_take(&arena, cells * 3 * d * sizeof(float));
    workspace->qkv_bf16 = (uint16_t *)workspace->qkv;
    uint8_t *past_bf16 = (uint8_t *)(workspace->qkv_bf16 + cells * 3 * d); /* 6d bytes a cell; these take 2d + 12 d / 64 */
    size_t heads = model->config.heads;
    workspace->q_int8 = past_bf16;
    workspace->k_int8 = past_bf16 + cells * d;
    workspace->q_scales = (float *)(past_bf16 + 2 * cells * d);
    workspace->k_scales = workspace->q_scales + cells * heads;
    workspace->k_corrections = (int32_t *)(workspace->k_scales + cells * heads);
    workspace->attention = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->pooled = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->colbert = uform_arena_take(&arena, cells * colbert * sizeof(float));
    workspace->query_colbert = uform_arena_take(&arena, model->config.columns * colbert * sizeof(float));
    workspace->embeddings = uform_arena_take(&arena, cells * widest * sizeof(float));
    workspace->kinds = uform_arena_take(&arena, cells);
    workspace->values = uform_arena_take(&arena, cells * sizeof(uint32_t));
    workspace->positions = uform_arena_take(&arena, cells * 3 * sizeof(int32_t));
    workspace->destinations = uform_arena_take(&arena, cells * sizeof(size_t));
    workspace->spans = uform_arena_take(&arena, cells * sizeof(uform_span_t));
    for (size_t t = 0; t < threads; ++t) {
        uform_scratch_t *s = &scratch[t];
        s->inputs_bf16 = uform_arena_take(&arena, tile * wide * sizeof(uint16_t));
        s->inputs_int8 = (uint8_t *)s->inputs_bf16; /* a byte a value, rows padded to 4: fits where BF16's 2 bytes did */
        s->gate_up = uform_arena_take(&arena, tile * vocabulary_columns * sizeof(float));
        s->hidden = uform_arena_take(&arena, tile * wide * sizeof(float));
        s->product = uform_arena_take(&arena, tile * d * sizeof(float));
        s->scores = uform_arena_take(&arena, query_tile * (span + uform_attention_skew_k) * sizeof(float));
        s->probabilities = uform_arena_take(&arena, query_tile * (span + 1 + 2 * uform_attention_skew_k) * sizeof(uint16_t));
        s->sums = uform_arena_take(&arena, query_tile * sizeof(float));
        s->queries = uform_arena_take(&arena, query_tile * uform_query_stride_k * sizeof(uint16_t));
        s->keys_packed = uform_arena_take(&arena, packed_keys);
        s->values_packed = uform_arena_take(&arena, packed_values);
        s->row_scales = uform_arena_take(&arena, tile * sizeof(float));
        s->panels_bf16 = uform_arena_take(&arena, panels_bf16);
    }
    workspace->arena.used = arena.used;
    return uform_ok_k;
}
