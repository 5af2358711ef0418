/*  cuda.h (internal): the CUDA kernels of the training step behind C entry points. Every entry
 *  takes the stream to launch on and returns a status of types.h, noting on failure a message that
 *  names the entry, the call and its error (error.h's uform_cuda_noted); none synchronizes. BF16
 *  values are uint16_t bit patterns. Precision rule: store and compute in BF16, accumulate and
 *  normalize in Float32. */
#ifndef UFORM_CUDA_CUDA_H
#define UFORM_CUDA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "uform/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** x [cells, width] (Float32) = table [258, width] (BF16) rows at values [cells]. */
uform_status_t uform_cuda_embed_forward(uint16_t const *table, uint32_t const *values, size_t cells, size_t width,
                                        float *x, void *stream);
/** grad [258, width] += sum over cells with value v of dx [cell]; deterministic: `order` lists the
 *  cells sorted by value and `offsets` [259] bounds each value's run of it. Each run is summed in
 *  pieces of uform_cuda_embed_piece_k cells, in order, then its pieces in order, into `partials`
 *  (uform_cuda_embed_partials(cells, width) floats of scratch). */
enum { uform_cuda_embed_piece_k = 128 };
size_t uform_cuda_embed_partials(size_t cells, size_t width);
uform_status_t uform_cuda_embed_backward(float const *dx, uint32_t const *order, uint32_t const *offsets, size_t cells,
                                         size_t width, float *partials, float *grad, void *stream);

/** The media frontends around their product (frontend.cu; encoder.h runs them with cuBLASLt's
 *  Y = V W^T between), one media kind at a time: its cells are the first counts[0] of `capacity`
 *  (both launches and live count bounded by it; counts [2] in device memory: the live count, then
 *  the rows' uform_media_dtype_t), each with its row of x in `cells` [capacity]. vectors [capacity,
 *  values] (BF16) = rows [capacity, values] (Float32 or BF16) rounded to nearest even, the rows past
 *  the live ones 0; `values` is the kind's width (uform_media_info: 1024 a patch, 1536 a tube, 320
 *  an audio frame; a multiple of 8) and `kind` its uform_cell_kind_t (which the planted controls read). */
uform_status_t uform_cuda_media_vectors(void const *rows, uint32_t const *counts, size_t capacity, size_t values, int kind,
                                        uint16_t *vectors, void *stream);
/** x [cells[i]] = product [i] + bias for each live i (product [capacity, width], Float32); the other rows of x untouched. */
uform_status_t uform_cuda_media_scatter(float const *product, float const *bias, uint32_t const *cells,
                                        uint32_t const *counts, size_t capacity, size_t width, float *x, void *stream);
/** d_product [i] = d_x [cells[i]] rounded to BF16 for each live i, 0 past them (d_product [capacity, width]). */
uform_status_t uform_cuda_media_gather(float const *d_x, uint32_t const *cells, uint32_t const *counts, size_t capacity,
                                       size_t width, uint16_t *d_product, void *stream);
/** bias_grad [width] += the sum over live i of d_x [cells[i]], in pieces of uform_cuda_media_piece_k
 *  rows, each in order, then the pieces in order, into `partials` (uform_cuda_media_bias_partials
 *  floats of scratch): deterministic. */
enum { uform_cuda_media_piece_k = 128 };
size_t uform_cuda_media_bias_partials(size_t capacity, size_t width);
uform_status_t uform_cuda_media_bias_backward(float const *d_x, uint32_t const *cells, uint32_t const *counts,
                                              size_t capacity, size_t width, float *partials, float *bias_grad,
                                              void *stream);

/** The masked modelling heads' kernels (frontend.cu; docs/images.md, "Masked image modelling",
 *  docs/audio_video.md): one media kind's masked vectors are the first counts[2] of `capacity`
 *  (counts [3] in device memory: the live cells, the rows' uform_media_dtype_t, the masked ones),
 *  each with its cell in `cells` [capacity] and its true values in `targets` [capacity, values] of
 *  that dtype. gathered [i] = h [cells[i]] (BF16 rows of `width`) for each masked i, 0 past them. */
uform_status_t uform_cuda_mae_gather(uint16_t const *h, uint32_t const *cells, uint32_t const *counts, size_t capacity,
                                     size_t width, uint16_t *gathered, void *stream);
