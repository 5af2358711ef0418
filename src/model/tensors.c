/*  tensors.c: the parameter table (tensors.h) and its resolution against a configuration. */
#include "model/tensors.h"

#include <stdio.h>
#include <string.h>

/* A shape's extent in terms of the configuration. */
typedef enum uform_extent_t {
    uform_extent_one_k = 0,
    uform_extent_width_k,       /* d */
    uform_extent_width3_k,      /* 3d */
    uform_extent_width4_k,      /* 4d */
    uform_extent_width8_k,      /* 8d */
    uform_extent_vocabulary_k,  /* 258 */
    uform_extent_embedding_k,   /* E, the widest Matryoshka width */
    uform_extent_colbert_k,     /* the ColBERT width */
    uform_extent_patch_k,       /* 1024 */
    uform_extent_tube_k,        /* 1536 */
    uform_extent_frame_k,       /* 320 */
} uform_extent_t;

/* Where a normal-initialized tensor's RNG stream sits: the embedding's 0, four per block, then the
 * heads' and frontends' after every block. */
typedef enum uform_stream_base_t { uform_stream_first_k = 0, uform_stream_block_k = 1, uform_stream_after_k = 2 } uform_stream_base_t;

typedef struct uform_tensor_spec_t {
    char const *name; /* per-block kinds: the name after "blocks.{i}." */
    uform_part_t part;
    uform_extent_t rows, columns;
    size_t rank;
    uform_init_t init;
    int residual;
    double value;
    uform_stream_base_t base;
    uint64_t slot;
} uform_tensor_spec_t;

