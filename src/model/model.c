/*  model.c: creating, opening, validating, saving and configuring models. */
#define _GNU_SOURCE
#include "model/model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "core/numeric.h"
#include "core/status.h"
#include "cpu/kernels.h"
#include "model/config.h"
#include "model/safetensors.h"
#if defined(UFORM_HAVE_CUDA)
#include "cuda/forward.h"
#endif

#ifndef UFORM_COMMIT
#define UFORM_COMMIT "unknown"
#endif

static void uform_matrix_free_(uform_matrix_t *matrix) {
    free(matrix->bf16);
    free(matrix->packed);
    free(matrix->f32);
    memset(matrix, 0, sizeof(*matrix));
}

static uform_status_t uform_matrix_alloc_(uform_matrix_t *matrix, size_t rows, size_t columns) {
    matrix->rows = rows;
    matrix->columns = columns;
    matrix->bf16 = malloc(rows * columns * sizeof(uint16_t));
    if (!matrix->bf16) return uform_fail(uform_out_of_memory_k, "cannot allocate a %zux%zu matrix", rows, columns);
    return uform_ok_k;
}

/* Builds what the products of the current precision need: a packed copy or a widened one. */
static uform_status_t uform_matrix_prepare_(uform_matrix_t *matrix, uform_precision_t precision) {
    if (!matrix->rows) return uform_ok_k;
    free(matrix->packed);
    free(matrix->f32);
    matrix->packed = NULL;
    matrix->f32 = NULL;
    if (precision == uform_precision_bf16_k) {
        matrix->packed = aligned_alloc(64, (uform_packed_size(matrix->rows, matrix->columns) + 63) & ~(size_t)63);
        if (!matrix->packed) return uform_fail(uform_out_of_memory_k, "cannot pack a %zux%zu matrix", matrix->rows, matrix->columns);
        uform_pack_bf16(matrix->bf16, matrix->rows, matrix->columns, matrix->columns, 1, matrix->packed);
    } else {
        matrix->f32 = malloc(matrix->rows * matrix->columns * sizeof(float));
        if (!matrix->f32) return uform_fail(uform_out_of_memory_k, "cannot widen a %zux%zu matrix", matrix->rows, matrix->columns);
        uform_f32_from_bf16_array(matrix->bf16, matrix->f32, matrix->rows * matrix->columns);
    }
    return uform_ok_k;
}

static void uform_matrix_refresh_(uform_matrix_t *matrix) {
    if (matrix->packed) uform_pack_bf16(matrix->bf16, matrix->rows, matrix->columns, matrix->columns, 1, matrix->packed);
    if (matrix->f32) uform_f32_from_bf16_array(matrix->bf16, matrix->f32, matrix->rows * matrix->columns);
}

void uform_model_refresh(uform_model_t *model) {
    for (size_t i = 0; i < model->config.depth; ++i) {
        uform_matrix_refresh_(&model->blocks[i].qkv);
        uform_matrix_refresh_(&model->blocks[i].out);
        uform_matrix_refresh_(&model->blocks[i].gate_up);
        uform_matrix_refresh_(&model->blocks[i].down);
    }
    uform_matrix_refresh_(&model->pool_proj);
    uform_matrix_refresh_(&model->rerank_proj);
    uform_matrix_refresh_(&model->mlm_head);
    model->stale = 0;
    model->cuda_stale = 1; /* the GPU's copy, if any, follows before its next pass */
}

void uform_model_close(uform_model_t *model) {
    if (!model) return;
#if defined(UFORM_HAVE_CUDA)
    uform_cuda_forward_destroy(model->cuda);
#endif
    uform_matrix_free_(&model->embed);
    for (size_t i = 0; model->blocks && i < model->config.depth; ++i) {
        uform_block_t *block = &model->blocks[i];
        free(block->attn_norm);
        free(block->mlp_norm);
        uform_matrix_free_(&block->qkv);
        uform_matrix_free_(&block->out);
        uform_matrix_free_(&block->gate_up);
        uform_matrix_free_(&block->down);
    }
    free(model->blocks);
    free(model->final_norm);
    free(model->pool_query);
    uform_matrix_free_(&model->pool_proj);
    uform_matrix_free_(&model->rerank_proj);
    uform_matrix_free_(&model->mlm_head);
    uform_pool_destroy(model->pool);
    uform_arena_destroy(&model->workspace.arena);
    free(model->workspace.scratch);
    free(model->rope_cos);
    free(model->rope_sin);
    free(model);
}

