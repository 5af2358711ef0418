/*  grow.c: Net2Net growth (SPEC.md section 8). `deepen` inserts identity blocks: a copy of the block
 *  before, its out and down projections zero, so that it adds nothing to the residual until trained.
 *  `widen` doubles d: the residual stream becomes [x, x], every tensor that writes it is duplicated,
 *  every one that reads it takes each input column halved in both halves, and the heads double
 *  (head i + H a copy of head i). Either refuses to return a model whose embeddings leave the
 *  source's by more than uform_grow_cosine_k. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numeric.h"
#include "core/status.h"
#include "model/model.h"
#include "uform/encode.h"

static double const uform_grow_cosine_k = 0.9999; /* SPEC.md section 8 */

/* How widening treats one axis of a tensor. */
typedef enum uform_axis_t {
    uform_axis_kept_k = 0, /* not a width: unchanged */
    uform_axis_copied_k,   /* written into the residual (or a head's rows): each segment of it stacked twice */
    uform_axis_halved_k,   /* read from the residual or the hidden layer: [W / 2, W / 2] */
} uform_axis_t;

/* Rows and columns of each kind as widening treats them; `segments` splits the rows (qkv's q, k and v;
 * gate_up's gate and up), each copied in place. */
typedef struct uform_widening_t {
    uform_axis_t rows, columns;
    size_t segments;
} uform_widening_t;

static uform_widening_t uform_widening_(uform_tensor_kind_t kind) {
    switch (kind) {
    case uform_tensor_embed_bytes_k: return (uform_widening_t){uform_axis_kept_k, uform_axis_copied_k, 1};
    case uform_tensor_qkv_k: return (uform_widening_t){uform_axis_copied_k, uform_axis_halved_k, 3};
    case uform_tensor_gate_up_k: return (uform_widening_t){uform_axis_copied_k, uform_axis_halved_k, 2};
    case uform_tensor_out_k:
    case uform_tensor_down_k: return (uform_widening_t){uform_axis_copied_k, uform_axis_halved_k, 1};
    case uform_tensor_pool_proj_k:
    case uform_tensor_rerank_proj_k:
    case uform_tensor_mlm_head_k:
    case uform_tensor_mae_head_k:
    case uform_tensor_mae_audio_head_k:
    case uform_tensor_mae_video_head_k: return (uform_widening_t){uform_axis_kept_k, uform_axis_halved_k, 1};
    case uform_tensor_vision_patch_k:
    case uform_tensor_vision_bias_k:
    case uform_tensor_video_tube_k:
    case uform_tensor_video_bias_k:
    case uform_tensor_audio_frame_k:
    case uform_tensor_audio_bias_k:
    case uform_tensor_attn_norm_k:
    case uform_tensor_mlp_norm_k:
    case uform_tensor_final_norm_k:
    case uform_tensor_pool_query_k: return (uform_widening_t){uform_axis_copied_k, uform_axis_kept_k, 1};
    default: return (uform_widening_t){uform_axis_kept_k, uform_axis_kept_k, 1};
    }
}

/* Element (r, c) of the grown tensor as an element of the source's and a factor (1 or 1/2). */
static size_t uform_widened_source_(uform_widening_t how, size_t source_rows, size_t source_columns, size_t r, size_t c,
                                    float *factor) {
    *factor = 1.0f;
    if (how.rows == uform_axis_copied_k) { /* grown row r of segment s: [segment s, segment s] */
        size_t segment = source_rows / how.segments, s = r / (2 * segment);
        r = s * segment + r % segment;
    }
    if (how.columns != uform_axis_kept_k) {
        if (how.columns == uform_axis_halved_k) *factor = 0.5f;
        c %= source_columns;
    }
    return r * source_columns + c;
}

/* Copies `from` into `to` (same kind, grown by `how`). */
static void uform_widen_weight_(uform_weight_t const *from, uform_weight_t *to, uform_tensor_info_t const *info) {
    uform_widening_t how = uform_widening_(info->kind);
    for (size_t r = 0; r < to->rows; ++r)
        for (size_t c = 0; c < to->columns; ++c) {
            float factor;
            size_t at = uform_widened_source_(how, from->rows, from->columns, r, c, &factor);
            if (info->matrix) /* halving a BF16 value is exact above the subnormals */
                to->bf16[r * to->columns + c] = uform_f32_to_bf16(uform_bf16_to_f32(from->bf16[at]) * factor);
            else to->f32[r * to->columns + c] = from->f32[at] * factor;
        }
}

