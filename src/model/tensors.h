/*  tensors.h (internal): the one table of every parameter a model can carry (SPEC.md section 7):
 *  its checkpoint name, shape from the configuration, storage, optimizer kind, initialization and
 *  the part (frontend, encoder or head) that owns it. Load, save, initialization, the CPU trainer
 *  and the CUDA step all walk this table; a new frontend or head is one entry here. Pure functions
 *  of the configuration: no allocation, no state. */
#ifndef UFORM_MODEL_TENSORS_H
#define UFORM_MODEL_TENSORS_H

#include <stddef.h>

#include "uform/types.h"

/** Who owns a tensor. A model carries the required parts always and any subset of the others. */
typedef enum uform_part_t {
    uform_part_bytes_k = 0,   /* the byte frontend, embed.bytes (required) */
    uform_part_vision_k = 1,  /* image patches: vision.patch, vision.bias */
    uform_part_video_k = 2,   /* video tubes: video.tube, video.bias */
    uform_part_audio_k = 3,   /* audio frames: audio.frame, audio.bias */
    uform_part_encoder_k = 4, /* the blocks and final_norm (required) */
    uform_part_pool_k = 5,    /* pool.query, pool.proj */
    uform_part_rerank_k = 6,  /* rerank.proj */
    uform_part_mlm_k = 7,     /* mlm.head */
    uform_part_siglip_k = 8,  /* siglip.scale, siglip.bias: defaulted when a checkpoint lacks them */
    uform_part_mae_k = 9,     /* mae.head, mae.bias: masked patches' pixels (docs/images.md) */
    uform_part_mae_audio_k = 10, /* mae_audio.head, mae_audio.bias: masked audio frames' samples (docs/audio_video.md) */
    uform_part_mae_video_k = 11, /* mae_video.head, mae_video.bias: masked tubes' pixels */
    uform_parts_k = 12,
} uform_part_t;

#define UFORM_PART(part) (1u << (part))
/** The parts every model carries. */
#define UFORM_PARTS_REQUIRED (UFORM_PART(uform_part_bytes_k) | UFORM_PART(uform_part_encoder_k) | UFORM_PART(uform_part_siglip_k))

/** The frontends a backend's stage runs: every kind, on the CPU and on the GPU. */
#define UFORM_FRONTENDS_CPU                                                                                           \
    (UFORM_PART(uform_part_bytes_k) | UFORM_PART(uform_part_vision_k) | UFORM_PART(uform_part_video_k) |              \
     UFORM_PART(uform_part_audio_k))
#define UFORM_FRONTENDS_CUDA UFORM_FRONTENDS_CPU

/** Every tensor kind, in checkpoint order; the per-block kinds sit between the first and last block kind. */
typedef enum uform_tensor_kind_t {
    uform_tensor_embed_bytes_k = 0,
    uform_tensor_vision_patch_k,
    uform_tensor_vision_bias_k,
    uform_tensor_video_tube_k,
    uform_tensor_video_bias_k,
    uform_tensor_audio_frame_k,
    uform_tensor_audio_bias_k,
    uform_tensor_attn_norm_k, /* the first per-block kind */
    uform_tensor_qkv_k,
    uform_tensor_out_k,
    uform_tensor_mlp_norm_k,
    uform_tensor_gate_up_k,
    uform_tensor_down_k, /* the last per-block kind */
    uform_tensor_final_norm_k,
    uform_tensor_pool_query_k,
    uform_tensor_pool_proj_k,
    uform_tensor_rerank_proj_k,
    uform_tensor_mlm_head_k,
    uform_tensor_siglip_scale_k,
    uform_tensor_siglip_bias_k,
    uform_tensor_mae_head_k,
    uform_tensor_mae_bias_k,
    uform_tensor_mae_audio_head_k,
    uform_tensor_mae_audio_bias_k,
    uform_tensor_mae_video_head_k,
    uform_tensor_mae_video_bias_k,
    uform_tensor_kinds_k,
} uform_tensor_kind_t;

/** The tensors outside the blocks that code names: X(field, kind) for each, so that the model's and
 *  the trainer's named views are declared and bound from this one list. */