/* Everything but the weights' values: the skeleton, the pool, the rotary table, packed weights. */
static uform_status_t uform_model_finish_(uform_model_t *model) {
    uform_status_t status = uform_pool_create(0, &model->pool);
    if (status != uform_ok_k) return status;
    model->rope_cos = malloc(sizeof(float) * uform_rope_table_k * uform_rope_slots_k);
    model->rope_sin = malloc(sizeof(float) * uform_rope_table_k * uform_rope_slots_k);
    if (!model->rope_cos || !model->rope_sin) return uform_fail(uform_out_of_memory_k, "cannot allocate the rotary table");
    for (size_t p = 0; p < uform_rope_table_k; ++p)
        for (size_t j = 0; j < uform_rope_slots_k; ++j) {
            double angle = (double)p * pow(10000.0, -(double)j / 32.0);
            model->rope_cos[p * uform_rope_slots_k + j] = (float)cos(angle);
            model->rope_sin[p * uform_rope_slots_k + j] = (float)sin(angle);
        }
    model->precision = uform_precision_f32_k; /* so that the call below prepares every matrix */
    UFORM_TRY(uform_model_set_precision(model, uform_precision_bf16_k));
    return uform_workspace_reserve(model, 2 * model->config.columns);
}

static uform_status_t uform_model_skeleton_(uform_config_t const *config, uform_model_t **result) {
    uform_model_t *model = calloc(1, sizeof(*model));
    if (!model) return uform_fail(uform_out_of_memory_k, "cannot allocate a model");
    model->config = *config;
    model->blocks = calloc(config->depth, sizeof(uform_block_t));
    size_t d = config->width, widest = config->embedding_widths[config->embedding_widths_count - 1];
    uform_status_t status = model->blocks ? uform_ok_k : uform_fail(uform_out_of_memory_k, "cannot allocate blocks");
    if (status == uform_ok_k) status = uform_matrix_alloc_(&model->embed, uform_vocabulary_k, d);
    for (size_t i = 0; status == uform_ok_k && i < config->depth; ++i) {
        uform_block_t *block = &model->blocks[i];
        block->attn_norm = malloc(d * sizeof(float));
        block->mlp_norm = malloc(d * sizeof(float));
        if (!block->attn_norm || !block->mlp_norm) status = uform_fail(uform_out_of_memory_k, "cannot allocate norms");
        if (status == uform_ok_k) status = uform_matrix_alloc_(&block->qkv, 3 * d, d);
        if (status == uform_ok_k) status = uform_matrix_alloc_(&block->out, d, d);
        if (status == uform_ok_k) status = uform_matrix_alloc_(&block->gate_up, 8 * d, d);
        if (status == uform_ok_k) status = uform_matrix_alloc_(&block->down, d, 4 * d);
    }
    if (status == uform_ok_k) {
        model->final_norm = malloc(d * sizeof(float));
        model->pool_query = malloc(d * sizeof(float));
        if (!model->final_norm || !model->pool_query) status = uform_fail(uform_out_of_memory_k, "cannot allocate heads");
    }
    if (status == uform_ok_k) status = uform_matrix_alloc_(&model->pool_proj, widest, d);
    if (status == uform_ok_k) status = uform_matrix_alloc_(&model->rerank_proj, config->colbert_width, d);
    if (status == uform_ok_k) status = uform_matrix_alloc_(&model->mlm_head, uform_vocabulary_k, d);
    if (status != uform_ok_k) {
        uform_model_close(model);
        return status;
    }
    *result = model;
    return uform_ok_k;
}

static void uform_fill_normal_(uform_matrix_t *matrix, uform_rng_t *rng, double deviation) {
    for (size_t i = 0; i < matrix->rows * matrix->columns; ++i)
        matrix->bf16[i] = uform_f32_to_bf16((float)(deviation * uform_rng_normal(rng)));
}

static void uform_fill_constant_(float *vector, size_t count, float value) {
    for (size_t i = 0; i < count; ++i) vector[i] = value;
}

/* Initializes one head as uform_model_init does (its own RNG stream after the blocks'), and the
 * SigLIP scalars with the pool and rerank heads, since those losses share them. */
static void uform_fill_heads_(uform_model_t *model, uint64_t seed, char const *head) {
    double input_deviation = 1.0 / sqrt((double)model->config.width);
    uint64_t stream = 1 + 4 * model->config.depth + (!strcmp(head, "pool") ? 0 : !strcmp(head, "rerank") ? 1 : 2);
    uform_rng_t rng = {seed * 0x100000001b3ull + stream};
    if (!strcmp(head, "pool")) {
        uform_fill_constant_(model->pool_query, model->config.width, 0.0f);
        uform_fill_normal_(&model->pool_proj, &rng, input_deviation);
    } else if (!strcmp(head, "rerank")) uform_fill_normal_(&model->rerank_proj, &rng, input_deviation);
    else uform_fill_normal_(&model->mlm_head, &rng, input_deviation);
    if (strcmp(head, "mlm")) {
        model->siglip_scale = (float)log(10.0);
        model->siglip_bias = -10.0f;
    }
}