/** With e = predictions [i, v] + bias [v] - targets [i, v] over the M masked rows (predictions
 *  [capacity, values], Float32): d_predictions [i, v] = BF16(2 e / (M values)) (0 past them);
 *  bias_grad [values] += the Float32 sum of those gradients over i; loss [0] = sum e^2 / (M values),
 *  0 with M = 0. Sums in pieces of uform_cuda_media_piece_k rows, each in order, then the pieces in
 *  order (`partials`: uform_cuda_mae_partials(capacity, values) floats): deterministic. */
size_t uform_cuda_mae_partials(size_t capacity, size_t values);
uform_status_t uform_cuda_mae_loss(float const *predictions, float const *bias, void const *targets, uint32_t const *counts,
                                   size_t capacity, size_t values, uint16_t *d_predictions, float *partials,
                                   float *bias_grad, float *loss, void *stream);
/** d_h [cells[i]] += d_gathered [i] for each masked i (Float32 rows of `width`); cells are distinct. */
uform_status_t uform_cuda_mae_scatter_add(float const *d_gathered, uint32_t const *cells, uint32_t const *counts,
                                          size_t capacity, size_t width, float *d_h, void *stream);

/** y [cells, width] (BF16) = x / sqrt(mean(x^2) + 1e-6) * gain; scales [cells] = 1 / sqrt(...). */
uform_status_t uform_cuda_rmsnorm_forward(float const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                                          float *scales, void *stream);
/** The same, and y's rows quantized for an E4M3 product as uform_cuda_quantize_e4m3 quantizes them
 *  (codes [cells, width], code_scales [cells]; `fixed` as there), in the one pass; a NULL `y` stores
 *  the codes alone. */
uform_status_t uform_cuda_rmsnorm_forward_e4m3(float const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                                               float *scales, uint8_t *codes, float *code_scales, float fixed, void *stream);
/** uform_cuda_rmsnorm_forward_e4m3 over a BF16 x (inference's residual stream), each value widened
 *  exactly: the same sums in the same order, so the same outputs as the Float32 entries over x widened.
 *  `codes` NULL: y alone, as uform_cuda_rmsnorm_forward writes it. */
uform_status_t uform_cuda_rmsnorm_forward_bf16(uint16_t const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                                               float *scales, uint8_t *codes, float *code_scales, float fixed, void *stream);
/** dx [cells, width] += the gradient through the norm of dy [cells, width] (Float32), and when
 *  `dx_rounded` is not NULL the new dx rounded to BF16 there too (the next product's operand);
 *  partial gain gradients go to `gain_partials` (uform_cuda_rmsnorm_partials floats), then
 *  `uform_cuda_rmsnorm_gain_reduce` adds them into `gain_grad` in a fixed order. The norms take
 *  widths that are multiples of 64 up to 2048 (uform_invalid_argument_k otherwise). */
uform_status_t uform_cuda_rmsnorm_backward(float const *x, float const *gain, float const *scales, float const *dy,
                                           size_t cells, size_t width, float *dx, uint16_t *dx_rounded,
                                           float *gain_partials, void *stream);
size_t uform_cuda_rmsnorm_partials(size_t cells, size_t width);
uform_status_t uform_cuda_rmsnorm_gain_reduce(float const *gain_partials, size_t cells, size_t width, float *gain_grad,
                                              void *stream);

/** The M-RoPE rotations of a batch: table [cells, 32, 2] = (cos, sin) of each slot's angle at
 *  positions [cells, 3], the angle in double; computed once per step, read by every block. */
uform_status_t uform_cuda_rope_table(int32_t const *positions, size_t cells, float *table, void *stream);
/** Rotates q and k (columns [0, 2 width) of qkv [cells, 3 width], BF16) by the table's angles;
 *  `direction` -1 applies the inverse rotation (the backward pass, on dq and dk). */
uform_status_t uform_cuda_rope(uint16_t *qkv, float const *table, size_t cells, size_t width, int direction,
                               void *stream);
/** FP8 attention's inputs: q and k rotated as uform_cuda_rope rotates them (BF16, qkv itself untouched),
 *  then they and v coded as E4M3 at scales [3] (q, k, v: value / scale rounded, saturating at 448) into
 *  codes [cells, 3 width]. */
uform_status_t uform_cuda_rope_e4m3(uint16_t const *qkv, float const *table, size_t cells, size_t width,
                                    float const scales[3], uint8_t *codes, void *stream);

