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
#include "model/context.h"
#include "model/safetensors.h"
#include "model/shards.h"
#if defined(UFORM_HAVE_CUDA)
#include "cuda/forward.h" /* uform_cuda_device_name */
#endif

#ifndef UFORM_COMMIT
#define UFORM_COMMIT "unknown"
#endif

static void uform_weight_free_(uform_weight_t *weight) {
    free(weight->bf16), free(weight->f32), free(weight->packed), free(weight->widened), free(weight->e4m3), free(weight->scales);
    free(weight->int8), free(weight->corrections);
    weight->bf16 = weight->packed = NULL, weight->f32 = weight->widened = weight->scales = NULL, weight->e4m3 = NULL;
    weight->int8 = NULL, weight->corrections = NULL;
}

static uform_status_t uform_weight_alloc_(uform_weight_t *weight, uform_tensor_info_t const *info) {
    size_t count = info->rows * info->columns;
    if (info->matrix ? weight->bf16 != NULL : weight->f32 != NULL) return uform_ok_k;
    if (info->matrix) weight->bf16 = malloc(count * sizeof(uint16_t));
    else weight->f32 = malloc(count * sizeof(float));
    if (!weight->bf16 && !weight->f32) return uform_fail(uform_out_of_memory_k, "cannot allocate '%s' (%zu x %zu)", info->name, info->rows, info->columns);
    return uform_ok_k;
}

/* Whether a matrix's products run narrow (E4M3 or int8) at that precision: the blocks' four, as SPEC.md's
 * E4M3 tier says; the byte entries, frontends, pool and heads stay BF16. */
static int uform_weight_narrow_(uform_tensor_info_t const *info, uform_precision_t precision) {
    return (precision == uform_precision_e4m3_k || precision == uform_precision_int8_k) &&
           (info->kind == uform_tensor_qkv_k || info->kind == uform_tensor_out_k || info->kind == uform_tensor_gate_up_k ||
            info->kind == uform_tensor_down_k);
}

/* Builds what the products of the current precision need of a matrix: a packed copy (BF16 or E4M3)
 * or a widened one. */
static uform_status_t uform_weight_prepare_(uform_weight_t *weight, uform_tensor_info_t const *info, uform_precision_t precision) {
    if (!weight->bf16) return uform_ok_k;
    free(weight->packed), free(weight->widened), free(weight->e4m3), free(weight->scales), free(weight->int8), free(weight->corrections);
    weight->packed = NULL, weight->widened = weight->scales = NULL, weight->e4m3 = NULL, weight->int8 = NULL, weight->corrections = NULL;
    if (uform_weight_narrow_(info, precision) && precision == uform_precision_int8_k) {
        if (weight->columns > uform_int8_depth_most_k)
            return uform_fail(uform_unsupported_k, "int8 products of depth %zu could overflow their int32 sums (at most %d)",
                              weight->columns, uform_int8_depth_most_k);
        weight->int8 = aligned_alloc(64, (uform_packed_int8_size(weight->rows, weight->columns) + 63) & ~(size_t)63);
        weight->corrections = malloc(weight->rows * sizeof(int32_t));
        weight->scales = malloc(weight->rows * sizeof(float));
        if (!weight->int8 || !weight->corrections || !weight->scales)
            return uform_fail(uform_out_of_memory_k, "cannot pack a %zux%zu matrix as int8", weight->rows, weight->columns);
        uform_pack_int8(weight->bf16, weight->rows, weight->columns, weight->scales, weight->corrections, weight->int8);
    } else if (uform_weight_narrow_(info, precision)) {
        weight->e4m3 = aligned_alloc(64, (uform_packed_e4m3_size(weight->rows, weight->columns) + 63) & ~(size_t)63);
        weight->scales = malloc(weight->rows * sizeof(float));
        if (!weight->e4m3 || !weight->scales)
            return uform_fail(uform_out_of_memory_k, "cannot pack a %zux%zu matrix as E4M3", weight->rows, weight->columns);
        uform_pack_e4m3(weight->bf16, weight->rows, weight->columns, weight->scales, weight->e4m3);
    } else if (precision != uform_precision_f32_k) {
        weight->packed = aligned_alloc(64, (uform_packed_size(weight->rows, weight->columns) + 63) & ~(size_t)63);
        if (!weight->packed) return uform_fail(uform_out_of_memory_k, "cannot pack a %zux%zu matrix", weight->rows, weight->columns);
        uform_pack_bf16(weight->bf16, weight->rows, weight->columns, weight->columns, 1, weight->packed);
    } else {
        weight->widened = malloc(weight->rows * weight->columns * sizeof(float));
        if (!weight->widened) return uform_fail(uform_out_of_memory_k, "cannot widen a %zux%zu matrix", weight->rows, weight->columns);
        uform_f32_from_bf16_array(weight->bf16, weight->widened, weight->rows * weight->columns);
    }
    return uform_ok_k;
}