uform_status_t uform_model_init_head(uform_model_t *model, char const *head, uint64_t seed) {
    if (!model || !head) return uform_fail(uform_invalid_argument_k, "uform_model_init_head: NULL argument");
    size_t d = model->config.width, widest = model->config.embedding_widths[model->config.embedding_widths_count - 1];
    uform_matrix_t *matrix = NULL;
    if (!strcmp(head, "pool")) {
        matrix = &model->pool_proj;
        if (!model->pool_query && !(model->pool_query = malloc(d * sizeof(float))))
            return uform_fail(uform_out_of_memory_k, "cannot allocate the pool head");
        if (!matrix->rows) UFORM_TRY(uform_matrix_alloc_(matrix, widest, d));
    } else if (!strcmp(head, "rerank")) {
        matrix = &model->rerank_proj;
        if (!matrix->rows) UFORM_TRY(uform_matrix_alloc_(matrix, model->config.colbert_width, d));
    } else if (!strcmp(head, "mlm")) {
        matrix = &model->mlm_head;
        if (!matrix->rows) UFORM_TRY(uform_matrix_alloc_(matrix, uform_vocabulary_k, d));
    } else {
        return uform_fail(uform_invalid_argument_k, "uform_model_init_head: unknown head '%s' (pool, rerank or mlm)", head);
    }
    uform_fill_heads_(model, seed, head);
    model->cuda_stale = 1;
    return uform_matrix_prepare_(matrix, model->precision);
}