/** hidden [cells, 4w] (BF16) = silu(gate) * up from gate_up [cells, 8w] (BF16). */
uform_status_t uform_cuda_swiglu_forward(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                         void *stream);
/** The down product's E4M3 input in one pass: uform_cuda_quantize_e4m3 of what uform_cuda_swiglu_forward
 *  would write (codes [cells, 4w], scales [cells]; `fixed` as there), the BF16 hidden values not stored. */
uform_status_t uform_cuda_swiglu_e4m3(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint8_t *codes,
                                      float *scales, float fixed, void *stream);
/** The same from gate_up as E4M3 codes [cells, 8w] at one scale (uform_cuda_gemm_e4m3_codes): codes [cells, 4w]
 *  of silu(gate) up at `fixed`, computed in Float32 (hidden_width a multiple of 16). */
uform_status_t uform_cuda_swiglu_e4m3_codes(uint8_t const *gate_up, float scale, size_t cells, size_t hidden_width,
                                           uint8_t *codes, float fixed, void *stream);
/** d_gate_up [cells, 8w] (BF16) from d_hidden [cells, 4w] (BF16) and gate_up. */
uform_status_t uform_cuda_swiglu_backward(uint16_t const *gate_up, uint16_t const *d_hidden, size_t cells,
                                          size_t hidden_width, uint16_t *d_gate_up, void *stream);

/** An E4M3 product's input (docs/precision.md): per row of x [cells, width] (BF16), scales [row] =
 *  max |x| / 448 (1 for a zero row) and codes [row] = E4M3(x * (1 / scale)), nearest even, saturated
 *  (cuda_fp8.h's conversion). With `fixed` > 0 every row's scale is `fixed` (an input bound / 448,
 *  known ahead: no reduction) and `scales` is not written (may be NULL). */
uform_status_t uform_cuda_quantize_e4m3(uint16_t const *x, size_t cells, size_t width, uint8_t *codes, float *scales,
                                        float fixed, void *stream);
/** y [count] (BF16) = x [count] (Float32) rounded to nearest even: a gradient entering a product. */
uform_status_t uform_cuda_round_bf16(float const *x, size_t count, uint16_t *y, void *stream);
/** result[0] = sum(x [count]) times *scale (device; NULL for 1), in a fixed order (one block). */
uform_status_t uform_cuda_sum(float const *x, size_t count, float const *scale, float *result, void *stream);

/** Masked-byte cross-entropy over logits [rows, 258] (BF16, rows `stride` elements apart) at `targets` [rows] (-1: not scored):
 *  losses [rows] (Float32, 0 where not scored) and d_logits [rows, 258] (BF16) = (softmax - onehot)
 *  * scale (`scale` in device memory: it changes per batch under one graph), written without
 *  materializing probabilities in memory. */
uform_status_t uform_cuda_cross_entropy(uint16_t const *logits, size_t stride, int32_t const *targets, size_t rows,
                                        float const *scale, float *losses, uint16_t *d_logits, void *stream);

/** Attention within segments, per head of 64, on tensor cores: `spans` [segments * 2] holds each
 *  segment's first cell and length (segments are contiguous runs in cell order); `segment_of`
 *  [cells] each cell's segment. attended [cells, width] (BF16) = softmax(q k^T / 8) v over the
 *  cell's own segment, with Float32 scores, online softmax and accumulation (the weights enter
 *  the product rounded to BF16); `log_sums` [cells, heads] keeps each row's log-sum-exp. */
uform_status_t uform_cuda_attention_forward(uint16_t const *qkv, uint32_t const *spans, uint32_t const *segment_of,
                                            size_t cells, size_t width, uint16_t *attended, float *log_sums,
                                            void *stream);
/** The same writing the out product's E4M3 input instead (inference at a bounded scale): codes [cells, width]
 *  of the BF16 output as uform_cuda_quantize_e4m3 at `fixed` codes it, bit for bit; no log-sum-exps. */
uform_status_t uform_cuda_attention_forward_e4m3(uint16_t const *qkv, uint32_t const *spans, uint32_t const *segment_of,
                                                 size_t cells, size_t width, uint8_t *codes, float fixed, void *stream);
