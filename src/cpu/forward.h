/*  forward.h (internal): one encoder pass on the CPU over a compacted list of cells: padding
 *  removed, each segment a contiguous span. The public verbs build these lists from texts or grids. */
#ifndef UFORM_CPU_FORWARD_H
#define UFORM_CPU_FORWARD_H

#include "cpu/kernels.h"
#include "model/model.h"

typedef struct uform_pass_t {
    size_t cells;                  /* at most the workspace's capacity */
    uint8_t const *kinds;          /* [cells] uform_cell_kind_t: bytes or media (no padding) */
    uint32_t const *values;        /* [cells] byte ids 0..257, or media rows */
    uform_media_t const *media;    /* [uform_media_kinds_k] the media rows index, or NULL for bytes alone */
    int media_on_device;           /* media's data is the CUDA context's device memory (its decoded patches) */
    int32_t const *positions;      /* [cells * 3] (t, h, w) */
    uform_span_t const *segments;  /* [segments_count], ordered, covering every cell once */
    size_t segments_count;
    size_t const *destinations;    /* [cells] output row of each cell, or NULL for the identity */
    float *hidden;                 /* [*, d] final-normed states, or NULL */
    float *pooled;                 /* [segments_count, E] pool head output e, or NULL */
    float *colbert;                /* [*, colbert_width] normalized, or NULL */
    float *logits;                 /* [*, 258], or NULL */
} uform_pass_t;

/** Runs the pass on the context's threads and workspace; the caller has checked the inputs and that
 *  the needed heads exist, and brought the model's packed copies up to date. */
void uform_cpu_forward(uform_context_t *context, uform_pass_t const *pass);

/** C [rows, matrix->rows] = A [rows, matrix->columns] W^T in the model's precision (rows at most a
 *  tile; `scratch` a thread's). */
void uform_cpu_linear(uform_model_t const *model, uform_weight_t const *matrix, float const *a, size_t a_stride,
                      size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch);

/** uform_cpu_linear's E4M3 product by a given kernel table (uform_bench_gemm and test_numkong pick it):
 *  C = (Q(A / s_a) Q(W / s_w)^T) s_a s_w, Q rounding to E4M3, s_a a scale per row of A (made here by
 *  the table's quantize_e4m3), W's codes and scales s_w those of `matrix` (uform_pack_e4m3). Uses
 *  scratch's inputs_bf16 [rows * depth], row_scales [rows] and panels_bf16 (uform_e4m3_panels_k
 *  panels of `depth`). */
void uform_cpu_linear_e4m3(uform_kernels_t const *kernels, uform_weight_t const *matrix, float const *a,
                           size_t a_stride, size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch);

/** uform_cpu_linear's int8 product by a given kernel table (uform_bench_gemm and test_kernels pick it):
 *  each row of A quantized by the table's quantize_int8 into scratch's inputs_int8 (rows *
 *  uform_int8_stride(depth) bytes) with its scale in row_scales, then the table's gemm_int8 against
 *  `matrix`'s codes, corrections and scales (uform_pack_int8). */
void uform_cpu_linear_int8(uform_kernels_t const *kernels, uform_weight_t const *matrix, float const *a,
                           size_t a_stride, size_t rows, float *c, size_t c_stride, uform_scratch_t *scratch);

#endif
