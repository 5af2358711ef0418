/*  model.h (internal): the model's weights (laid out by the table of tensors.h), read-only while
 *  contexts run passes over them, and the workspace a context's host side holds (context.h). */
#ifndef UFORM_MODEL_MODEL_H
#define UFORM_MODEL_MODEL_H

#include <pthread.h>

#include "core/arena.h"
#include "core/threads.h"
#include "model/grid.h"
#include "model/tensors.h"
#include "uform/model.h"

/** One parameter as the model holds it; tensors.h's table describes it. Storage exists only for
 *  the parts the model carries. */
typedef struct uform_weight_t {
    size_t rows, columns; /* vectors and scalars: columns 1 */
    uint16_t *bf16;       /* matrices: the BF16 master, row-major */
    float *f32;           /* vectors and scalars: the Float32 master */
    uint16_t *packed;     /* matrices in BF16 precision (and E4M3's other matrices): packed for the kernels (kernels.h) */
    float *widened;       /* matrices in Float32 precision: the master widened */
    uint8_t *e4m3;        /* the blocks' matrices in E4M3 precision: E4M3 codes packed (uform_pack_e4m3) */
    int8_t *int8;         /* the blocks' matrices in int8 precision: int8 codes packed (uform_pack_int8) */
    int32_t *corrections; /* [rows] int8: 128 x the sum of the row's codes (the inputs' +128 taken back) */
    float *scales;        /* [rows] the E4M3 or int8 codes' Float32 scale per row */
} uform_weight_t;

/** A block's weights, by name or by kind (views into the model's weights); the names follow the
 *  table's per-block kinds in order, from uform_tensor_attn_norm_k. */
typedef union uform_block_t {
    struct {
        uform_weight_t *attn_norm, *qkv, *out, *mlp_norm, *gate_up, *down;
    };
    uform_weight_t *kinds[uform_block_kinds_k];
} uform_block_t;
_Static_assert(uform_tensor_down_k - uform_tensor_attn_norm_k == 5, "uform_block_t names the six per-block kinds in order");

/** Per-thread scratch of a pass; sizes in docs/design.md. */
typedef struct uform_scratch_t {
    uint16_t *inputs_bf16;  /* a product's input rows rounded to BF16 */
    uint8_t *inputs_int8;   /* an int8 product's input codes (rows of uform_int8_stride bytes): inputs_bf16's memory */
    float *gate_up, *hidden, *product; /* one MLP tile */
    float *scores;          /* attention scores of one query tile */
    float *sums;            /* softmax denominators of one query tile */
    uint16_t *probabilities;
    uint16_t *queries;      /* [query tile, uform_query_stride_k] a query tile's BF16 rows */
    uint16_t *keys_packed, *values_packed;
    float *row_scales;      /* [tile] an E4M3 or int8 product's scale per input row */
    uint16_t *panels_bf16;  /* E4M3 weights of uform_e4m3_panels_k panels widened to BF16 */
} uform_scratch_t;

typedef struct uform_workspace_t {
    size_t cells;          /* capacity in cells */
    uform_arena_t arena;
    float *residual, *normed, *qkv, *attention; /* [cells, d], [cells, d], [cells, 3d], [cells, d] */
    uint16_t *qkv_bf16;    /* [cells, 3d] q, k, v rounded for attention's BF16 products: qkv's memory */
    /* The int8 precision's attention scores, head-major ([heads, cells, 64]: a head's rows 64 bytes apart),
     * in qkv's memory past qkv_bf16: q's and k's codes + 128, their scales and k's corrections
     * (128 sum of a row's codes) [heads, cells]. */
    uint8_t *q_int8, *k_int8;
    float *q_scales, *k_scales;
    int32_t *k_corrections;
    float *pooled;         /* [cells, d] attention-pooled rows */
    float *colbert;        /* [cells, colbert_width] per-cell vectors of documents */
    float *query_colbert;  /* [columns, colbert_width] the query's vectors while reranking */
    float *embeddings;     /* [cells, E] pool head outputs before Matryoshka normalization */
    uint8_t *kinds;        /* [cells] the compacted cells of a pass: kinds and values */
    uint32_t *values;      /* [cells] */
    int32_t *positions;    /* [cells * 3] */
    size_t *destinations;  /* [cells] */
    uform_span_t *spans;   /* [cells] */
    uform_scratch_t *scratch; /* one per thread */
    size_t scratch_threads;
} uform_workspace_t;

struct uform_model_t {
    uform_config_t config;
    unsigned parts;               /* the parts it carries (tensors.h, UFORM_PART bits) */
    uform_tensor_info_t *tensors; /* the table resolved for every part, in checkpoint order */
    uform_weight_t *weights;      /* [tensors_count], as `tensors` */
    size_t tensors_count;
    /* Named views into `weights` (always set; a part's storage is NULL while it is not carried). */
#define UFORM_WEIGHT_FIELD_(field, kind) uform_weight_t *field;
    UFORM_NAMED_TENSORS(UFORM_WEIGHT_FIELD_)
#undef UFORM_WEIGHT_FIELD_
    uform_block_t *blocks;
    char recipe[512], datasets[1024], warm_start[512]; /* how the weights came to be, for the README */
    uform_precision_t precision;
    uint64_t version;       /* counts changes of the weights: a GPU context's copy is current when it matches */
    int stale;              /* the weights changed since the packed or widened copies were made */
    pthread_mutex_t lock;   /* guards the lazy refresh of those copies, which any context's pass may start */
    uform_context_t *context; /* the model's own context: what the model-handle verbs run on */
    float *rope_cos, *rope_sin; /* [uform_rope_table_k][32] */
};

/* The most cells a workspace holds: 2^24, so that byte counts never overflow. */
enum { uform_max_cells_k = 1 << 24, uform_rope_table_k = 8192, uform_rope_slots_k = 32, uform_tile_rows_k = 128, uform_query_tile_k = 64, uform_attention_skew_k = 16,
       uform_query_stride_k = 80 /* a query tile's BF16 rows: 160 bytes apart, off the L1 sets of the 3d-wide qkv rows */,
       uform_e4m3_panels_k = 12 /* a multiple of every table's tile of panels (kernels*.c: 1, 2, 3, 4) */ };

/** The model's weight of `kind` (of `block` for per-block kinds). */
uform_weight_t *uform_model_weight(uform_model_t const *model, uform_tensor_kind_t kind, size_t block);
/** Whether the model carries `part`. */
int uform_model_carries(uform_model_t const *model, uform_part_t part);

/** A model of `config` with storage for the `parts` carried, its values unset (model.c). */
uform_status_t uform_model_skeleton(uform_config_t const *config, unsigned parts, uform_model_t **model);
/** Everything but the weights' values, once they are set: the rotary table, packed weights, the model's own context. */
uform_status_t uform_model_finish(uform_model_t *model);

/** Records that the weights changed (a step, a head re-initialized, a download): every context
 *  catches up before its next pass. Never while a pass runs. */
void uform_model_changed(uform_model_t *model);
/** Brings the packed or widened copies up to date where the weights changed; safe from any context. */
void uform_model_prepare(uform_model_t *model);

#endif