/** The same over q and k not yet rotated: each tile of them rotated by M-RoPE's table `rotations`
 *  [cells, 32] (cos, sin; uform_cuda_rope_table) as it loads, with uform_cuda_rope's arithmetic, so
 *  the outputs are those of uform_cuda_rope (direction 1) then uform_cuda_attention_forward, bit for
 *  bit; qkv is left as it was (inference: the rotated q and k are never stored). */
uform_status_t uform_cuda_attention_forward_rotating(uint16_t const *qkv, float const *rotations, uint32_t const *spans,
                                                     uint32_t const *segment_of, size_t cells, size_t width,
                                                     uint16_t *attended, float *log_sums, void *stream);
/** The gradients of q, k and v (BF16, into d_qkv [cells, 3 width]) from d_attended [cells, width]
 *  (BF16), the forward's inputs, its output and log-sum-exps; `deltas` [cells, heads] is scratch
 *  for dO . O. Each output element has one owner that sums in a fixed order: no atomics, results
 *  repeat bitwise. */
uform_status_t uform_cuda_attention_backward(uint16_t const *qkv, uint16_t const *attended, float const *log_sums,
                                             uint16_t const *d_attended, uint32_t const *spans,
                                             uint32_t const *segment_of, size_t cells, size_t width, float *deltas,
                                             uint16_t *d_qkv, void *stream);

/** cuDNN's ragged layout of the segments (cudnn_attention.cpp): lengths [segments] and the
 *  element offsets [segments + 1] of each segment's first cell in qkv rows (3 width) and in rows of
 *  width; segments of length 0 (a plan's padding) start at cell `cells` with length `padding`, and the end at
 *  `cells + padding`, so the offsets never fall. `padding` 1 (FP8 plans: cuDNN's FP8 kernel faults on an empty
 *  segment) has them read and write a spare row `cells`, which the caller provides. */
uform_status_t uform_cuda_ragged_offsets(uint32_t const *spans, size_t segments, size_t cells, size_t width, size_t padding,
                                         int32_t *lengths, int32_t *qkv_offsets, int32_t *row_offsets, void *stream);

/** The attention pool: per segment and head, alpha = softmax over its cells of query . h / 8 and
 *  pooled = sum alpha h. hidden [cells, width] (BF16); query [width] (Float32); pooled
 *  [segments, width] (BF16, the input of pool.proj); weights [cells, heads] keeps alpha. */
uform_status_t uform_cuda_pool_forward(uint16_t const *hidden, float const *query, uint32_t const *spans,
                                       size_t segments, size_t width, uint16_t *pooled, float *weights, void *stream);
/** Its backward from d_pooled [segments, width] (Float32): d_hidden [cells, width] += (Float32),
 *  and query partials [segments, width] that `uform_cuda_pool_query_reduce` adds into d_query in
 *  segment order. */
uform_status_t uform_cuda_pool_backward(uint16_t const *hidden, float const *query, float const *weights,
                                        float const *d_pooled, uint32_t const *spans, size_t segments, size_t width,
                                        float *d_hidden, float *query_partials, void *stream);
uform_status_t uform_cuda_pool_query_reduce(float const *query_partials, size_t segments, size_t width, float *d_query,
                                            void *stream);

/** The per-step scalars Adafactor reads from device memory: schedule = {learning rate,
 *  1 - beta1^t, 1 - beta2^t} for step t (1-based), computed in double. */
void uform_cuda_adafactor_schedule(double learning_rate, double beta1, double beta2, size_t step, float schedule[3]);
/** One Adafactor step (SPEC.md section 5) of a BF16 matrix [rows, columns] with Float32 gradient,
 *  factored moments R [rows], C [columns] and first moment M; `schedule` (device) as above;
 *  `scratch` holds uform_cuda_adafactor_scratch(rows, columns) floats. */
uform_status_t uform_cuda_adafactor_matrix(uint16_t *weights, float const *gradient, float *row_moment,
                                           float *column_moment, float *first_moment, size_t rows, size_t columns,
                                           float const *schedule, double beta1, double beta2, double clip,
                                           double weight_decay, float *scratch, void *stream);
size_t uform_cuda_adafactor_scratch(size_t rows, size_t columns);
/** The same for a Float32 vector (norm gains, pool.query, scalars) with an unfactored V [count]. */
uform_status_t uform_cuda_adafactor_vector(float *weights, float const *gradient, float *moment, float *first_moment,
                                           size_t count, float const *schedule, double beta1, double beta2, double clip,
                                           double weight_decay, void *stream);