static void uform_copy_weight_(uform_weight_t const *from, uform_weight_t *to, uform_tensor_info_t const *info) {
    size_t count = info->rows * info->columns;
    if (info->matrix) memcpy(to->bf16, from->bf16, count * sizeof(uint16_t));
    else memcpy(to->f32, from->f32, count * sizeof(float));
}

/* Whether an identity block's copy of `kind` is zero: out and down, so that it writes nothing back. */
static int uform_zeroed_(uform_tensor_kind_t kind) {
#if defined(UFORM_PLANT_DEEPEN_OUT_KEPT)
    return kind == uform_tensor_down_k;
#else
    return kind == uform_tensor_out_k || kind == uform_tensor_down_k;
#endif
}

/* Copies block `from` of the source into block `to` of the grown model; as an identity block if asked. */
static void uform_copy_block_(uform_model_t const *source, size_t from, uform_model_t *grown, size_t to, int identity) {
    for (size_t k = 0; k < uform_block_kinds_k; ++k) {
        uform_tensor_kind_t kind = (uform_tensor_kind_t)(uform_tensor_attn_norm_k + k);
        uform_weight_t *weight = grown->blocks[to].kinds[k];
        uform_copy_weight_(source->blocks[from].kinds[k], weight, &source->tensors[uform_tensor_index(&source->config, kind, from)]);
        if (identity && uform_zeroed_(kind)) memset(weight->bf16, 0, weight->rows * weight->columns * sizeof(uint16_t));
    }
}

/* Probe inputs: texts of several scripts and lengths, and where the model reads images, one picture. */
static char const *const uform_probe_texts_[] = {
    "a",
    "list directory contents",
    "Öffnet die Datei im Standardprogramm.",
    "ファイルを開く",
    "Выберите папку для сохранения файлов",
    "The quick brown fox jumps over the lazy dog, then naps in the shade of an old oak tree near the river bank.",
    "int main(void) { return 0; }",
};
enum { uform_probe_texts_k = sizeof(uform_probe_texts_) / sizeof(uform_probe_texts_[0]), uform_probe_side_k = 48 };

/* The lowest cosine between the two models' widest embeddings of the probes (both L2-normalized). */
static uform_status_t uform_grow_cosine_(uform_model_t *source, uform_model_t *grown, double *lowest) {
    size_t width = source->config.embedding_widths[source->config.embedding_widths_count - 1];
    size_t count = uform_probe_texts_k + 1;
    float *embeddings = malloc(2 * count * width * sizeof(float));
    uint8_t *rgba = malloc(uform_probe_side_k * uform_probe_side_k * 4);
    if (!embeddings || !rgba) {
        free(embeddings), free(rgba);
        return uform_fail(uform_out_of_memory_k, "cannot allocate the growth check's probes");
    }
    uform_text_t texts[uform_probe_texts_k];
    for (size_t i = 0; i < uform_probe_texts_k; ++i)
        texts[i] = (uform_text_t){(uint8_t const *)uform_probe_texts_[i], strlen(uform_probe_texts_[i])};
    for (size_t i = 0; i < uform_probe_side_k * uform_probe_side_k; ++i) { /* a diagonal gradient with a disc */
        int y = (int)(i / uform_probe_side_k), x = (int)(i % uform_probe_side_k);
        int disc = (x - 24) * (x - 24) + (y - 20) * (y - 20) < 100;
        rgba[4 * i] = (uint8_t)(5 * x), rgba[4 * i + 1] = (uint8_t)(5 * y), rgba[4 * i + 2] = disc ? 250 : 30, rgba[4 * i + 3] = 255;
    }
    uform_image_t image = {.pixels = {rgba, uform_probe_side_k, uform_probe_side_k, 4 * uform_probe_side_k}, .name = "probe"};
    int pictures = uform_model_carries(source, uform_part_vision_k);
    uform_status_t status = uform_ok_k;
    uform_model_t *models[2] = {source, grown};
    for (size_t m = 0; m < 2 && status == uform_ok_k; ++m) {
        float *into = embeddings + m * count * width;
        status = uform_encode(models[m], texts, uform_probe_texts_k, width, into, NULL);
        if (status == uform_ok_k && pictures) status = uform_encode_images(models[m], &image, 1, width, into + uform_probe_texts_k * width);
    }
    *lowest = 1.0;
    for (size_t i = 0; status == uform_ok_k && i < uform_probe_texts_k + (size_t)pictures; ++i) {
        double dot = 0, first = 0, second = 0; /* divided by the norms: Float32's unit vectors are 1 only to 1e-7 */
        for (size_t j = 0; j < width; ++j) {
            double a = embeddings[i * width + j], b = embeddings[(count + i) * width + j];
            dot += a * b, first += a * a, second += b * b;
        }
        double cosine = dot / sqrt(first * second);
        if (!(cosine >= *lowest)) *lowest = cosine; /* NaN counts as the lowest */
    }
    free(embeddings), free(rgba);
    return status;
}