uform_weight_t *uform_model_weight(uform_model_t const *model, uform_tensor_kind_t kind, size_t block) {
    return &model->weights[uform_tensor_index(&model->config, kind, block)];
}

int uform_model_carries(uform_model_t const *model, uform_part_t part) {
    return part < uform_parts_k && (model->parts & UFORM_PART(part)) != 0;
}

void uform_model_changed(uform_model_t *model) {
    pthread_mutex_lock(&model->lock);
    model->stale = 1;
    model->version++;
    pthread_mutex_unlock(&model->lock);
}

void uform_model_prepare(uform_model_t *model) {
    pthread_mutex_lock(&model->lock);
    for (size_t i = 0; model->stale && i < model->tensors_count; ++i) {
        uform_weight_t *weight = &model->weights[i];
        if (weight->packed) uform_pack_bf16(weight->bf16, weight->rows, weight->columns, weight->columns, 1, weight->packed);
        if (weight->widened) uform_f32_from_bf16_array(weight->bf16, weight->widened, weight->rows * weight->columns);
        if (weight->e4m3) uform_pack_e4m3(weight->bf16, weight->rows, weight->columns, weight->scales, weight->e4m3);
        if (weight->int8) uform_pack_int8(weight->bf16, weight->rows, weight->columns, weight->scales, weight->corrections, weight->int8);
    }
    model->stale = 0;
    pthread_mutex_unlock(&model->lock);
}

void uform_model_close(uform_model_t *model) {
    if (!model) return;
    uform_context_close(model->context);
    for (size_t i = 0; model->weights && i < model->tensors_count; ++i) uform_weight_free_(&model->weights[i]);
    free(model->weights);
    free(model->tensors);
    free(model->blocks);
    free(model->rope_cos);
    free(model->rope_sin);
    pthread_mutex_destroy(&model->lock);
    free(model);
}

/* Everything but the weights' values: the rotary table, packed weights and the model's own context. */
uform_status_t uform_model_finish(uform_model_t *model) {
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
    return uform_context_open(model, uform_device_cpu_k, 0, "uform_model_open", &model->context);
}

/* Gives every tensor of `part` its storage, and marks the part carried. */
static uform_status_t uform_model_attach_(uform_model_t *model, uform_part_t part) {
    for (size_t i = 0; i < model->tensors_count; ++i)
        if (model->tensors[i].part == part) UFORM_TRY(uform_weight_alloc_(&model->weights[i], &model->tensors[i]));
    model->parts |= UFORM_PART(part);
    return uform_ok_k;
}

/* Frees every tensor of `part`, and marks it not carried. */
static void uform_model_detach_(uform_model_t *model, uform_part_t part) {
    for (size_t i = 0; i < model->tensors_count; ++i)
        if (model->tensors[i].part == part) uform_weight_free_(&model->weights[i]);
    model->parts &= ~UFORM_PART(part);
}