uform_status_t uform_model_init(uform_config_t const *config, uint64_t seed, uform_model_t **result) {
    if (!config || !result) return uform_fail(uform_invalid_argument_k, "uform_model_init: NULL argument");
    if (!config->width || config->width % 64 || config->width > 8192)
        return uform_fail(uform_invalid_argument_k, "uform_model_init: width %zu is not a multiple of 64 in 64..8192", config->width);
    if (!config->depth || config->depth > 256)
        return uform_fail(uform_invalid_argument_k, "uform_model_init: depth %zu is outside 1..256", config->depth);
    if (config->heads != config->width / 64)
        return uform_fail(uform_invalid_argument_k, "uform_model_init: heads %zu must be width / 64 = %zu", config->heads, config->width / 64);
    if (!config->embedding_widths_count || config->embedding_widths_count > uform_max_embedding_widths_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_init: %zu embedding widths, 1..%d needed", config->embedding_widths_count, uform_max_embedding_widths_k);
    for (size_t i = 0; i < config->embedding_widths_count; ++i)
        if (config->embedding_widths[i] > config->width || (i && config->embedding_widths[i] <= config->embedding_widths[i - 1]) || !config->embedding_widths[i])
            return uform_fail(uform_invalid_argument_k, "uform_model_init: embedding widths must ascend from 1 up to the width %zu", config->width);
    if (!config->colbert_width || config->colbert_width > 4096 || !config->columns || config->columns > 65536)
        return uform_fail(uform_invalid_argument_k, "uform_model_init: colbert_width %zu must be in 1..4096 and columns %zu in 1..65536", config->colbert_width, config->columns);
    uform_model_t *model;
    UFORM_TRY(uform_model_skeleton_(config, &model));
    size_t d = config->width;
    double input_deviation = 1.0 / sqrt((double)d), residual_scale = 1.0 / sqrt(2.0 * (double)config->depth);
    /* One stream per tensor, so that adding a tensor never shifts another's values. */
    uint64_t stream = 0; /* 0 embedding, then 4 per block, then the heads (uform_fill_heads_) */
    uform_rng_t rng = {seed * 0x100000001b3ull + stream++};
    uform_fill_normal_(&model->embed, &rng, 1.0);
    for (size_t i = 0; i < config->depth; ++i) {
        uform_block_t *block = &model->blocks[i];
        uform_fill_constant_(block->attn_norm, d, 1.0f);
        uform_fill_constant_(block->mlp_norm, d, 1.0f);
        rng.state = seed * 0x100000001b3ull + stream++;
        uform_fill_normal_(&block->qkv, &rng, input_deviation);
        rng.state = seed * 0x100000001b3ull + stream++;
        uform_fill_normal_(&block->out, &rng, input_deviation * residual_scale);
        rng.state = seed * 0x100000001b3ull + stream++;
        uform_fill_normal_(&block->gate_up, &rng, input_deviation);
        rng.state = seed * 0x100000001b3ull + stream++;
        uform_fill_normal_(&block->down, &rng, 0.5 * input_deviation * residual_scale);
    }
    uform_fill_constant_(model->final_norm, d, 1.0f);
    uform_fill_heads_(model, seed, "pool");
    uform_fill_heads_(model, seed, "rerank");
    uform_fill_heads_(model, seed, "mlm");
    snprintf(model->recipe, sizeof(model->recipe), "random initialization, seed %llu", (unsigned long long)seed);
    uform_status_t status = uform_model_finish_(model);
    if (status != uform_ok_k) {
        uform_model_close(model);
        return status;
    }
    *result = model;
    return uform_ok_k;
}

/* Reads the configuration JSON held in __metadata__["config"]. */
static uform_status_t uform_parse_config_(uform_safetensors_t const *file, uform_config_t *config) {
    char const *text = file->metadata ? json_string_value(json_object_get(file->metadata, "config")) : NULL;
    if (!text) return uform_fail(uform_format_k, "%s: __metadata__ has no 'config' (not a UForm checkpoint?)", file->path);
    return uform_config_parse(file->path, text, config);
}

static uform_status_t uform_check_shape_(uform_safetensors_t const *file, uform_tensor_view_t const *tensor,
                                         size_t rank, size_t rows, size_t columns) {
    int matches = tensor->rank == rank && (rank < 1 || tensor->shape[0] == rows) && (rank < 2 || tensor->shape[1] == columns);
    if (rank == 0) matches = uform_tensor_elements(tensor) == 1 && tensor->rank <= 1;
    if (matches) return uform_ok_k;
    char found[96] = "";
    for (size_t i = 0; i < tensor->rank; ++i)
        snprintf(found + strlen(found), sizeof(found) - strlen(found), "%s%zu", i ? ", " : "", tensor->shape[i]);
    if (rank == 2)
        return uform_fail(uform_shape_k, "%s: tensor '%s' has shape [%s], the config needs [%zu, %zu]", file->path,
                          tensor->name, found, rows, columns);
    if (rank == 1)
        return uform_fail(uform_shape_k, "%s: tensor '%s' has shape [%s], the config needs [%zu]", file->path,
                          tensor->name, found, rows);
    return uform_fail(uform_shape_k, "%s: tensor '%s' has shape [%s], a scalar is needed", file->path, tensor->name, found);
}

static uform_status_t uform_load_matrix_(uform_safetensors_t const *file, char const *name, uform_matrix_t *matrix) {
    uform_tensor_view_t const *tensor = uform_safetensors_find(file, name);
    if (!tensor) return uform_fail(uform_missing_k, "%s: tensor '%s' is missing", file->path, name);
    UFORM_TRY(uform_check_shape_(file, tensor, 2, matrix->rows, matrix->columns));
    size_t count = matrix->rows * matrix->columns;
    if (tensor->dtype == uform_dtype_bf16_k) memcpy(matrix->bf16, tensor->data, count * sizeof(uint16_t));
    else {
        float const *values = tensor->data;
        for (size_t i = 0; i < count; ++i) matrix->bf16[i] = uform_f32_to_bf16(values[i]);
    }
    return uform_ok_k;
}

static uform_status_t uform_load_vector_(uform_safetensors_t const *file, char const *name, size_t count, float *vector) {
    uform_tensor_view_t const *tensor = uform_safetensors_find(file, name);
    if (!tensor) return uform_fail(uform_missing_k, "%s: tensor '%s' is missing", file->path, name);
    UFORM_TRY(uform_check_shape_(file, tensor, count ? 1 : 0, count, 0));
    if (!count) count = 1;
    if (tensor->dtype == uform_dtype_f32_k) memcpy(vector, tensor->data, count * sizeof(float));
    else uform_f32_from_bf16_array(tensor->data, vector, count);
    return uform_ok_k;
}

static uform_status_t uform_load_weights_(uform_safetensors_t const *file, uform_model_t *model) {
    uform_config_t const *config = &model->config;
    size_t d = config->width;
    char name[uform_max_name_k];
    for (size_t i = 0; i < file->count; ++i) {
        unsigned long index;
        if (sscanf(file->tensors[i].name, "blocks.%lu.", &index) == 1 && index >= config->depth)
            return uform_fail(uform_format_k, "%s: tensor '%s' is beyond the config's depth %zu", file->path,
                              file->tensors[i].name, config->depth);
    }
    UFORM_TRY(uform_load_matrix_(file, "embed.bytes", &model->embed));
    for (size_t i = 0; i < config->depth; ++i) {
        uform_block_t *block = &model->blocks[i];
        snprintf(name, sizeof(name), "blocks.%zu.attn_norm", i);
        UFORM_TRY(uform_load_vector_(file, name, d, block->attn_norm));
        snprintf(name, sizeof(name), "blocks.%zu.mlp_norm", i);
        UFORM_TRY(uform_load_vector_(file, name, d, block->mlp_norm));
        snprintf(name, sizeof(name), "blocks.%zu.qkv", i);
        UFORM_TRY(uform_load_matrix_(file, name, &block->qkv));
        snprintf(name, sizeof(name), "blocks.%zu.out", i);
        UFORM_TRY(uform_load_matrix_(file, name, &block->out));
        snprintf(name, sizeof(name), "blocks.%zu.gate_up", i);
        UFORM_TRY(uform_load_matrix_(file, name, &block->gate_up));
        snprintf(name, sizeof(name), "blocks.%zu.down", i);
        UFORM_TRY(uform_load_matrix_(file, name, &block->down));
    }
    UFORM_TRY(uform_load_vector_(file, "final_norm", d, model->final_norm));
    /* Heads are optional: a checkpoint carries those its variant trained. */
    int has_query = uform_safetensors_find(file, "pool.query") != NULL, has_proj = uform_safetensors_find(file, "pool.proj") != NULL;
    if (has_query != has_proj)
        return uform_fail(uform_missing_k, "%s: the pool head needs both 'pool.query' and 'pool.proj'", file->path);
    if (has_query) {
        UFORM_TRY(uform_load_vector_(file, "pool.query", d, model->pool_query));
        UFORM_TRY(uform_load_matrix_(file, "pool.proj", &model->pool_proj));
    } else {
        free(model->pool_query);
        model->pool_query = NULL;
        uform_matrix_free_(&model->pool_proj);
    }
    if (uform_safetensors_find(file, "rerank.proj")) UFORM_TRY(uform_load_matrix_(file, "rerank.proj", &model->rerank_proj));
    else uform_matrix_free_(&model->rerank_proj);
    if (uform_safetensors_find(file, "mlm.head")) UFORM_TRY(uform_load_matrix_(file, "mlm.head", &model->mlm_head));
    else uform_matrix_free_(&model->mlm_head);
    model->siglip_scale = (float)log(10.0);
    model->siglip_bias = -10.0f;
    if (uform_safetensors_find(file, "siglip.scale")) UFORM_TRY(uform_load_vector_(file, "siglip.scale", 0, &model->siglip_scale));
    if (uform_safetensors_find(file, "siglip.bias")) UFORM_TRY(uform_load_vector_(file, "siglip.bias", 0, &model->siglip_bias));
    char const *recipe = json_string_value(json_object_get(file->metadata, "recipe"));
    char const *datasets = json_string_value(json_object_get(file->metadata, "datasets"));
    char const *warm_start = json_string_value(json_object_get(file->metadata, "warm_start"));
    snprintf(model->recipe, sizeof(model->recipe), "%s", recipe ? recipe : "unknown");
    snprintf(model->datasets, sizeof(model->datasets), "%s", datasets ? datasets : "");
    snprintf(model->warm_start, sizeof(model->warm_start), "%s", warm_start ? warm_start : "");
    return uform_ok_k;
}

uform_status_t uform_model_open(char const *directory, uform_model_t **result) {
    if (!directory || !result) return uform_fail(uform_invalid_argument_k, "uform_model_open: NULL argument");
    char path[4096];
    struct stat status_buffer;
    if (stat(directory, &status_buffer) != 0)
        return uform_fail(uform_io_k, "%s: cannot open checkpoint: %s", directory, strerror(errno));
    if (S_ISDIR(status_buffer.st_mode)) snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    else snprintf(path, sizeof(path), "%s", directory); /* a model.safetensors file named directly */
    uform_safetensors_t file;
    UFORM_TRY(uform_safetensors_open(path, &file));
    uform_config_t config;
    uform_model_t *model = NULL;
    uform_status_t status = uform_parse_config_(&file, &config);
    if (status == uform_ok_k) status = uform_model_skeleton_(&config, &model);
    if (status == uform_ok_k) status = uform_load_weights_(&file, model);
    uform_safetensors_close(&file);
    if (status == uform_ok_k) status = uform_model_finish_(model);
    if (status != uform_ok_k) {
        uform_model_close(model);
        return status;
    }
    *result = model;
    return uform_ok_k;
}

static uform_tensor_view_t uform_view_matrix_(char const *name, uform_matrix_t const *matrix) {
    uform_tensor_view_t view = {.dtype = uform_dtype_bf16_k, .rank = 2, .shape = {matrix->rows, matrix->columns},
                                .data = matrix->bf16, .bytes = matrix->rows * matrix->columns * sizeof(uint16_t)};
    snprintf(view.name, sizeof(view.name), "%s", name);
    return view;
}

static uform_tensor_view_t uform_view_vector_(char const *name, float const *vector, size_t count) {
    uform_tensor_view_t view = {.dtype = uform_dtype_f32_k, .rank = count ? 1 : 0, .shape = {count},
                                .data = vector, .bytes = (count ? count : 1) * sizeof(float)};
    snprintf(view.name, sizeof(view.name), "%s", name);
    return view;
}

static json_t *uform_config_json_(uform_config_t const *config) {
    json_t *widths = json_array();
    for (size_t i = 0; i < config->embedding_widths_count; ++i)
        json_array_append_new(widths, json_integer((json_int_t)config->embedding_widths[i]));
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:f, s:s}", "tier", config->tier, "width",
                     (json_int_t)config->width, "depth", (json_int_t)config->depth, "heads", (json_int_t)config->heads,
                     "embedding_widths", widths, "colbert_width", (json_int_t)config->colbert_width, "columns",
                     (json_int_t)config->columns, "vocabulary", (json_int_t)uform_vocabulary_k, "learning_rate",
                     config->learning_rate, "modalities", "text");
}