/* Matrices (rank 2) are BF16 with factored moments; vectors and scalars Float32, unfactored. */
static uform_tensor_spec_t const uform_specs_[uform_tensor_kinds_k] = {
    [uform_tensor_embed_bytes_k] = {"embed.bytes", uform_part_bytes_k, uform_extent_vocabulary_k, uform_extent_width_k, 2, uform_init_unit_k, 0, 0, uform_stream_first_k, 0},
    [uform_tensor_vision_patch_k] = {"vision.patch", uform_part_vision_k, uform_extent_width_k, uform_extent_patch_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 3},
    [uform_tensor_vision_bias_k] = {"vision.bias", uform_part_vision_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_video_tube_k] = {"video.tube", uform_part_video_k, uform_extent_width_k, uform_extent_tube_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 4},
    [uform_tensor_video_bias_k] = {"video.bias", uform_part_video_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_audio_frame_k] = {"audio.frame", uform_part_audio_k, uform_extent_width_k, uform_extent_frame_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 5},
    [uform_tensor_audio_bias_k] = {"audio.bias", uform_part_audio_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_attn_norm_k] = {"attn_norm", uform_part_encoder_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 1, 0, 0},
    [uform_tensor_qkv_k] = {"qkv", uform_part_encoder_k, uform_extent_width3_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_block_k, 0},
    [uform_tensor_out_k] = {"out", uform_part_encoder_k, uform_extent_width_k, uform_extent_width_k, 2, uform_init_normal_k, 1, 0, uform_stream_block_k, 1},
    [uform_tensor_mlp_norm_k] = {"mlp_norm", uform_part_encoder_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 1, 0, 0},
    [uform_tensor_gate_up_k] = {"gate_up", uform_part_encoder_k, uform_extent_width8_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_block_k, 2},
    [uform_tensor_down_k] = {"down", uform_part_encoder_k, uform_extent_width_k, uform_extent_width4_k, 2, uform_init_normal_k, 1, 0, uform_stream_block_k, 3},
    [uform_tensor_final_norm_k] = {"final_norm", uform_part_encoder_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 1, 0, 0},
    [uform_tensor_pool_query_k] = {"pool.query", uform_part_pool_k, uform_extent_width_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_pool_proj_k] = {"pool.proj", uform_part_pool_k, uform_extent_embedding_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 0},
    [uform_tensor_rerank_proj_k] = {"rerank.proj", uform_part_rerank_k, uform_extent_colbert_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 1},
    [uform_tensor_mlm_head_k] = {"mlm.head", uform_part_mlm_k, uform_extent_vocabulary_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 2},
    [uform_tensor_siglip_scale_k] = {"siglip.scale", uform_part_siglip_k, uform_extent_one_k, uform_extent_one_k, 0, uform_init_constant_k, 0, 2.302585092994045684, 0, 0},
    [uform_tensor_siglip_bias_k] = {"siglip.bias", uform_part_siglip_k, uform_extent_one_k, uform_extent_one_k, 0, uform_init_constant_k, 0, -10, 0, 0},
    [uform_tensor_mae_head_k] = {"mae.head", uform_part_mae_k, uform_extent_patch_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 6},
    [uform_tensor_mae_bias_k] = {"mae.bias", uform_part_mae_k, uform_extent_patch_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_mae_audio_head_k] = {"mae_audio.head", uform_part_mae_audio_k, uform_extent_frame_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 7},
    [uform_tensor_mae_audio_bias_k] = {"mae_audio.bias", uform_part_mae_audio_k, uform_extent_frame_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
    [uform_tensor_mae_video_head_k] = {"mae_video.head", uform_part_mae_video_k, uform_extent_tube_k, uform_extent_width_k, 2, uform_init_normal_k, 0, 0, uform_stream_after_k, 8},
    [uform_tensor_mae_video_bias_k] = {"mae_video.bias", uform_part_mae_video_k, uform_extent_tube_k, uform_extent_one_k, 1, uform_init_constant_k, 0, 0, 0, 0},
};

static char const *const uform_part_names_[uform_parts_k] = {"bytes", "vision", "video", "audio", "encoder", "pool",
                                                             "rerank", "mlm", "siglip", "mae", "mae_audio", "mae_video"};

char const *uform_part_name(uform_part_t part) { return part < uform_parts_k ? uform_part_names_[part] : "unknown"; }

uform_part_t uform_part_from_name(char const *name) {
    for (size_t i = 0; name && i < uform_parts_k; ++i)
        if (!strcmp(name, uform_part_names_[i])) return (uform_part_t)i;
    return uform_parts_k;
}

int uform_tensor_per_block(uform_tensor_kind_t kind) { return kind >= uform_tensor_attn_norm_k && kind <= uform_tensor_down_k; }

static size_t uform_extent_(uform_config_t const *config, uform_extent_t extent) {
    size_t d = config->width;
    switch (extent) {
    case uform_extent_width_k: return d;
    case uform_extent_width3_k: return 3 * d;
    case uform_extent_width4_k: return 4 * d;
    case uform_extent_width8_k: return 8 * d;
    case uform_extent_vocabulary_k: return uform_vocabulary_k;
    case uform_extent_embedding_k: return config->embedding_widths_count ? config->embedding_widths[config->embedding_widths_count - 1] : d;
    case uform_extent_colbert_k: return config->colbert_width;
    case uform_extent_patch_k: return uform_patch_values_k;
    case uform_extent_tube_k: return uform_tube_values_k;
    case uform_extent_frame_k: return uform_frame_values_k;
    default: return 1;
    }
}

static void uform_resolve_(uform_config_t const *config, uform_tensor_kind_t kind, size_t block, uform_tensor_info_t *info) {
    uform_tensor_spec_t const *spec = &uform_specs_[kind];
    memset(info, 0, sizeof(*info));
    if (uform_tensor_per_block(kind)) snprintf(info->name, sizeof(info->name), "blocks.%zu.%s", block, spec->name);
    else snprintf(info->name, sizeof(info->name), "%s", spec->name);
    info->kind = kind, info->part = spec->part, info->block = uform_tensor_per_block(kind) ? block : 0;
    info->rows = uform_extent_(config, spec->rows), info->columns = uform_extent_(config, spec->columns);
    info->rank = spec->rank, info->matrix = spec->rank == 2;
    info->init = spec->init, info->residual = spec->residual, info->value = spec->value;
    info->stream = spec->base == uform_stream_block_k   ? 1 + 4 * (uint64_t)block + spec->slot
                   : spec->base == uform_stream_after_k ? 1 + 4 * (uint64_t)config->depth + spec->slot
                                                        : spec->slot;
}

size_t uform_tensor_list(uform_config_t const *config, unsigned parts, uform_tensor_info_t *tensors) {
    size_t count = 0;
    for (int kind = 0; kind < uform_tensor_kinds_k; ++kind) {
        if (!(parts & UFORM_PART(uform_specs_[kind].part))) continue;
        if (kind == uform_tensor_attn_norm_k) { /* the blocks, block by block */
            for (size_t block = 0; block < config->depth; ++block)
                for (int part = uform_tensor_attn_norm_k; part <= uform_tensor_down_k; ++part, ++count)
                    if (tensors) uform_resolve_(config, (uform_tensor_kind_t)part, block, &tensors[count]);
            kind = uform_tensor_down_k;
            continue;
        }
        if (tensors) uform_resolve_(config, (uform_tensor_kind_t)kind, 0, &tensors[count]);
        count++;
    }
    return count;
}

size_t uform_parts_elements(uform_config_t const *config, unsigned parts) {
    size_t total = 0;
    for (int kind = 0; kind < uform_tensor_kinds_k; ++kind) {
        if (!(parts & UFORM_PART(uform_specs_[kind].part))) continue;
        uform_tensor_info_t info;
        uform_resolve_(config, (uform_tensor_kind_t)kind, 0, &info);
        total += info.rows * info.columns * (uform_tensor_per_block((uform_tensor_kind_t)kind) ? config->depth : 1);
    }
    return total;
}

size_t uform_tensor_index(uform_config_t const *config, uform_tensor_kind_t kind, size_t block) {
    if (kind < uform_tensor_attn_norm_k) return (size_t)kind;
    if (uform_tensor_per_block(kind)) return uform_tensor_attn_norm_k + block * uform_block_kinds_k + (kind - uform_tensor_attn_norm_k);
    return (size_t)kind - uform_block_kinds_k + uform_block_kinds_k * config->depth;
}

size_t uform_tensor_count(uform_config_t const *config) { return uform_tensor_list(config, ~0u, NULL); }

static uform_media_info_t const uform_media_infos_[uform_media_kinds_k] = {
    {uform_patch_values_k, uform_part_vision_k, uform_tensor_vision_patch_k, uform_tensor_vision_bias_k, uform_part_mae_k,
     uform_tensor_mae_head_k, uform_tensor_mae_bias_k},
    {uform_tube_values_k, uform_part_video_k, uform_tensor_video_tube_k, uform_tensor_video_bias_k, uform_part_mae_video_k,
     uform_tensor_mae_video_head_k, uform_tensor_mae_video_bias_k},
    {uform_frame_values_k, uform_part_audio_k, uform_tensor_audio_frame_k, uform_tensor_audio_bias_k, uform_part_mae_audio_k,
     uform_tensor_mae_audio_head_k, uform_tensor_mae_audio_bias_k},
};

uform_media_info_t const *uform_media_info(uform_cell_kind_t kind) { return &uform_media_infos_[kind - uform_cell_image_k]; }

uform_part_t uform_part_of_cell(uform_cell_kind_t kind) {
    switch (kind) {
    case uform_cell_byte_k: return uform_part_bytes_k;
    case uform_cell_image_k: return uform_part_vision_k;
    case uform_cell_video_k: return uform_part_video_k;
    case uform_cell_audio_k: return uform_part_audio_k;
    default: return uform_parts_k;
    }
}