/* The table resolved for `config`, storage for the `parts` carried, and the named views. */
uform_status_t uform_model_skeleton(uform_config_t const *config, unsigned parts, uform_model_t **result) {
    uform_model_t *model = calloc(1, sizeof(*model));
    if (!model) return uform_fail(uform_out_of_memory_k, "cannot allocate a model");
    model->config = *config;
    pthread_mutex_init(&model->lock, NULL);
    model->tensors_count = uform_tensor_count(config);
    model->tensors = calloc(model->tensors_count, sizeof(uform_tensor_info_t));
    model->weights = calloc(model->tensors_count, sizeof(uform_weight_t));
    model->blocks = calloc(config->depth, sizeof(uform_block_t));
    uform_status_t status = model->tensors && model->weights && model->blocks
                                ? uform_ok_k
                                : uform_fail(uform_out_of_memory_k, "cannot allocate the tensor table");
    if (status == uform_ok_k) {
        uform_tensor_list(config, ~0u, model->tensors);
        for (size_t i = 0; i < model->tensors_count; ++i)
            model->weights[i].rows = model->tensors[i].rows, model->weights[i].columns = model->tensors[i].columns;
#define UFORM_BIND_(field, kind) model->field = uform_model_weight(model, kind, 0);
        UFORM_NAMED_TENSORS(UFORM_BIND_)
#undef UFORM_BIND_
        for (size_t i = 0; i < config->depth; ++i)
            for (size_t k = 0; k < uform_block_kinds_k; ++k)
                model->blocks[i].kinds[k] = uform_model_weight(model, (uform_tensor_kind_t)(uform_tensor_attn_norm_k + k), i);
    }
    for (int part = 0; status == uform_ok_k && part < uform_parts_k; ++part)
        if (parts & UFORM_PART(part)) status = uform_model_attach_(model, (uform_part_t)part);
    if (status != uform_ok_k) {
        uform_model_close(model);
        return status;
    }
    *result = model;
    return uform_ok_k;
}

/* Initializes every tensor of `part` as its table entry says, each normal one from its own stream. */
static void uform_fill_part_(uform_model_t *model, uform_part_t part, uint64_t seed) {
    for (size_t i = 0; i < model->tensors_count; ++i) {
        uform_tensor_info_t const *info = &model->tensors[i];
        uform_weight_t *weight = &model->weights[i];
        if (info->part != part) continue;
        size_t count = info->rows * info->columns;
        if (info->init == uform_init_constant_k) {
            for (size_t e = 0; e < count; ++e) weight->f32[e] = (float)info->value;
            continue;
        }
        double deviation = 1.0;
        if (info->init == uform_init_normal_k) {
            deviation = 1.0 / sqrt((double)info->columns);
            if (info->residual) deviation *= 1.0 / sqrt(2.0 * (double)model->config.depth);
        }
        uform_rng_t rng = {seed * 0x100000001b3ull + info->stream};
        for (size_t e = 0; e < count; ++e) weight->bf16[e] = uform_f32_to_bf16((float)(deviation * uform_rng_normal(&rng)));
    }
}