static void uform_hardware_(char *text, size_t capacity) {
    snprintf(text, capacity, "unknown CPU");
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (cpuinfo && fgets(line, sizeof(line), cpuinfo))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            char *name = strchr(line, ':') + 2;
            name[strcspn(name, "\n")] = 0;
            snprintf(text, capacity, "%s", name);
            break;
        }
    if (cpuinfo) fclose(cpuinfo);
    size_t length = strlen(text);
    snprintf(text + length, capacity - length, ", %zu cores", uform_cores());
}

/* mkdir -p: creates `directory` and any missing parents. */
static uform_status_t uform_make_folders_(char const *directory) {
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", directory) >= (int)sizeof(path))
        return uform_fail(uform_invalid_argument_k, "%s: path too long", directory);
    for (char *slash = path + 1;; ++slash) {
        if (*slash != '/' && *slash) continue;
        char kept = *slash;
        *slash = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return uform_fail(uform_io_k, "%s: cannot create checkpoint folder: %s", path, strerror(errno));
        *slash = kept;
        if (!kept) break;
    }
    struct stat status;
    if (stat(directory, &status) != 0 || !S_ISDIR(status.st_mode))
        return uform_fail(uform_io_k, "%s: exists and is not a folder", directory);
    return uform_ok_k;
}