/** C [m, n] = A [m, k] B^T with A, B BF16 row-major, Float32 accumulation, C BF16 or Float32
 *  (`c_is_f32`), through cuBLASLt. `handle` comes from uform_cuda_gemm_create. */
typedef struct uform_cuda_gemm_t uform_cuda_gemm_t;
uform_status_t uform_cuda_gemm_create(uform_cuda_gemm_t **gemm, size_t workspace_bytes);
/** With tuning on, the first call of each shape outside a graph capture times cuBLASLt's top
 *  `candidates` (1: the default count, 8; at most 64) on its own operands and keeps the fastest
 *  (results then repeat within the process, not necessarily across processes); 0 (the default),
 *  the heuristic's first choice. */
void uform_cuda_gemm_tune(uform_cuda_gemm_t *gemm, int candidates);
/** Describes every cached plan (transposes, m x n x k, cuBLASLt's algorithm, tile, split-K count and
 *  reduction scheme) into `text`; returns how many split K. */
size_t uform_cuda_gemm_describe(uform_cuda_gemm_t const *gemm, char *text, size_t size);
void uform_cuda_gemm_destroy(uform_cuda_gemm_t *gemm);
uform_status_t uform_cuda_gemm_nt(uform_cuda_gemm_t *gemm, uint16_t const *a, uint16_t const *b, void *c, int c_is_f32,
                                  size_t m, size_t n, size_t k, void *stream);

/* --- The loss heads (objectives.cu). What a batch changes (its counts, labels, anchors) and the
 *     trained scalars are read from device memory, so one captured graph serves every batch; the
 *     capacities size the launches and bound the live counts. Float32 throughout (the spectral
 *     terms in Float64); every sum runs in a fixed order: results repeat bitwise. Gradients are
 *     added (+=) into buffers the caller zeroed or accumulates into. */

/** Bytes of scratch uform_cuda_siglip needs. */
size_t uform_cuda_siglip_scratch(size_t anchors_capacity, size_t candidates_capacity, size_t widest, size_t widths_count);
/** Matryoshka SigLIP (SPEC.md section 4), forward and backward. Anchor a is row anchors [a] of
 *  embeddings [*, widest] (Float32, pool.proj's output), candidate c row candidates [c] (NULL lists:
 *  rows a and anchors_capacity + c); counts [2] (device) holds the live anchors N and candidates,
 *  labels [N * candidates] (device, row-major) 1 for a positive pair, weights [N] (device) each anchor's
 *  row scale or NULL for 1 (a mixture source's loss_weight). For each of `widths` (host,
 *  each at most widest): z = exp(*scale) normalize(u [:m]) . normalize(v [:m]) + *bias, the loss
 *  -(1/N) sum weight_a log sigmoid(y z), y = +-1; `loss` [1] gets its mean over widths, d_embeddings (the
 *  same rows; anchor and candidate rows distinct), d_scale [1] and d_bias [1] get its gradients. */
uform_status_t uform_cuda_siglip(float const *embeddings, size_t widest, uint32_t const *anchors,
                                 uint32_t const *candidates, uint32_t const *counts, size_t anchors_capacity,
                                 size_t candidates_capacity, uint8_t const *labels, float const *weights,
                                 size_t const *widths, size_t widths_count, float const *scale, float const *bias, float *loss,
                                 float *d_embeddings, float *d_scale, float *d_bias, void *scratch, void *stream);

/** Bytes of scratch uform_cuda_maxsim needs. */
size_t uform_cuda_maxsim_scratch(size_t anchors_capacity, size_t candidates_capacity);
/** The reranker's ranked sigmoid (SPEC.md sections 3-4), forward and backward, over colbert
 *  [cells, 128] (Float32, normalized rows). spans [segments * 2] holds each segment's first cell
 *  and length (at most 4096); anchors (queries) and candidates (documents) are segments (distinct),
 *  counts [2], labels and weights as uform_cuda_siglip. z = exp(*scale) maxsim(q, d) / |q| + *bias, maxsim
 *  summing over query cells the largest similarity with a document cell; `loss` [1] gets -(1/N)
 *  sum weight_a log sigmoid(y z), d_colbert, d_scale and d_bias its gradients, each query cell's going to
 *  its best document cell (ties: the lowest index) and back. */