uform_status_t uform_model_init_head(uform_model_t *model, char const *head, uint64_t seed) {
    if (!model || !head) return uform_fail(uform_invalid_argument_k, "uform_model_init_head: NULL argument");
    uform_part_t part = uform_part_from_name(head);
    if (part == uform_parts_k || part == uform_part_bytes_k || part == uform_part_encoder_k || part == uform_part_siglip_k)
        return uform_fail(uform_invalid_argument_k,
                          "uform_model_init_head: unknown head '%s' (pool, rerank, mlm, mae, mae_audio or mae_video; or a frontend: vision, video, audio)", head);
    UFORM_TRY(uform_model_attach_(model, part));
    uform_fill_part_(model, part, seed);
    /* The pool's and the reranker's losses share the SigLIP scalars: a new head starts them afresh. */
    if (part == uform_part_pool_k || part == uform_part_rerank_k) uform_fill_part_(model, uform_part_siglip_k, seed);
    uform_model_changed(model);
    for (size_t i = 0; i < model->tensors_count; ++i)
        if (model->tensors[i].part == part)
            UFORM_TRY(uform_weight_prepare_(&model->weights[i], &model->tensors[i], model->precision));
    return uform_ok_k;
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
    /* A new model carries the text frontend, the encoder and every head; frontends are attached by name. */
    unsigned parts = UFORM_PARTS_REQUIRED | UFORM_PART(uform_part_pool_k) | UFORM_PART(uform_part_rerank_k) | UFORM_PART(uform_part_mlm_k);
    uform_model_t *model;
    UFORM_TRY(uform_model_skeleton(config, parts, &model));
    for (int part = 0; part < uform_parts_k; ++part)
        if (parts & UFORM_PART(part)) uform_fill_part_(model, (uform_part_t)part, seed);
    snprintf(model->recipe, sizeof(model->recipe), "random initialization, seed %llu", (unsigned long long)seed);
    uform_status_t status = uform_model_finish(model);
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

/* A matrix stored as E4M3 (uform_model_save_sharded_as): its codes times the Float32 scale of their row,
 * `NAME.scale` [rows] in any shard, rounded to BF16. */
static uform_status_t uform_load_e4m3_(uform_shards_t const *shards, uform_safetensors_t const *file, uform_tensor_info_t const *info,
                                       uform_tensor_view_t const *tensor, uint16_t *bf16) {
    if (!info->matrix)
        return uform_fail(uform_format_k, "%s: tensor '%s' is stored as F8_E4M3; only matrices may be", file->path,
                          tensor->name);
    char name[uform_max_name_k + 8];
    snprintf(name, sizeof(name), "%s.scale", info->name);
    uform_safetensors_t const *scale_file = NULL;
    uform_tensor_view_t const *scales = uform_shards_find(shards, name, &scale_file);
    if (!scales)
        return uform_fail(uform_missing_k, "%s: tensor '%s' is stored as F8_E4M3 and its scales '%s' are missing", file->path,
                          tensor->name, name);
    if (scales->dtype != uform_dtype_f32_k)
        return uform_fail(uform_format_k, "%s: tensor '%s' has dtype %s; the scales of an F8_E4M3 matrix are F32", scale_file->path,
                          name, uform_dtype_name(scales->dtype));
    UFORM_TRY(uform_check_shape_(scale_file, scales, 1, info->rows, 1));
    uint8_t const *codes = tensor->data;
    for (size_t row = 0; row < info->rows; ++row) {
        float scale;
        memcpy(&scale, (unsigned char const *)scales->data + row * sizeof(float), sizeof(float)); /* any offset in the file */
        if (!(scale > 0) || !isfinite(scale))
            return uform_fail(uform_format_k, "%s: tensor '%s' has scale %g at row %zu; a scale is positive and finite",
                              scale_file->path, name, (double)scale, row);
        for (size_t j = 0; j < info->columns; ++j) {
            float value = uform_e4m3_to_f32(codes[row * info->columns + j]);
            if (isnan(value))
                return uform_fail(uform_format_k, "%s: tensor '%s' holds the NaN code at row %zu, column %zu", file->path,
                                  tensor->name, row, j);
            bf16[row * info->columns + j] = uform_f32_to_bf16(value * scale);
        }
    }
    return uform_ok_k;
}

/* Reads one tensor into its weight: BF16, Float32 or (a matrix) E4M3 in the file, converted to the master's type. */
static uform_status_t uform_load_tensor_(uform_shards_t const *shards, uform_safetensors_t const *file, uform_tensor_info_t const *info,
                                         uform_tensor_view_t const *tensor, uform_weight_t *weight) {
    UFORM_TRY(uform_check_shape_(file, tensor, info->rank, info->rows, info->columns));
    size_t count = info->rows * info->columns;
    if (tensor->dtype == uform_dtype_e4m3_k) return uform_load_e4m3_(shards, file, info, tensor, weight->bf16);
    if (info->matrix) {
        if (tensor->dtype == uform_dtype_bf16_k) memcpy(weight->bf16, tensor->data, count * sizeof(uint16_t));
        else
            for (size_t i = 0; i < count; ++i) weight->bf16[i] = uform_f32_to_bf16(((float const *)tensor->data)[i]);
    } else if (tensor->dtype == uform_dtype_f32_k) memcpy(weight->f32, tensor->data, count * sizeof(float));
    else uform_f32_from_bf16_array(tensor->data, weight->f32, count);
    return uform_ok_k;
}

/* Walks the table part by part: required parts must be whole, an optional one is carried when the
 * file holds any of its tensors and must then be whole, and the SigLIP scalars default when absent. */
static uform_status_t uform_load_weights_(uform_shards_t const *shards, uform_model_t *model) {
    uform_config_t const *config = &model->config;
    for (size_t f = 0; f < shards->count; ++f) {
        uform_safetensors_t const *file = &shards->files[f];
        for (size_t i = 0; i < file->count; ++i) {
            unsigned long index;
            if (sscanf(file->tensors[i].name, "blocks.%lu.", &index) == 1 && index >= config->depth)
                return uform_fail(uform_format_k, "%s: tensor '%s' is beyond the config's depth %zu", file->path,
                                  file->tensors[i].name, config->depth);
        }
    }
    for (int part = 0; part < uform_parts_k; ++part) {
        int required = (UFORM_PARTS_REQUIRED & UFORM_PART(part)) && part != uform_part_siglip_k;
        size_t members = 0, found = 0;
        char const *present = NULL, *absent = NULL;
        for (size_t i = 0; i < model->tensors_count; ++i) {
            if (model->tensors[i].part != (uform_part_t)part) continue;
            members++;
            if (uform_shards_find(shards, model->tensors[i].name, NULL)) found++, present = present ? present : model->tensors[i].name;
            else absent = absent ? absent : model->tensors[i].name;
        }
        if (required && absent) return uform_fail(uform_missing_k, "%s: tensor '%s' is missing", shards->path, absent);
        if (part != uform_part_siglip_k && found && found < members)
            return uform_fail(uform_missing_k, "%s: the %s %s has '%s' but tensor '%s' is missing", shards->path,
                              uform_part_name((uform_part_t)part), part < uform_part_encoder_k ? "frontend" : "head", present, absent);
        if (!found && part != uform_part_siglip_k) {
            uform_model_detach_(model, (uform_part_t)part);
            continue;
        }
        UFORM_TRY(uform_model_attach_(model, (uform_part_t)part));
        for (size_t i = 0; i < model->tensors_count; ++i) {
            uform_tensor_info_t const *info = &model->tensors[i];
            if (info->part != (uform_part_t)part) continue;
            uform_safetensors_t const *file = NULL;
            uform_tensor_view_t const *tensor = uform_shards_find(shards, info->name, &file);
            if (tensor) UFORM_TRY(uform_load_tensor_(shards, file, info, tensor, &model->weights[i]));
            else model->weights[i].f32[0] = (float)info->value; /* a SigLIP scalar the file lacks */
        }
    }
    json_t const *metadata = shards->files[0].metadata; /* every shard carries the checkpoint's: the first's stands for all */
    char const *recipe = json_string_value(json_object_get(metadata, "recipe"));
    char const *datasets = json_string_value(json_object_get(metadata, "datasets"));
    char const *warm_start = json_string_value(json_object_get(metadata, "warm_start"));
    snprintf(model->recipe, sizeof(model->recipe), "%s", recipe ? recipe : "unknown");
    snprintf(model->datasets, sizeof(model->datasets), "%s", datasets ? datasets : "");
    snprintf(model->warm_start, sizeof(model->warm_start), "%s", warm_start ? warm_start : "");
    return uform_ok_k;
}

uform_status_t uform_model_open(char const *directory, uform_model_t **result) {
    if (!directory || !result) return uform_fail(uform_invalid_argument_k, "uform_model_open: NULL argument");
    char path[4200];
    struct stat status_buffer;
    if (stat(directory, &status_buffer) != 0)
        return uform_fail(uform_io_k, "%s: cannot open checkpoint: %s", directory, strerror(errno));
    if (S_ISDIR(status_buffer.st_mode)) {
        /* model.safetensors first, as Hugging Face's loaders prefer it; the sharded index where it is absent. */
        snprintf(path, sizeof(path), "%s/model.safetensors", directory);
        char index[sizeof(path)];
        snprintf(index, sizeof(index), "%s/" UFORM_SHARDS_INDEX, directory);
        if (stat(path, &status_buffer) != 0 && stat(index, &status_buffer) == 0) memcpy(path, index, sizeof(path));
    } else snprintf(path, sizeof(path), "%s", directory); /* a model.safetensors file or an index named directly */
    uform_shards_t shards;
    UFORM_TRY(uform_shards_open(path, &shards));
    uform_config_t config;
    uform_model_t *model = NULL;
    uform_status_t status = uform_parse_config_(&shards.files[0], &config);
    if (status == uform_ok_k) status = uform_model_skeleton(&config, 0, &model);
    if (status == uform_ok_k) status = uform_load_weights_(&shards, model);
    uform_shards_close(&shards);
    if (status == uform_ok_k) status = uform_model_finish(model);
    if (status != uform_ok_k) {
        uform_model_close(model);
        return status;
    }
    *result = model;
    return uform_ok_k;
}

static uform_tensor_view_t uform_view_(uform_tensor_info_t const *info, uform_weight_t const *weight) {
    uform_tensor_view_t view = {.dtype = info->matrix ? uform_dtype_bf16_k : uform_dtype_f32_k, .rank = info->rank,
                                .shape = {info->rows, info->columns}, .data = info->matrix ? (void const *)weight->bf16 : weight->f32,
                                .bytes = info->rows * info->columns * (info->matrix ? sizeof(uint16_t) : sizeof(float))};
    snprintf(view.name, sizeof(view.name), "%s", info->name);
    return view;
}

/* "text", or "text, image, ..." for the frontends it carries. */
static void uform_modalities_(uform_model_t const *model, char *text, size_t capacity) {
    static char const *const names[] = {"text", "image", "video", "audio"};
    text[0] = 0;
    for (int part = uform_part_bytes_k; part <= uform_part_audio_k; ++part)
        if (uform_model_carries(model, (uform_part_t)part))
            snprintf(text + strlen(text), capacity - strlen(text), "%s%s", text[0] ? ", " : "", names[part]);
}

static json_t *uform_config_json_(uform_config_t const *config, char const *modalities) {
    json_t *widths = json_array();
    for (size_t i = 0; i < config->embedding_widths_count; ++i)
        json_array_append_new(widths, json_integer((json_int_t)config->embedding_widths[i]));
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:I, s:I, s:f, s:s}", "tier", config->tier, "width",
                     (json_int_t)config->width, "depth", (json_int_t)config->depth, "heads", (json_int_t)config->heads,
                     "embedding_widths", widths, "colbert_width", (json_int_t)config->colbert_width, "columns",
                     (json_int_t)config->columns, "vocabulary", (json_int_t)uform_vocabulary_k, "learning_rate",
                     config->learning_rate, "modalities", modalities);
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