uform_status_t uform_model_save(uform_model_t const *model, char const *directory, char const *command) {
    if (!model || !directory) return uform_fail(uform_invalid_argument_k, "uform_model_save: NULL argument");
    UFORM_TRY(uform_make_folders_(directory));
    uform_config_t const *config = &model->config;
    size_t d = config->width, count = 0, capacity = 6 * config->depth + 16;
    uform_tensor_view_t *views = calloc(capacity, sizeof(*views));
    if (!views) return uform_fail(uform_out_of_memory_k, "cannot list tensors to save");
    char name[uform_max_name_k];
    views[count++] = uform_view_matrix_("embed.bytes", &model->embed);
    for (size_t i = 0; i < config->depth; ++i) {
        uform_block_t const *block = &model->blocks[i];
        snprintf(name, sizeof(name), "blocks.%zu.attn_norm", i), views[count++] = uform_view_vector_(name, block->attn_norm, d);
        snprintf(name, sizeof(name), "blocks.%zu.qkv", i), views[count++] = uform_view_matrix_(name, &block->qkv);
        snprintf(name, sizeof(name), "blocks.%zu.out", i), views[count++] = uform_view_matrix_(name, &block->out);
        snprintf(name, sizeof(name), "blocks.%zu.mlp_norm", i), views[count++] = uform_view_vector_(name, block->mlp_norm, d);
        snprintf(name, sizeof(name), "blocks.%zu.gate_up", i), views[count++] = uform_view_matrix_(name, &block->gate_up);
        snprintf(name, sizeof(name), "blocks.%zu.down", i), views[count++] = uform_view_matrix_(name, &block->down);
    }
    views[count++] = uform_view_vector_("final_norm", model->final_norm, d);
    if (model->pool_query) {
        views[count++] = uform_view_vector_("pool.query", model->pool_query, d);
        views[count++] = uform_view_matrix_("pool.proj", &model->pool_proj);
    }
    if (model->rerank_proj.rows) views[count++] = uform_view_matrix_("rerank.proj", &model->rerank_proj);
    if (model->mlm_head.rows) views[count++] = uform_view_matrix_("mlm.head", &model->mlm_head);
    views[count++] = uform_view_vector_("siglip.scale", &model->siglip_scale, 0);
    views[count++] = uform_view_vector_("siglip.bias", &model->siglip_bias, 0);

    json_t *config_json = uform_config_json_(config);
    char *config_text = config_json ? json_dumps(config_json, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
    json_t *metadata = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "format", "pt", "config", config_text ? config_text : "{}",
                                 "recipe", model->recipe, "datasets", model->datasets, "warm_start", model->warm_start,
                                 "uform_version", UFORM_VERSION_STRING);
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    uform_status_t status = metadata && config_text ? uform_safetensors_write(path, views, count, metadata)
                                                    : uform_fail(uform_out_of_memory_k, "cannot build the header");
    free(views);
    if (config_json) json_decref(config_json);
    if (metadata) json_decref(metadata);

    if (status == uform_ok_k) {
        char hardware[256], date[64], readme[8192];
        uform_hardware_(hardware, sizeof(hardware));
        time_t now = time(NULL);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
        int length = snprintf(readme, sizeof(readme),
                              "# UForm checkpoint\n\n"
                              "| field | value |\n|---|---|\n"
                              "| tier | %s (width %zu, depth %zu, %zu parameters) |\n"
                              "| modalities | text (bytes) |\n"
                              "| recipe | %s |\n"
                              "| datasets | %s |\n"
                              "| warm start | %s |\n"
                              "| commit | %s |\n"
                              "| hardware | %s |\n"
                              "| written | %s |\n"
                              "| config | `%s` |\n\n"
                              "Command:\n\n```\n%s\n```\n",
                              config->tier, config->width, config->depth, uform_config_parameters(config), model->recipe,
                              model->datasets[0] ? model->datasets : "none", model->warm_start[0] ? model->warm_start : "none",
                              UFORM_COMMIT, hardware, date, config_text, command ? command : "(library call)");
        snprintf(path, sizeof(path), "%s/README.md", directory);
        status = uform_write_atomic(path, readme, length > 0 && (size_t)length < sizeof(readme) ? (size_t)length : strlen(readme));
    }
    free(config_text);
    return status;
}