uform_status_t uform_cuda_maxsim(float const *colbert, uint32_t const *spans, uint32_t const *anchors,
                                 uint32_t const *candidates, uint32_t const *counts, size_t anchors_capacity,
                                 size_t candidates_capacity, uint8_t const *labels, float const *weights,
                                 float const *scale, float const *bias, float *loss, float *d_colbert, float *d_scale, float *d_bias,
                                 void *scratch, void *stream);
/** normalized [rows, width] = raw / |raw| (zero for a zero row) and inverse_norms [rows] = 1 / |raw|,
 *  for rerank.proj's output. */
uform_status_t uform_cuda_normalize_rows_forward(float const *raw, size_t rows, size_t width, float *normalized,
                                                 float *inverse_norms, void *stream);
/** d_raw [rows, width] = (dn - n (n . dn)) / |raw| from the forward's outputs; d_raw may be d_normalized. */
uform_status_t uform_cuda_normalize_rows_backward(float const *normalized, float const *inverse_norms,
                                                  float const *d_normalized, size_t rows, size_t width, float *d_raw,
                                                  void *stream);

/** Bytes of scratch uform_cuda_spectral needs. */
size_t uform_cuda_spectral_scratch(size_t rows_capacity, size_t width);
/** The opt-in spectral terms (SPEC.md section 4) on Z, the normalized rows of embeddings
 *  [rows_capacity, width] of which *rows (device) are live, in Float64: with lambda > 0, tcr_loss [1]
 *  = -lambda / 2 log det(I + width / (N 0.5) Z^T Z) (Cholesky in one block, of the smaller of the
 *  width x width and N x N Gram forms, at most 6144) and lipschitz_loss [1] = lambda sigma_max(Z^T Z / N)
 *  by `lipschitz_iterations` steps of power iteration from 1 / sqrt(width) (no gradient through
 *  the vector); their gradients are added into d_embeddings. A term that is off gets loss 0. */
uform_status_t uform_cuda_spectral(float const *embeddings, size_t rows_capacity, size_t width, uint32_t const *rows,
                                   double tcr_lambda, double lipschitz_lambda, size_t lipschitz_iterations,
                                   float *tcr_loss, float *lipschitz_loss, float *d_embeddings, void *scratch,
                                   void *stream);
/** The general form: D [m, n] (row-major, leading dimension ldd) = op(A) op(B), plus C (same type
 *  and layout as D) when `c` is not NULL. op(A) is A [m, k] (lda) or, with `transpose_a`, the
 *  transpose of A [k, m]; op(B) is B [k, n] (ldb) or, with `transpose_b`, the transpose of B [n, k]. */
uform_status_t uform_cuda_gemm(uform_cuda_gemm_t *gemm, int transpose_a, int transpose_b, size_t m, size_t n, size_t k,
                               uint16_t const *a, size_t lda, uint16_t const *b, size_t ldb, void const *c, void *d,
                               size_t ldd, int d_is_f32, void *stream);

/** D [m, n] = (A [m, k] W [n, k]^T) scales_a [m] scales_w [n] (+ C), A and W E4M3 codes row-major, each
 *  with a Float32 scale per row (cuBLASLt's outer-vector scaling on sm_90), Float32 accumulation; C
 *  and D Float32 (`d_is_f32`) or BF16, C read when not NULL. With `scalar`, one scale an operand:
 *  scales_a [0] and scales_w [0] (cuBLASLt's per-tensor scaling, more kernels to choose from). */
uform_status_t uform_cuda_gemm_e4m3(uform_cuda_gemm_t *gemm, size_t m, size_t n, size_t k, uint8_t const *a,
                                    float const *scales_a, uint8_t const *w, float const *scales_w, void const *c,
                                    void *d, int d_is_f32, int scalar, void *stream);

/** The same with one scale an operand (device pointers) and D as E4M3 codes: D = E4M3(A W^T * scale_a
 *  * scale_w * inverse_scale_d), saturating at 448 (SwiGLU reads gate_up so, docs/precision.md). */
uform_status_t uform_cuda_gemm_e4m3_codes(uform_cuda_gemm_t *gemm, size_t m, size_t n, size_t k, uint8_t const *a,
                                          float const *scale_a, uint8_t const *w, float const *scale_w,
                                          float const *inverse_scale_d, uint8_t *d, void *stream);

#ifdef __cplusplus
}
#endif
#endif