/* Whether `storage` keeps this tensor as E4M3: the blocks' four matrices, the ones the E4M3 precision runs narrow. */
static int uform_stored_e4m3_(uform_tensor_info_t const *info, uform_storage_t storage) {
    return storage == uform_storage_e4m3_k && uform_weight_narrow_(info, uform_precision_e4m3_k);
}

/* What a save writes besides the README: the carried tensors' views and the __metadata__ object,
 * with its config text in `*config_text`; under E4M3 storage the codes and scales the views point
 * into are in `*stored`. The caller frees all four. */
static uform_status_t uform_save_contents_(uform_model_t const *model, uform_storage_t storage, uform_tensor_view_t **views,
                                           size_t *count, json_t **metadata, char **config_text, void **stored) {
    *views = calloc(2 * model->tensors_count, sizeof(**views)); /* an E4M3 matrix takes two: codes and scales */
    *count = 0, *metadata = NULL, *config_text = NULL, *stored = NULL;
    size_t stored_bytes = 0;
    for (size_t i = 0; i < model->tensors_count; ++i)
        if (uform_model_carries(model, model->tensors[i].part) && uform_stored_e4m3_(&model->tensors[i], storage))
            stored_bytes += model->tensors[i].rows * (sizeof(float) + model->tensors[i].columns);
    if (stored_bytes) *stored = malloc(stored_bytes);
    if (!*views || (stored_bytes && !*stored)) {
        free(*views), free(*stored);
        *views = NULL, *stored = NULL;
        return uform_fail(uform_out_of_memory_k, "cannot list tensors to save");
    }
    unsigned char *cursor = *stored;
    for (size_t i = 0; i < model->tensors_count; ++i) {
        uform_tensor_info_t const *info = &model->tensors[i];
        if (!uform_model_carries(model, info->part)) continue;
        uform_tensor_view_t view = uform_view_(info, &model->weights[i]);
        if (uform_stored_e4m3_(info, storage)) {
            float *scales = (float *)cursor; /* the Float32 scales first: every block of the buffer stays 4-aligned */
            uint8_t *codes = cursor + info->rows * sizeof(float);
            cursor += info->rows * (sizeof(float) + info->columns);
            uform_e4m3_rows(model->weights[i].bf16, info->rows, info->columns, scales, codes);
            view.dtype = uform_dtype_e4m3_k, view.data = codes, view.bytes = info->rows * info->columns;
            uform_tensor_view_t scale_view = {.dtype = uform_dtype_f32_k, .rank = 1, .shape = {info->rows}, .data = scales,
                                              .bytes = info->rows * sizeof(float)};
            snprintf(scale_view.name, sizeof(scale_view.name), "%s.scale", info->name);
            (*views)[(*count)++] = view;
            view = scale_view;
        }
        (*views)[(*count)++] = view;
    }
    char modalities[64];
    uform_modalities_(model, modalities, sizeof(modalities));
    json_t *config_json = uform_config_json_(&model->config, modalities);
    *config_text = config_json ? json_dumps(config_json, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
    if (config_json) json_decref(config_json);
    if (*config_text)
        *metadata = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "format", "pt", "config", *config_text, "recipe", model->recipe,
                              "datasets", model->datasets, "warm_start", model->warm_start, "uform_version", UFORM_VERSION_STRING);
    if (*metadata && storage == uform_storage_e4m3_k) json_object_set_new(*metadata, "storage", json_string("e4m3"));
    if (*metadata) return uform_ok_k;
    free(*views), free(*config_text), free(*stored);
    *views = NULL, *config_text = NULL, *stored = NULL;
    return uform_fail(uform_out_of_memory_k, "cannot build the header");
}