uform_status_t uform_model_describe(uform_model_t *model, char const *recipe, char const *datasets,
                                    char const *warm_start) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_describe: NULL model");
    if (recipe) snprintf(model->recipe, sizeof(model->recipe), "%s", recipe);
    if (datasets) snprintf(model->datasets, sizeof(model->datasets), "%s", datasets);
    if (warm_start) snprintf(model->warm_start, sizeof(model->warm_start), "%s", warm_start);
    return uform_ok_k;
}

uform_status_t uform_model_config(uform_model_t const *model, uform_config_t *config) {
    if (!model || !config) return uform_fail(uform_invalid_argument_k, "uform_model_config: NULL argument");
    *config = model->config;
    return uform_ok_k;
}

int uform_model_has_head(uform_model_t const *model, char const *head) {
    if (!model || !head) return 0;
    if (!strcmp(head, "pool")) return model->pool_query != NULL;
    if (!strcmp(head, "rerank")) return model->rerank_proj.rows != 0;
    if (!strcmp(head, "mlm")) return model->mlm_head.rows != 0;
    return 0;
}

uform_status_t uform_model_set_threads(uform_model_t *model, size_t threads) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_threads: NULL model");
    if (threads > 1024) return uform_fail(uform_invalid_argument_k, "uform_model_set_threads: %zu threads is too many", threads);
    uform_pool_t *pool;
    UFORM_TRY(uform_pool_create(threads, &pool));
    uform_pool_destroy(model->pool);
    model->pool = pool;
    return uform_workspace_reserve(model, model->workspace.cells);
}

uform_status_t uform_model_set_precision(uform_model_t *model, uform_precision_t precision) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_precision: NULL model");
    if (precision != uform_precision_bf16_k && precision != uform_precision_f32_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_set_precision: unknown precision %d", (int)precision);
    if (precision == model->precision) return uform_ok_k;
    if (model->device == uform_device_cuda_k)
        return uform_fail(uform_unsupported_k, "uform_model_set_precision: the GPU runs the BF16 precision only; "
                                               "set the device to uform_device_cpu_k first");
    model->precision = precision;
    for (size_t i = 0; i < model->config.depth; ++i) {
        uform_block_t *block = &model->blocks[i];
        UFORM_TRY(uform_matrix_prepare_(&block->qkv, precision));
        UFORM_TRY(uform_matrix_prepare_(&block->out, precision));
        UFORM_TRY(uform_matrix_prepare_(&block->gate_up, precision));
        UFORM_TRY(uform_matrix_prepare_(&block->down, precision));
    }
    UFORM_TRY(uform_matrix_prepare_(&model->pool_proj, precision));
    UFORM_TRY(uform_matrix_prepare_(&model->rerank_proj, precision));
    return uform_matrix_prepare_(&model->mlm_head, precision);
}

uform_status_t uform_model_set_device(uform_model_t *model, uform_device_t device) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_device: NULL model");
    if (device != uform_device_cpu_k && device != uform_device_cuda_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_set_device: unknown device %d (cpu %d or cuda %d)",
                          (int)device, (int)uform_device_cpu_k, (int)uform_device_cuda_k);
    if (device == uform_device_cpu_k) {
#if defined(UFORM_HAVE_CUDA)
        uform_cuda_forward_destroy(model->cuda);
#endif
        model->cuda = NULL;
        model->device = uform_device_cpu_k;
        return uform_ok_k;
    }
#if !defined(UFORM_HAVE_CUDA)
    return uform_fail(uform_unsupported_k, "uform_model_set_device: this libuform was built without the CUDA backend "
                                           "(it is built where CMake finds nvcc, with UFORM_CUDA=ON)");