#define UFORM_NAMED_TENSORS(X)                                                                                        \
    X(embed, uform_tensor_embed_bytes_k)                                                                              \
    X(vision_patch, uform_tensor_vision_patch_k)                                                                      \
    X(vision_bias, uform_tensor_vision_bias_k)                                                                        \
    X(final_norm, uform_tensor_final_norm_k)                                                                          \
    X(pool_query, uform_tensor_pool_query_k)                                                                          \
    X(pool_proj, uform_tensor_pool_proj_k)                                                                            \
    X(rerank_proj, uform_tensor_rerank_proj_k)                                                                        \
    X(mlm_head, uform_tensor_mlm_head_k)                                                                              \
    X(siglip_scale, uform_tensor_siglip_scale_k)                                                                      \
    X(siglip_bias, uform_tensor_siglip_bias_k)                                                                        \
    X(mae_head, uform_tensor_mae_head_k)                                                                              \
    X(mae_bias, uform_tensor_mae_bias_k)

enum {
    uform_block_kinds_k = uform_tensor_down_k - uform_tensor_attn_norm_k + 1, /* tensors per block */
    uform_patch_values_k = 16 * 16 * 4,   /* an RGBA patch, SPEC.md section 1 */
    uform_tube_values_k = 16 * 16 * 3 * 2, /* an RGB tube of two frames */
    uform_frame_values_k = 320,            /* 20 ms of 16 kHz audio */
};

/** How a tensor starts (uform_model_init): N(0, deviation) from its own RNG stream, or a constant. */
typedef enum uform_init_t {
    uform_init_normal_k = 0,   /* deviation 1 / sqrt(columns), times 1 / sqrt(2 depth) where `residual` */
    uform_init_unit_k = 1,     /* N(0, 1): the byte embedding */
    uform_init_constant_k = 2, /* every element `value` */
} uform_init_t;

/** One resolved tensor of a model: the table's entry for one block (or the model). */
typedef struct uform_tensor_info_t {
    char name[48];            /* checkpoint name: "blocks.3.qkv", "pool.proj" */
    uform_tensor_kind_t kind;
    uform_part_t part;
    size_t block;             /* per-block kinds: the block; else 0 */
    size_t rows, columns;     /* vectors and scalars: columns 1 */
    size_t rank;              /* as stored: 2 matrices, 1 vectors, 0 scalars */
    int matrix;               /* 1: BF16 master, factored Adafactor (R and C); 0: Float32 master, unfactored V */
    uform_init_t init;
    int residual;             /* normal init scaled by 1 / sqrt(2 depth) (out, down) */
    double value;             /* constant init */
    uint64_t stream;          /* normal init: the RNG stream, so that adding a tensor never shifts another's values */
} uform_tensor_info_t;

/** The table's name of a part ("bytes", "vision", ..., "pool", "rerank", "mlm", "siglip"). */
char const *uform_part_name(uform_part_t part);
/** The part named `name`, or uform_parts_k. */
uform_part_t uform_part_from_name(char const *name);

/** Fills `tensors` (NULL: only counts) with every tensor of the parts in `parts` (UFORM_PART bits)
 *  for `config`, in checkpoint order; returns how many. Uses width, depth, the widest embedding and
 *  the ColBERT width. */
size_t uform_tensor_list(uform_config_t const *config, unsigned parts, uform_tensor_info_t *tensors);

/** The elements of every tensor of `parts`, added up, for `config`. */
size_t uform_parts_elements(uform_config_t const *config, unsigned parts);

/** Where tensor `kind` (of `block`, for per-block kinds) sits in the list of all parts: a model's
 *  weights are laid out so, whatever parts it carries. */
size_t uform_tensor_index(uform_config_t const *config, uform_tensor_kind_t kind, size_t block);
/** How many tensors the list of all parts has. */
size_t uform_tensor_count(uform_config_t const *config);

/** Whether a kind repeats in every block. */
int uform_tensor_per_block(uform_tensor_kind_t kind);

/** What the code knows of a media kind: its vector's width, its frontend's part and two tensors,
 *  and its masked modelling head's (docs/images.md, docs/audio_video.md). */
typedef struct uform_media_info_t {
    size_t values; /* 1024 a patch, 1536 a tube, 320 an audio frame */
    uform_part_t part;
    uform_tensor_kind_t weight, bias;
    uform_part_t mae;
    uform_tensor_kind_t mae_head, mae_bias;
} uform_media_info_t;

/** The entry of media cell kind `kind` (image, video or audio). */
uform_media_info_t const *uform_media_info(uform_cell_kind_t kind);

/** The frontend part that reads cells of `kind`, or uform_parts_k for padding. */
uform_part_t uform_part_of_cell(uform_cell_kind_t kind);

#endif