uform_status_t uform_model_save_sharded(uform_model_t const *model, char const *directory, size_t max_shard_bytes) {
    return uform_model_save_sharded_as(model, directory, max_shard_bytes, uform_storage_bf16_k);
}

uform_status_t uform_model_save_sharded_as(uform_model_t const *model, char const *directory, size_t max_shard_bytes,
                                           uform_storage_t storage) {
    if (!model || !directory) return uform_fail(uform_invalid_argument_k, "uform_model_save_sharded: NULL argument");
    if (!max_shard_bytes) return uform_fail(uform_invalid_argument_k, "uform_model_save_sharded: a shard limit of 0 bytes");
    if (storage != uform_storage_bf16_k && storage != uform_storage_e4m3_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_save_sharded: storage %d is neither BF16 (0) nor E4M3 (1)", (int)storage);
    UFORM_TRY(uform_make_folders_(directory));
    char path[4200];
    struct stat status_buffer;
    snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    if (stat(path, &status_buffer) == 0)
        return uform_fail(uform_invalid_argument_k, "%s: exists, and readers prefer it to shards: write the shards into another folder", path);
    uform_tensor_view_t *views;
    size_t count;
    json_t *metadata;
    char *config_text;
    void *stored;
    UFORM_TRY(uform_save_contents_(model, storage, &views, &count, &metadata, &config_text, &stored));
    uform_status_t status = uform_shards_write(directory, views, count, metadata, max_shard_bytes);
    free(views), free(config_text), free(stored);
    json_decref(metadata);
    return status;
}

uform_status_t uform_model_save(uform_model_t const *model, char const *directory, char const *command) {
    if (!model || !directory) return uform_fail(uform_invalid_argument_k, "uform_model_save: NULL argument");
    UFORM_TRY(uform_make_folders_(directory));
    uform_config_t const *config = &model->config;
    uform_tensor_view_t *views;
    size_t count;
    json_t *metadata;
    char *config_text;
    void *stored; /* BF16 storage: nothing */
    UFORM_TRY(uform_save_contents_(model, uform_storage_bf16_k, &views, &count, &metadata, &config_text, &stored));
    char modalities[64];
    uform_modalities_(model, modalities, sizeof(modalities));
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", directory);
    uform_status_t status = uform_safetensors_write(path, views, count, metadata);
    free(views);
    json_decref(metadata);

    if (status == uform_ok_k) {
        char hardware[256], date[64], readme[8192];
        uform_hardware_(hardware, sizeof(hardware));
        time_t now = time(NULL);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
        int length = snprintf(readme, sizeof(readme),
                              "# UForm checkpoint\n\n"
                              "| field | value |\n|---|---|\n"
                              "| tier | %s (width %zu, depth %zu, %zu parameters) |\n"
                              "| modalities | %s |\n"
                              "| recipe | %s |\n"
                              "| datasets | %s |\n"
                              "| warm start | %s |\n"
                              "| commit | %s |\n"
                              "| hardware | %s |\n"
                              "| written | %s |\n"
                              "| config | `%s` |\n\n"
                              "Command:\n\n```\n%s\n```\n",
                              config->tier, config->width, config->depth, uform_config_parameters(config), modalities, model->recipe,
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
    return uform_model_carries(model, uform_part_from_name(head));
}

uform_status_t uform_model_set_threads(uform_model_t *model, size_t threads) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_threads: NULL model");
    if (threads > 1024) return uform_fail(uform_invalid_argument_k, "uform_model_set_threads: %zu threads is too many", threads);
    return uform_context_threads(model->context, threads);
}

uform_status_t uform_model_set_precision(uform_model_t *model, uform_precision_t precision) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_precision: NULL model");
    if (precision != uform_precision_bf16_k && precision != uform_precision_f32_k && precision != uform_precision_e4m3_k &&
        precision != uform_precision_int8_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_set_precision: unknown precision %d", (int)precision);
    if (precision == model->precision) return uform_ok_k;
    if (model->context && model->context->device == uform_device_cuda_k)
        return uform_fail(uform_unsupported_k, "uform_model_set_precision: the model runs on the GPU, whose copy holds one "
                                               "precision (BF16 or E4M3): set the device to uform_device_cpu_k first, then back");
    model->precision = precision;
    for (size_t i = 0; i < model->tensors_count; ++i)
        UFORM_TRY(uform_weight_prepare_(&model->weights[i], &model->tensors[i], precision));
    model->stale = 0; /* every copy was just made from the current weights */
    return uform_ok_k;
}

uform_status_t uform_precision_parse(char const *name, uform_precision_t *precision) {
    if (!name || !precision) return uform_fail(uform_invalid_argument_k, "uform_precision_parse: name and precision are needed");
    if (!strcmp(name, "bf16")) *precision = uform_precision_bf16_k;
    else if (!strcmp(name, "e4m3")) *precision = uform_precision_e4m3_k;
    else if (!strcmp(name, "int8")) *precision = uform_precision_int8_k;
    else if (!strcmp(name, "f32") || !strcmp(name, "float32")) *precision = uform_precision_f32_k;
    else return uform_fail(uform_invalid_argument_k, "precision is bf16, e4m3, int8 or f32, not '%s'", name);
    return uform_ok_k;
}

char const *uform_precision_name(uform_precision_t precision) {
    return precision == uform_precision_bf16_k ? "bf16" : precision == uform_precision_e4m3_k ? "e4m3"
         : precision == uform_precision_int8_k ? "int8" : precision == uform_precision_f32_k ? "f32" : "unknown";
}

uform_status_t uform_model_set_device(uform_model_t *model, uform_device_t device) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_set_device: NULL model");
    return uform_context_move(model->context, device, "uform_model_set_device");
}

uform_status_t uform_context_create(uform_model_t *model, uform_device_t device, size_t threads, uform_context_t **context) {
    if (!model || !context) return uform_fail(uform_invalid_argument_k, "uform_context_create: NULL argument");
    return uform_context_open(model, device, threads, "uform_context_create", context);
}

uform_status_t uform_context_reserve(uform_context_t *context, size_t cells) {
    if (!context) return uform_fail(uform_invalid_argument_k, "uform_context_reserve: NULL context");
    if (!cells || cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "uform_context_reserve: %zu cells is outside 1..%d", cells, uform_max_cells_k);
    return uform_workspace_reserve(context, cells);
}

uform_status_t uform_device_name(uform_device_t device, char *name, size_t capacity) {
    if (!name || !capacity) return uform_fail(uform_invalid_argument_k, "uform_device_name: NULL name");
    if (device == uform_device_cpu_k) {
        char class[256];
        uform_hardware_(name, capacity);
        uform_cpu_class(class, sizeof(class));
        size_t length = strlen(name);
        snprintf(name + length, capacity - length, "; class %s; kernels %s", class, uform_kernels()->name);
        return uform_ok_k;
    }
    if (device != uform_device_cuda_k)
        return uform_fail(uform_invalid_argument_k, "uform_device_name: unknown device %d (cpu %d or cuda %d)", (int)device,
                          (int)uform_device_cpu_k, (int)uform_device_cuda_k);
#if defined(UFORM_HAVE_CUDA)
    char error[512] = "";
    uform_status_t status = uform_cuda_device_name(name, capacity, error, sizeof(error));
    return status == uform_ok_k ? status : uform_fail(status, "%s", error);
#else
    return uform_fail(uform_unsupported_k, "this build has no CUDA backend (it is built where CMake finds nvcc, with UFORM_CUDA=ON)");
#endif
}

uform_status_t uform_model_reserve(uform_model_t *model, size_t cells) {
    if (!model) return uform_fail(uform_invalid_argument_k, "uform_model_reserve: NULL model");
    if (!cells || cells > uform_max_cells_k)
        return uform_fail(uform_invalid_argument_k, "uform_model_reserve: %zu cells is outside 1..%d", cells, uform_max_cells_k);
    return uform_workspace_reserve(model->context, cells);
}