#else
    if (model->device == uform_device_cuda_k) return uform_ok_k;
    if (model->precision != uform_precision_bf16_k)
        return uform_fail(uform_unsupported_k, "uform_model_set_device: the GPU runs the BF16 precision only, "
                                               "and this model is set to Float32");
    if (model->stale) uform_model_refresh(model); /* the CPU's copies stay current too */
    char error[512] = "";
    uform_cuda_forward_t *context = NULL;
    uform_status_t status = uform_cuda_forward_create(&context, error, sizeof(error));
    if (status == uform_ok_k) status = uform_cuda_forward_upload(context, model, error, sizeof(error));
    if (status != uform_ok_k) {
        uform_cuda_forward_destroy(context);
        return uform_fail(status, "uform_model_set_device: %s", error);
    }
    model->cuda = context;
    model->cuda_stale = 0;
    model->device = uform_device_cuda_k;
    return uform_ok_k;
#endif
}

uform_status_t uform_model_reserve(uform_model_t *model, size_t cells) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_reserve: NULL model");
    if (!cells || cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_reserve: %zu cells is outside 1..%d", cells, uform_max_cells_k);
    return uform_workspace_reserve(model, cells);
}

uform_status_t uform_workspace_reserve(uform_model_t *model, size_t cells) {
    uform_workspace_t *workspace = &model->workspace;
    size_t threads = uform_pool_threads(model->pool);
    if (cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "a pass of %zu cells exceeds the most a workspace holds, %d", cells,
                          uform_max_cells_k);
    if (cells < model->config.columns) cells = model->config.columns;
    if (workspace->arena.base && cells <= workspace->cells && threads == workspace->scratch_threads) return uform_ok_k;
    if (cells < workspace->cells) cells = workspace->cells;
    size_t d = model->config.width, span = cells; /* the longest segment is at most all the cells */
    size_t tile = uform_tile_rows_k, query_tile = uform_query_tile_k, head = uform_head_width_k;
    size_t vocabulary_columns = uform_vocabulary_k > 8 * d ? uform_vocabulary_k : 8 * d;
    size_t packed_keys = uform_packed_size(span, head), packed_values = uform_packed_size(head, span + 1);
    size_t per_thread = 64 * 12 + tile * 4 * d * sizeof(uint16_t) + tile * vocabulary_columns * sizeof(float) +
                        tile * 4 * d * sizeof(float) + tile * d * sizeof(float) + query_tile * span * sizeof(float) +
                        query_tile * head * sizeof(uint16_t) +
                        query_tile * (span + 1) * sizeof(uint16_t) + query_tile * sizeof(float) + packed_keys + packed_values;
    size_t colbert = model->config.colbert_width, widest = model->config.embedding_widths[model->config.embedding_widths_count - 1];
    size_t shared = 64 * 16 + cells * d * sizeof(float) * 4 + cells * 3 * d * sizeof(float) +
                    cells * colbert * sizeof(float) + model->config.columns * colbert * sizeof(float) +
                    cells * widest * sizeof(float) + cells * (4 * sizeof(uint32_t) + sizeof(size_t) + sizeof(uform_span_t));
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
    workspace->attention = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->pooled = uform_arena_take(&arena, cells * d * sizeof(float));
    workspace->colbert = uform_arena_take(&arena, cells * colbert * sizeof(float));
    workspace->query_colbert = uform_arena_take(&arena, model->config.columns * colbert * sizeof(float));
    workspace->embeddings = uform_arena_take(&arena, cells * widest * sizeof(float));
    workspace->values = uform_arena_take(&arena, cells * sizeof(uint32_t));
    workspace->positions = uform_arena_take(&arena, cells * 3 * sizeof(int32_t));
    workspace->destinations = uform_arena_take(&arena, cells * sizeof(size_t));
    workspace->spans = uform_arena_take(&arena, cells * sizeof(uform_span_t));
    for (size_t t = 0; t < threads; ++t) {
        uform_scratch_t *s = &scratch[t];
        s->inputs_bf16 = uform_arena_take(&arena, tile * 4 * d * sizeof(uint16_t));
        s->gate_up = uform_arena_take(&arena, tile * vocabulary_columns * sizeof(float));
        s->hidden = uform_arena_take(&arena, tile * 4 * d * sizeof(float));
        s->product = uform_arena_take(&arena, tile * d * sizeof(float));
        s->scores = uform_arena_take(&arena, query_tile * span * sizeof(float));
        s->queries = uform_arena_take(&arena, query_tile * head * sizeof(uint16_t));
        s->probabilities = uform_arena_take(&arena, query_tile * (span + 1) * sizeof(uint16_t));
        s->sums = uform_arena_take(&arena, query_tile * sizeof(float));
        s->keys_packed = uform_arena_take(&arena, packed_keys);
        s->values_packed = uform_arena_take(&arena, packed_values);
    }
    workspace->arena.used = arena.used;
    return uform_ok_k;
}