/* Checks a grown model against its source; closes it and fails unless it reproduces the embeddings. */
static uform_status_t uform_grow_finish_(uform_model_t *source, uform_model_t *grown, char const *how, uform_model_t **result,
                                         double *cosine) {
    double lowest = 0;
    uform_status_t status = uform_model_finish(grown);
    if (status == uform_ok_k) status = uform_grow_cosine_(source, grown, &lowest);
    if (cosine) *cosine = lowest;
    if (status == uform_ok_k && !(lowest >= uform_grow_cosine_k))
        status = uform_fail(uform_format_k, "%s: the grown model's embeddings leave the source's (lowest cosine %.6f over the probes, "
                                            "%.4f needed): nothing grown", how, lowest, uform_grow_cosine_k);
    if (status != uform_ok_k) {
        uform_model_close(grown);
        return status;
    }
    snprintf(grown->recipe, sizeof(grown->recipe), "%s of a %s model (recipe: %.300s)", how, source->config.tier, source->recipe);
    snprintf(grown->datasets, sizeof(grown->datasets), "%s", source->datasets);
    snprintf(grown->warm_start, sizeof(grown->warm_start), "%s", source->warm_start);
    *result = grown;
    return uform_ok_k;
}

uform_status_t uform_model_deepen(uform_model_t *source, size_t blocks, uform_model_t **result, double *cosine) {
    if (!source || !result) return uform_fail(uform_invalid_argument_k, "uform_model_deepen: NULL argument");
    *result = NULL;
    size_t depth = source->config.depth;
    if (!blocks || depth + blocks > 256)
        return uform_fail(uform_invalid_argument_k, "uform_model_deepen: %zu more blocks on %zu: the depth must end in %zu..256", blocks,
                          depth, depth + 1);
    uform_config_t config = source->config;
    config.depth = depth + blocks;
    snprintf(config.tier, sizeof(config.tier), "%zux%zu", config.width, config.depth);
    uform_model_t *grown;
    UFORM_TRY(uform_model_skeleton(&config, source->parts, &grown));
    for (size_t i = 0; i < source->tensors_count; ++i) { /* everything outside the blocks, as it is */
        uform_tensor_info_t const *info = &source->tensors[i];
        if (!uform_tensor_per_block(info->kind) && (source->parts & UFORM_PART(info->part)))
            uform_copy_weight_(&source->weights[i], uform_model_weight(grown, info->kind, 0), info);
    }
    /* New block j (1..blocks) follows source block ceil(j depth / blocks) - 1: spread evenly, the last one last. */
    for (size_t from = 0, to = 0, added = 0; from < depth; ++from) {
        uform_copy_block_(source, from, grown, to++, 0);
        for (; added < blocks && (added + 1) * depth <= (from + 1) * blocks; ++added) uform_copy_block_(source, from, grown, to++, 1);
    }
    char how[64];
    snprintf(how, sizeof(how), "deepened by %zu block%s", blocks, blocks == 1 ? "" : "s");
    return uform_grow_finish_(source, grown, how, result, cosine);
}

uform_status_t uform_model_widen(uform_model_t *source, uform_model_t **result, double *cosine) {
    if (!source || !result) return uform_fail(uform_invalid_argument_k, "uform_model_widen: NULL argument");
    *result = NULL;
    if (2 * source->config.width > 8192)
        return uform_fail(uform_invalid_argument_k, "uform_model_widen: width %zu doubled passes 8192", source->config.width);
    uform_config_t config = source->config;
    config.width *= 2, config.heads *= 2; /* the Matryoshka and ColBERT widths stay the source's */
    snprintf(config.tier, sizeof(config.tier), "%zux%zu", config.width, config.depth);
    uform_model_t *grown;
    UFORM_TRY(uform_model_skeleton(&config, source->parts, &grown));
    for (size_t i = 0; i < source->tensors_count; ++i) {
        uform_tensor_info_t const *info = &source->tensors[i];
        if (source->parts & UFORM_PART(info->part))
            uform_widen_weight_(&source->weights[i], &grown->weights[i], info);
    }
    return uform_grow_finish_(source, grown, "widened to twice the width", result, cosine);
}
