/*  cuda.h (internal): the CUDA kernels of the training step behind C entry points. Every entry
 *  takes the stream to launch on and returns 0 or a cudaError_t code; none synchronizes. BF16
 *  values are uint16_t bit patterns. `plant` selects a deliberate break for the contract suite's
 *  controls (test/cuda/contract.c); production callers pass 0. Precision rule: store and compute
 *  in BF16, accumulate and normalize in Float32. */
#ifndef UFORM_CUDA_CUDA_H
#define UFORM_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** x [cells, width] (Float32) = table [258, width] (BF16) rows at values [cells]. */
int uform_cuda_embed_forward(uint16_t const *table, uint32_t const *values, size_t cells, size_t width, float *x,
                             void *stream, int plant);
/** grad [258, width] += sum over cells with value v of dx [cell]; deterministic: `order` lists the
 *  cells sorted by value and `offsets` [259] bounds each value's run of it. */
int uform_cuda_embed_backward(float const *dx, uint32_t const *order, uint32_t const *offsets, size_t width,
                              float *grad, void *stream, int plant);

/** y [cells, width] (BF16) = x / sqrt(mean(x^2) + 1e-6) * gain; scales [cells] = 1 / sqrt(...). */
int uform_cuda_rmsnorm_forward(float const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                               float *scales, void *stream, int plant);
/** dx [cells, width] += the gradient through the norm of dy [cells, width] (Float32); partial gain
 *  gradients go to `gain_partials` [blocks, width] (blocks = ceil(cells / 32)), then
 *  `uform_cuda_rmsnorm_gain_reduce` adds them into `gain_grad` in a fixed order. */
int uform_cuda_rmsnorm_backward(float const *x, float const *gain, float const *scales, float const *dy,
                                size_t cells, size_t width, float *dx, float *gain_partials, void *stream, int plant);
int uform_cuda_rmsnorm_gain_reduce(float const *gain_partials, size_t cells, size_t width, float *gain_grad,
                                   void *stream);

/** Rotates q and k (columns [0, 2 width) of qkv [cells, 3 width], BF16) by M-RoPE at positions
 *  [cells, 3]; `direction` -1 applies the inverse rotation (the backward pass, on dq and dk). */
int uform_cuda_rope(uint16_t *qkv, int32_t const *positions, size_t cells, size_t width, int direction, void *stream,
                    int plant);

/** hidden [cells, 4w] (BF16) = silu(gate) * up from gate_up [cells, 8w] (BF16). */
int uform_cuda_swiglu_forward(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                              void *stream, int plant);
/** d_gate_up [cells, 8w] (BF16) from d_hidden [cells, 4w] (Float32) and gate_up. */
int uform_cuda_swiglu_backward(uint16_t const *gate_up, float const *d_hidden, size_t cells, size_t hidden_width,
                               uint16_t *d_gate_up, void *stream, int plant);

/** Masked-byte cross-entropy over logits [rows, 258] (BF16) at `targets` [rows] (-1: not scored):
 *  losses [rows] (Float32, 0 where not scored) and d_logits [rows, 258] (BF16) = (softmax - onehot)
 *  * scale, written without materializing probabilities in memory. */
int uform_cuda_cross_entropy(uint16_t const *logits, int32_t const *targets, size_t rows, float scale, float *losses,
                             uint16_t *d_logits, void *stream, int plant);

/** Attention within segments, per head of 64: `spans` [segments * 2] holds each segment's first
 *  cell and length; `segment_of` [cells] each cell's segment. attended [cells, width] (BF16) =
 *  softmax(q k^T / 8) v over the cell's own segment, with Float32 scores, online softmax and
 *  accumulation; `log_sums` [cells, heads] keeps each row's log-sum-exp for the backward pass. */
int uform_cuda_attention_forward(uint16_t const *qkv, uint32_t const *spans, uint32_t const *segment_of, size_t cells,
                                 size_t width, uint16_t *attended, float *log_sums, void *stream, int plant);
/** The gradients of q, k and v (BF16, into d_qkv [cells, 3 width]) from d_attended [cells, width]
 *  (Float32), the forward's inputs, its BF16 output and log-sum-exps. Each output element is owned
 *  by one thread that sums in a fixed order: no atomics, results repeat bitwise. */
int uform_cuda_attention_backward(uint16_t const *qkv, uint16_t const *attended, float const *log_sums,
                                  float const *d_attended, uint32_t const *spans, uint32_t const *segment_of,
                                  size_t cells, size_t width, uint16_t *d_qkv, void *stream, int plant);

/** The attention pool: per segment and head, alpha = softmax over its cells of query . h / 8 and
 *  pooled = sum alpha h. hidden [cells, width] (BF16); query [width] (Float32); pooled
 *  [segments, width] (BF16, the input of pool.proj); weights [cells, heads] keeps alpha. */
int uform_cuda_pool_forward(uint16_t const *hidden, float const *query, uint32_t const *spans, size_t segments,
                            size_t width, uint16_t *pooled, float *weights, void *stream, int plant);
/** Its backward from d_pooled [segments, width] (Float32): d_hidden [cells, width] += (Float32),
 *  and query partials [segments, width] that `uform_cuda_pool_query_reduce` adds into d_query in
 *  segment order. */
int uform_cuda_pool_backward(uint16_t const *hidden, float const *query, float const *weights, float const *d_pooled,
                             uint32_t const *spans, size_t segments, size_t width, float *d_hidden,
                             float *query_partials, void *stream, int plant);
int uform_cuda_pool_query_reduce(float const *query_partials, size_t segments, size_t width, float *d_query,
                                 void *stream);

/** One Adafactor step (SPEC.md section 5) of a BF16 matrix [rows, columns] with Float32 gradient,
 *  factored moments R [rows], C [columns] and first moment M; `scratch` holds rows + columns + 2
 *  floats. Step t is 1-based. */
int uform_cuda_adafactor_matrix(uint16_t *weights, float const *gradient, float *row_moment, float *column_moment,
                                float *first_moment, size_t rows, size_t columns, double learning_rate, double beta1,
                                double beta2, double clip, double weight_decay, size_t step, float *scratch,
                                void *stream, int plant);

/** C [m, n] = A [m, k] B^T with A, B BF16 row-major, Float32 accumulation, C BF16 or Float32
 *  (`c_is_f32`), through cuBLASLt. `handle` comes from uform_cuda_gemm_create. */
typedef struct uform_cuda_gemm_t uform_cuda_gemm_t;
int uform_cuda_gemm_create(uform_cuda_gemm_t **gemm, size_t workspace_bytes);
void uform_cuda_gemm_destroy(uform_cuda_gemm_t *gemm);
int uform_cuda_gemm_nt(uform_cuda_gemm_t *gemm, uint16_t const *a, uint16_t const *b, void *c, int c_is_f32, size_t m,
                       size_t n, size_t k, void *stream, int plant);

#ifdef __cplusplus
}
#endif
#endif
