/*  model.h (internal): the model's weights, workspace and the tensor names of SPEC.md section 7. */
#ifndef UFORM_MODEL_MODEL_H
#define UFORM_MODEL_MODEL_H

#include "core/arena.h"
#include "core/threads.h"
#include "uform/model.h"

/** A weight matrix [rows, columns] as stored (BF16), plus what the products need of it. */
typedef struct uform_matrix_t {
    size_t rows, columns;
    uint16_t *bf16; /* owned, row-major */
    uint16_t *packed; /* packed for the BF16 kernels (kernels.h) */
    float *f32;     /* widened copy, only in Float32 precision */
} uform_matrix_t;

typedef struct uform_block_t {
    float *attn_norm, *mlp_norm; /* Float32 masters */
    uform_matrix_t qkv, out, gate_up, down;
} uform_block_t;

/** Per-thread scratch of a pass; sizes in docs/design.md. */
typedef struct uform_scratch_t {
    uint16_t *inputs_bf16;  /* a product's input rows rounded to BF16 */
    float *gate_up, *hidden, *product; /* one MLP tile */
    float *scores;          /* attention scores of one query tile */
    float *sums;            /* softmax denominators of one query tile */
    uint16_t *queries, *probabilities;
    uint16_t *keys_packed, *values_packed;
} uform_scratch_t;

/** One segment of a pass: its cells, and the cells of the row it was packed into. */
typedef struct uform_span_t {
    size_t start, length;
    size_t row_start, row_length;
} uform_span_t;

typedef struct uform_workspace_t {
    size_t cells;          /* capacity in cells */
    uform_arena_t arena;
    float *residual, *normed, *qkv, *attention; /* [cells, d], [cells, d], [cells, 3d], [cells, d] */
    float *pooled;         /* [cells, d] attention-pooled rows */
    float *colbert;        /* [cells, colbert_width] per-cell vectors of documents */
    float *query_colbert;  /* [columns, colbert_width] the query's vectors while reranking */
    float *embeddings;     /* [cells, E] pool head outputs before Matryoshka normalization */
    uint32_t *values;      /* [cells] the compacted cells of a pass */
    int32_t *positions;    /* [cells * 3] */
    size_t *destinations;  /* [cells] */
    uform_span_t *spans;   /* [cells] */
    uform_scratch_t *scratch; /* one per thread */
    size_t scratch_threads;
} uform_workspace_t;

struct uform_model_t {
    uform_config_t config;
    uform_matrix_t embed; /* [258, d] */
    uform_block_t *blocks;
    float *final_norm;
    float *pool_query; /* NULL when the checkpoint has no pool head */
    uform_matrix_t pool_proj, rerank_proj, mlm_head; /* rows == 0 when absent */
    float siglip_scale, siglip_bias;
    char recipe[512], datasets[1024], warm_start[512]; /* how the weights came to be, for the README */
    uform_precision_t precision;
    int stale; /* a trainer changed the weights: packed or widened copies need refreshing */
    uform_device_t device;         /* where passes run (uform_model_set_device) */
    struct uform_cuda_forward_t *cuda; /* the GPU's copy of the weights (cuda/forward.h), NULL on the CPU */
    int cuda_stale;                /* the weights changed since that copy was made: upload before the next pass */
    uform_pool_t *pool;
    uform_workspace_t workspace;
    float *rope_cos, *rope_sin; /* [uform_rope_table_k][32] */
};

/* The most cells a workspace holds: 2^24, so that byte counts never overflow. */
enum { uform_max_cells_k = 1 << 24, uform_rope_table_k = 8192, uform_rope_slots_k = 32, uform_tile_rows_k = 128, uform_query_tile_k = 64 };

/** Rebuilds the packed or widened copies of every matrix from its BF16 weights, in place. */
void uform_model_refresh(uform_model_t *model);

/** Makes sure the workspace holds `cells` cells and one scratch per pool thread. */
uform_status_t uform_workspace_reserve(uform_model_t *model, size_t cells);

#endif
