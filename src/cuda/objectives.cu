/*  objectives.cu: the loss heads of the training step (SPEC.md sections 3-4): Matryoshka SigLIP,
 *  the ranked sigmoid over MaxSim with the ColBERT row normalization, and the opt-in spectral terms
 *  (TCR, Lipschitz). The batch's counts, siglip.scale and siglip.bias are read from the device, so
 *  one captured graph serves every batch; every output has one owner that sums in a fixed order,
 *  so results repeat bitwise. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned tile = 64, tile_depth = 16, tile_threads = 256, row_threads = 128, finalize_threads = 256;
constexpr unsigned colbert_width = 128, cell_tile = 32, maxsim_threads = 256, longest = 4096, factor_threads = 1024;
constexpr unsigned no_cell = 0xffffffffu;
constexpr uint16_t no_best = 0xffffu;

/* The count behind a device counter (NULL: the capacity), never above the capacity. */
__device__ __forceinline__ size_t live_count(uint32_t const *live, size_t capacity) {
    if (!live) return capacity;
    size_t count = *live;
    return count < capacity ? count : capacity;
}

__device__ __forceinline__ float fused(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fused(double a, double b, double c) { return fma(a, b, c); }

/* A fixed-order tree sum over the block, as uform_block_reduce, in Float64. */
__device__ double block_sum(double value, double *shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    double result = shared[0];
    __syncthreads();
    return result;
}

/* -log sigmoid(y z) and sigmoid(-y z) without overflow, as objectives.c. */
__device__ __forceinline__ float sigmoid_loss(float y, float z, float *sigmoid_negative) {
    float margin = y * z, e = expf(-fabsf(margin));
    *sigmoid_negative = margin > 0 ? e / (1.0f + e) : 1.0f / (1.0f + e);
    return fmaxf(-margin, 0.0f) + log1pf(e);
}

/* --- A tiled product: each of 256 threads owns a 4 x 4 block of a 64 x 64 output tile and sums
 *     over the depth in order, one fused multiply-add per step. */

/* Element (r, k) of an operand is data[r * row_stride + k * depth_stride]. */
template <typename T> struct operand_t {
    T const *data;
    size_t row_stride, depth_stride;
};

/* A tile_depth x tile slab, zero outside the matrix; consecutive threads read consecutive addresses. */
template <typename T>
__device__ __forceinline__ void load_slab(operand_t<T> x, size_t first, size_t limit, size_t k0, size_t depth,
                                          T (*slab)[tile + 1]) {
#pragma unroll
    for (unsigned p = 0; p < tile * tile_depth / tile_threads; ++p) {
        unsigned e = threadIdx.x + p * tile_threads, r, k;
        if (x.depth_stride == 1) r = e / tile_depth, k = e % tile_depth;
        else r = e % tile, k = e / tile;
        size_t row = first + r, position = k0 + k;
        slab[k][r] = row < limit && position < depth ? x.data[row * x.row_stride + position * x.depth_stride] : T(0);
    }
}

/* sums[i][j] = sum over k of a(row0 + ty + 16 i, k) b(column0 + tx + 16 j, k), with tx, ty the thread's
 * column and row in a 16 x 16 grid; padding adds exact zeros. */
template <typename T>
__device__ void tile_product(operand_t<T> a, operand_t<T> b, size_t rows, size_t columns, size_t depth, size_t row0,
                             size_t column0, T (&sums)[4][4], T (*a_slab)[tile + 1], T (*b_slab)[tile + 1]) {
    unsigned tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (unsigned i = 0; i < 4; ++i)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) sums[i][j] = T(0);
    for (size_t k0 = 0; k0 < depth; k0 += tile_depth) {
        load_slab(a, row0, rows, k0, depth, a_slab);
        load_slab(b, column0, columns, k0, depth, b_slab);
        __syncthreads();
#pragma unroll
        for (unsigned k = 0; k < tile_depth; ++k) {
            T av[4], bv[4];
#pragma unroll
            for (unsigned i = 0; i < 4; ++i) av[i] = a_slab[k][ty + 16 * i], bv[i] = b_slab[k][tx + 16 * i];
#pragma unroll
            for (unsigned i = 0; i < 4; ++i)
#pragma unroll
                for (unsigned j = 0; j < 4; ++j) sums[i][j] = fused(av[i], bv[j], sums[i][j]);
        }
        __syncthreads();
    }
}

/* c [rows, columns] (row stride c_stride) = a b^T over depth; each extent may be a live device count. */
template <typename T>
__global__ void __launch_bounds__(tile_threads)
    gemm_kernel(operand_t<T> a, operand_t<T> b, size_t rows, uint32_t const *rows_live, size_t columns,
                uint32_t const *columns_live, size_t depth, uint32_t const *depth_live, T *c, size_t c_stride) {
    __shared__ T a_slab[tile_depth][tile + 1], b_slab[tile_depth][tile + 1];
    rows = live_count(rows_live, rows), columns = live_count(columns_live, columns), depth = live_count(depth_live, depth);
    size_t row0 = (size_t)blockIdx.y * tile, column0 = (size_t)blockIdx.x * tile;
    if (row0 >= rows || column0 >= columns) return;
    T sums[4][4];
    tile_product(a, b, rows, columns, depth, row0, column0, sums, a_slab, b_slab);
#pragma unroll
    for (unsigned i = 0; i < 4; ++i)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
            size_t row = row0 + threadIdx.x / 16 + 16 * i, column = column0 + threadIdx.x % 16 + 16 * j;
            if (row < rows && column < columns) c[row * c_stride + column] = sums[i][j];
        }
}

template <typename T>
cudaError_t gemm(operand_t<T> a, operand_t<T> b, size_t rows, uint32_t const *rows_live, size_t columns,
                 uint32_t const *columns_live, size_t depth, uint32_t const *depth_live, T *c, size_t c_stride,
                 cudaStream_t stream) {
    if (!rows || !columns) return cudaSuccess;
    dim3 grid((unsigned)((columns + tile - 1) / tile), (unsigned)((rows + tile - 1) / tile));
    gemm_kernel<T><<<grid, tile_threads, 0, stream>>>(a, b, rows, rows_live, columns, columns_live, depth, depth_live, c, c_stride);
    return cudaGetLastError();
}

/* --- SigLIP. Anchors and candidates form one stack of rows: anchor a is row a, candidate c row
 *     anchors_capacity + c, in the normalized vectors, their gradients and norms. */

typedef struct {
    uint32_t const *anchors, *candidates;           /* embedding rows, or NULL: the stack row itself */
    uint32_t const *anchors_live, *candidates_live; /* device counts, or NULL: the capacities */
    size_t anchors_capacity, candidates_capacity;
} stack_rows_t;

/* The embedding row behind stack row r, or SIZE_MAX where r is not live. */
__device__ __forceinline__ size_t stack_source(stack_rows_t stack, size_t r) {
    if (r < stack.anchors_capacity) {
        if (r >= live_count(stack.anchors_live, stack.anchors_capacity)) return SIZE_MAX;
        return stack.anchors ? stack.anchors[r] : r;
    }
    size_t c = r - stack.anchors_capacity;
    if (c >= live_count(stack.candidates_live, stack.candidates_capacity)) return SIZE_MAX;
    return stack.candidates ? stack.candidates[c] : r;
}

/* normalized [stack row, width] = e[:width] / |e[:width]| (zero for a zero prefix), norms [stack row]. */
__global__ void __launch_bounds__(row_threads)
    prefix_normalize_kernel(float const *embeddings, size_t widest, stack_rows_t stack, size_t width, float *normalized,
                            float *norms) {
    __shared__ float shared[row_threads];
    size_t r = blockIdx.x, source = stack_source(stack, r);
    if (source == SIZE_MAX) return;
    float const *e = embeddings + source * widest;
    float squares = 0;
    for (size_t k = threadIdx.x; k < width; k += row_threads) squares = fmaf(e[k], e[k], squares);
    float norm = sqrtf(uform_block_reduce(squares, shared, 0));
    for (size_t k = threadIdx.x; k < width; k += row_threads) normalized[r * width + k] = norm > 0 ? e[k] / norm : 0.0f;
    if (threadIdx.x == 0) norms[r] = norm;
}

/* d_embeddings [source, :width] += (du - u (u . du)) / norm; a zero prefix passes nothing back. */
__global__ void __launch_bounds__(row_threads)
    prefix_normalize_backward_kernel(float const *normalized, float const *norms, float const *d_normalized,
                                     stack_rows_t stack, size_t width, size_t widest, float *d_embeddings, int plant) {
    __shared__ float shared[row_threads];
    size_t r = blockIdx.x, source = stack_source(stack, r);
    if (source == SIZE_MAX) return;
    float norm = norms[r];
    if (!(norm > 0)) return;
    float const *u = normalized + r * width, *du = d_normalized + r * width;
    float dot = 0;
    for (size_t k = threadIdx.x; k < width; k += row_threads) dot = fmaf(u[k], du[k], dot);
    dot = uform_block_reduce(dot, shared, 0);
    if (UFORM_PLANTED(2)) dot = 0; /* planted: the projection term of the normalization dropped */
    float *target = d_embeddings + source * widest;
    for (size_t k = threadIdx.x; k < width; k += row_threads) target[k] += fmaf(-u[k], dot, du[k]) / norm;
}

/* One 64 x 64 tile of z = exp(scale) u . v + bias: the loss terms, the gradient by z times exp(scale)
 * into `weighted` [anchors_capacity, candidates_capacity], and the tile's sums of loss, d_scale and
 * d_bias into partials [tile, 3]. The 1 / (N widths) of the mean is applied per element. */
__global__ void __launch_bounds__(tile_threads)
    siglip_logits_kernel(float const *normalized, size_t width, stack_rows_t stack, uint8_t const *labels,
                         float const *weights, float const *scale, float const *bias, size_t widths_count, float *weighted, float *partials,
                         int plant) {
    __shared__ float a_slab[tile_depth][tile + 1], b_slab[tile_depth][tile + 1], shared[tile_threads];
    size_t anchors = live_count(stack.anchors_live, stack.anchors_capacity);
    size_t candidates = live_count(stack.candidates_live, stack.candidates_capacity);
    size_t row0 = (size_t)blockIdx.y * tile, column0 = (size_t)blockIdx.x * tile;
    float *partial = partials + 3 * ((size_t)blockIdx.y * gridDim.x + blockIdx.x);
    if (row0 >= anchors || column0 >= candidates) {
        if (threadIdx.x < 3) partial[threadIdx.x] = 0;
        return;
    }
    operand_t<float> a = {normalized, width, 1}, b = {normalized + stack.anchors_capacity * width, width, 1};
    float dots[4][4];
    tile_product(a, b, anchors, candidates, width, row0, column0, dots, a_slab, b_slab);
    float s = expf(*scale), shift = *bias, inverse = 1.0f / (float)(anchors * widths_count);
    float loss = 0, d_scale = 0, d_bias = 0;
#pragma unroll
    for (unsigned i = 0; i < 4; ++i)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
            size_t row = row0 + threadIdx.x / 16 + 16 * i, column = column0 + threadIdx.x % 16 + 16 * j;
            if (row >= anchors || column >= candidates) continue;
            float y = labels[row * candidates + column] ? 1.0f : -1.0f, sigmoid;
            if (UFORM_PLANTED(1)) y = -y; /* planted: the label's sign flipped */
            float dot = dots[i][j], weight = weights && !UFORM_PLANTED(4) ? weights[row] : 1.0f; /* planted 4: weights ignored */
            loss = fmaf(weight, sigmoid_loss(y, fmaf(s, dot, shift), &sigmoid), loss);
            float g = (y > 0 ? -sigmoid : sigmoid) * inverse * weight, g_scaled = g * s;
            weighted[row * stack.candidates_capacity + column] = g_scaled;
            d_scale = fmaf(g_scaled, dot, d_scale);
            d_bias += g;
        }
    loss = uform_block_reduce(loss, shared, 0);
    d_scale = uform_block_reduce(d_scale, shared, 0);
    d_bias = uform_block_reduce(d_bias, shared, 0);
    if (threadIdx.x == 0) partial[0] = loss, partial[1] = d_scale, partial[2] = d_bias;
}

/* loss = sum of partials' losses / (N divisor); d_scale, d_bias += their sums, in a fixed order. */
__global__ void __launch_bounds__(finalize_threads)
    loss_finalize_kernel(float const *partials, size_t count, uint32_t const *anchors_live, size_t anchors_capacity,
                         size_t divisor, float *loss, float *d_scale, float *d_bias) {
    __shared__ float shared[finalize_threads];
    float sums[3] = {0, 0, 0};
    for (size_t p = threadIdx.x; p < count; p += finalize_threads)
        for (unsigned q = 0; q < 3; ++q) sums[q] += partials[3 * p + q];
    for (unsigned q = 0; q < 3; ++q) sums[q] = uform_block_reduce(sums[q], shared, 0);
    if (threadIdx.x == 0) {
        size_t anchors = live_count(anchors_live, anchors_capacity);
        loss[0] = anchors ? sums[0] / (float)(anchors * divisor) : 0.0f;
        d_scale[0] += sums[1];
        d_bias[0] += sums[2];
    }
}

/* --- MaxSim. One block scores a (query, document) pair on 32-cell tiles of both; each query cell's
 *     best document cell is kept in shared memory for the gradient that follows. */

struct maxsim_shared_t {
    float query[cell_tile][colbert_width + 1], document[cell_tile][colbert_width + 1], row_best[cell_tile];
    uint16_t best[longest]; /* per query cell: the best document cell, or no_best */
};

/* Fills shared.best for the pair and returns maxsim (in thread 0): 8 lanes per query cell scan every
 * 8th document cell, then the lanes agree on the largest similarity, ties to the lowest index. */
__device__ float pair_maxsim(float const *colbert, size_t query_first, size_t query_length, size_t document_first,
                             size_t document_length, maxsim_shared_t &shared, int plant) {
    unsigned t = threadIdx.x, row = t / 8, lane = t % 8;
    float total = 0;
    for (size_t q0 = 0; q0 < query_length; q0 += cell_tile) {
        for (unsigned p = 0; p < cell_tile * colbert_width / maxsim_threads; ++p) {
            unsigned e = t + p * maxsim_threads, r = e / colbert_width, k = e % colbert_width;
            shared.query[r][k] = q0 + r < query_length ? colbert[(query_first + q0 + r) * colbert_width + k] : 0.0f;
        }
        float best_value = -INFINITY;
        unsigned best_index = no_cell;
        for (size_t d0 = 0; d0 < document_length; d0 += cell_tile) {
            __syncthreads();
            for (unsigned p = 0; p < cell_tile * colbert_width / maxsim_threads; ++p) {
                unsigned e = t + p * maxsim_threads, r = e / colbert_width, k = e % colbert_width;
                shared.document[r][k] = d0 + r < document_length ? colbert[(document_first + d0 + r) * colbert_width + k] : 0.0f;
            }
            __syncthreads();
            float dots[4] = {0, 0, 0, 0};
            for (unsigned k = 0; k < colbert_width; ++k) {
                float q = shared.query[row][k];
#pragma unroll
                for (unsigned c = 0; c < 4; ++c) dots[c] = fmaf(q, shared.document[lane + 8 * c][k], dots[c]);
            }
#pragma unroll
            for (unsigned c = 0; c < 4; ++c) { /* this lane's cells come in increasing order: strict > keeps the first */
                size_t j = d0 + lane + 8 * c;
                bool better = dots[c] > best_value || (UFORM_PLANTED(1) && dots[c] == best_value); /* planted 1: ties to the later cell */
                if (j < document_length && better) best_value = dots[c], best_index = (unsigned)j;
            }
        }
        for (unsigned offset = 4; offset > 0; offset /= 2) { /* a total order, so every lane ends with the same cell */
            float other_value = __shfl_xor_sync(0xffffffffu, best_value, offset);
            unsigned other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
            bool first = UFORM_PLANTED(1) ? other_index > best_index && other_index != no_cell : other_index < best_index;
            if (other_value > best_value || (other_value == best_value && first)) best_value = other_value, best_index = other_index;
        }
        if (lane == 0 && q0 + row < query_length) {
            shared.best[q0 + row] = best_index == no_cell ? no_best : (uint16_t)best_index;
            shared.row_best[row] = best_index == no_cell ? 0.0f : best_value;
        }
        __syncthreads();
        if (t == 0)
            for (unsigned r = 0; r < cell_tile && q0 + r < query_length; ++r) total += shared.row_best[r];
        __syncthreads();
    }
    return total;
}

typedef struct {
    uint32_t const *anchors, *candidates;           /* segments */
    uint32_t const *anchors_live, *candidates_live; /* device counts, or NULL: the capacities */
    size_t anchors_capacity, candidates_capacity;
} pair_lists_t;

__device__ __forceinline__ void segment_span(uint32_t const *spans, uint32_t segment, size_t *first, size_t *length) {
    *first = spans[2 * (size_t)segment];
    size_t cells = spans[2 * (size_t)segment + 1];
    *length = cells < longest ? cells : longest;
}

/* One block per anchor walks the candidates in order: each pair's loss term, its gradient step
 * (into coefficients [anchor, candidate]) and the query cells' gradient; partials [anchor, 3]. */
__global__ void __launch_bounds__(maxsim_threads)
    maxsim_query_kernel(float const *colbert, uint32_t const *spans, pair_lists_t pairs, uint8_t const *labels,
                        float const *weights, float const *scale, float const *bias, float *coefficients, float *partials, float *d_colbert,
                        int plant) {
    __shared__ maxsim_shared_t shared;
    __shared__ float coefficient;
    size_t anchors = live_count(pairs.anchors_live, pairs.anchors_capacity);
    size_t candidates = live_count(pairs.candidates_live, pairs.candidates_capacity), a = blockIdx.x;
    unsigned t = threadIdx.x;
    if (a >= anchors) {
        if (t < 3) partials[3 * a + t] = 0;
        return;
    }
    size_t query_first, query_length;
    segment_span(spans, pairs.anchors[a], &query_first, &query_length);
    float s = expf(*scale), shift = *bias, weight = weights && !UFORM_PLANTED(4) ? weights[a] : 1.0f; /* planted 4: weights ignored */
    float inverse = weight / (float)anchors, loss = 0, d_scale = 0, d_bias = 0;
    for (size_t c = 0; c < candidates; ++c) {
        size_t document_first, document_length;
        segment_span(spans, pairs.candidates[c], &document_first, &document_length);
        float total = pair_maxsim(colbert, query_first, query_length, document_first, document_length, shared, plant);
        if (t == 0) {
            float mean = query_length ? total / (float)query_length : 0.0f, sigmoid;
            float y = labels[a * candidates + c] ? 1.0f : -1.0f;
            loss = fmaf(weight, sigmoid_loss(y, fmaf(s, mean, shift), &sigmoid), loss);
            float g = (y > 0 ? -sigmoid : sigmoid) * inverse, g_scaled = g * s;
            float step = query_length ? g_scaled / (float)query_length : 0.0f;
            d_scale = fmaf(g_scaled, mean, d_scale);
            d_bias += g;
            coefficients[a * pairs.candidates_capacity + c] = step;
            coefficient = step;
        }
        __syncthreads();
        float step = coefficient;
        unsigned k = t % colbert_width;
        for (size_t i = t / colbert_width; i < query_length; i += maxsim_threads / colbert_width) {
            uint16_t j = shared.best[i];
            if (j == no_best) continue;
            float *target = d_colbert + (query_first + i) * colbert_width + k;
            *target = fmaf(step, colbert[(document_first + j) * colbert_width + k], *target);
        }
        __syncthreads();
    }
    if (t == 0) partials[3 * a] = loss, partials[3 * a + 1] = d_scale, partials[3 * a + 2] = d_bias;
}

/* One block per candidate walks the anchors in order, finds the same best cells again and adds each
 * query cell, times the pair's step, into its best document cell; thread k owns column k. */
__global__ void __launch_bounds__(maxsim_threads)
    maxsim_document_kernel(float const *colbert, uint32_t const *spans, pair_lists_t pairs, float const *coefficients,
                           float *d_colbert, int plant) {
    __shared__ maxsim_shared_t shared;
    size_t anchors = live_count(pairs.anchors_live, pairs.anchors_capacity);
    size_t candidates = live_count(pairs.candidates_live, pairs.candidates_capacity), c = blockIdx.x;
    unsigned t = threadIdx.x;
    if (c >= candidates) return;
    size_t document_first, document_length;
    segment_span(spans, pairs.candidates[c], &document_first, &document_length);
    for (size_t a = 0; a < anchors; ++a) {
        size_t query_first, query_length;
        segment_span(spans, pairs.anchors[a], &query_first, &query_length);
        pair_maxsim(colbert, query_first, query_length, document_first, document_length, shared, plant);
        float step = coefficients[a * pairs.candidates_capacity + c];
        if (t < colbert_width)
            for (size_t i = 0; i < query_length; ++i) {
                uint16_t j = shared.best[i];
                if (j == no_best) continue;
                float *target = d_colbert + (document_first + j) * colbert_width + t;
                *target = fmaf(step, colbert[(query_first + i) * colbert_width + t], *target);
            }
        __syncthreads();
    }
}

/* One warp per row: normalized = raw / |raw| and the inverse norm (zero for a zero row). */
__global__ void normalize_rows_forward_kernel(float const *raw, size_t rows, size_t width, float *normalized,
                                              float *inverse_norms) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    unsigned lane = threadIdx.x % 32;
    if (row >= rows) return;
    float const *x = raw + row * width;
    float squares = 0;
    for (size_t k = lane; k < width; k += 32) squares = fmaf(x[k], x[k], squares);
    for (unsigned offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    float inverse = squares > 0 ? 1.0f / sqrtf(squares) : 0.0f;
    for (size_t k = lane; k < width; k += 32) normalized[row * width + k] = x[k] * inverse;
    if (lane == 0) inverse_norms[row] = inverse;
}

/* d_raw = (dc - c (c . dc)) * inverse norm; each lane rewrites only what it read, so in place works. */
__global__ void normalize_rows_backward_kernel(float const *normalized, float const *inverse_norms,
                                               float const *d_normalized, size_t rows, size_t width, float *d_raw,
                                               int plant) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    unsigned lane = threadIdx.x % 32;
    if (row >= rows) return;
    float const *c = normalized + row * width, *dc = d_normalized + row * width;
    float dot = 0;
    for (size_t k = lane; k < width; k += 32) dot = fmaf(c[k], dc[k], dot);
    for (unsigned offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (UFORM_PLANTED(1)) dot = 0; /* planted: the projection term dropped */
    float inverse = inverse_norms[row];
    for (size_t k = lane; k < width; k += 32) d_raw[row * width + k] = fmaf(-c[k], dot, dc[k]) * inverse;
}

/* --- Spectral terms, in Float64 throughout: Z [rows, width] holds the normalized rows. */

__global__ void __launch_bounds__(row_threads)
    spectral_normalize_kernel(float const *embeddings, size_t width, uint32_t const *rows_live, size_t rows_capacity,
                              double *z, double *norms) {
    __shared__ double shared[row_threads];
    size_t s = blockIdx.x;
    if (s >= live_count(rows_live, rows_capacity)) return;
    float const *e = embeddings + s * width;
    double squares = 0;
    for (size_t k = threadIdx.x; k < width; k += row_threads) squares = fma((double)e[k], (double)e[k], squares);
    double norm = sqrt(block_sum(squares, shared));
    for (size_t k = threadIdx.x; k < width; k += row_threads) z[s * width + k] = norm > 0 ? e[k] / norm : 0.0;
    if (threadIdx.x == 0) norms[s] = norm;
}

/* Power iteration on Z^T Z / N without forming it (p = Z^T (Z v) / N), from v = 1 / sqrt(width) as
 * objectives.c; then sigma = |Z v|^2 / N, the loss lambda sigma, projections [s] = z_s . v and the
 * gradient's coefficient 2 lambda / N into coefficients [1]. One block. */
__global__ void __launch_bounds__(factor_threads)
    lipschitz_kernel(double const *z, size_t rows_capacity, uint32_t const *rows_live, size_t width, size_t iterations,
                     double lambda, double *vector, double *product, double *projections, float *loss,
                     double *coefficients, int plant) {
    __shared__ double shared[factor_threads];
    size_t rows = live_count(rows_live, rows_capacity);
    unsigned t = threadIdx.x;
    double inverse_rows = rows ? 1.0 / (double)rows : 0.0;
    for (size_t i = t; i < width; i += factor_threads) vector[i] = 1.0 / sqrt((double)width);
    __syncthreads();
    for (size_t step = 0; step <= iterations; ++step) {
        double squares = 0;
        for (size_t s = t; s < rows; s += factor_threads) {
            double sum = 0;
            for (size_t i = 0; i < width; ++i) sum = fma(z[s * width + i], vector[i], sum);
            projections[s] = sum;
            squares = fma(sum, sum, squares);
        }
        squares = block_sum(squares, shared); /* its syncs also publish the projections */
        if (step == iterations) {
            if (t == 0) {
                loss[0] = (float)(lambda * squares * inverse_rows);
                coefficients[1] = (UFORM_PLANTED(2) ? 1.0 : 2.0) * lambda * inverse_rows; /* planted 2: the factor 2 dropped */
            }
            return;
        }
        squares = 0;
        for (size_t i = t; i < width; i += factor_threads) {
            double sum = 0;
            for (size_t s = 0; s < rows; ++s) sum = fma(z[s * width + i], projections[s], sum);
            product[i] = sum * inverse_rows;
            squares = fma(product[i], product[i], squares);
        }
        double norm = sqrt(block_sum(squares, shared));
        for (size_t i = t; i < width; i += factor_threads) vector[i] = norm > 0 ? product[i] / norm : 0.0;
        __syncthreads();
    }
}

/* One block: M = I + alpha Gram (alpha = width / (N eps^2), eps^2 = 0.5) over the live dimension,
 * its Cholesky factor L (right-looking, in place), log det M = 2 sum log L_jj into the loss
 * -lambda / 2 log det, then X = L^-1 in place row by row (the strict upper triangle zero), and the
 * gradient's coefficient -lambda alpha into coefficients [0]. `row` holds `capacity` doubles. */
__global__ void __launch_bounds__(factor_threads)
    tcr_factor_kernel(double *matrix, size_t capacity, uint32_t const *dimension_live, uint32_t const *rows_live,
                      size_t rows_capacity, size_t width, double lambda, float *loss, double *coefficients, int plant) {
    extern __shared__ double row[];
    size_t dimension = live_count(dimension_live, capacity), rows = live_count(rows_live, rows_capacity);
    unsigned t = threadIdx.x, warps = factor_threads / 32;
    double epsilon_squared = UFORM_PLANTED(1) ? 1.0 : 0.5; /* planted 1: the 1 / eps^2 dropped */
    double alpha = rows ? (double)width / ((double)rows * epsilon_squared) : 0.0;
    for (size_t e = t; e < dimension * dimension; e += factor_threads) {
        size_t i = e / dimension, j = e % dimension;
        double *m = matrix + i * capacity + j;
        *m = j > i ? 0.0 : fma(alpha, *m, i == j ? 1.0 : 0.0);
    }
    __syncthreads();
    double log_determinant = 0; /* half of it, in thread 0 */
    for (size_t j = 0; j < dimension; ++j) {
        if (t == 0) {
            double pivot = sqrt(matrix[j * capacity + j]);
            matrix[j * capacity + j] = pivot;
            log_determinant += log(pivot);
        }
        __syncthreads();
        double pivot = matrix[j * capacity + j];
        for (size_t i = j + 1 + t; i < dimension; i += factor_threads) {
            double value = matrix[i * capacity + j] / pivot;
            matrix[i * capacity + j] = value;
            row[i] = value;
        }
        __syncthreads();
        for (size_t i = j + 1 + t / 32; i < dimension; i += warps) { /* one warp per trailing row */
            double factor = row[i];
            for (size_t k = j + 1 + t % 32; k <= i; k += 32) matrix[i * capacity + k] = fma(-factor, row[k], matrix[i * capacity + k]);
        }
        __syncthreads();
    }
    for (size_t i = 0; i < dimension; ++i) { /* X_ij = -sum_{j<=k<i} L_ik X_kj / L_ii, rows of X above i done */
        for (size_t k = t; k <= i; k += factor_threads) row[k] = matrix[i * capacity + k];
        __syncthreads();
        for (size_t j = t; j < i; j += factor_threads) {
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0; /* four chains, combined in a fixed order */
            size_t k = j;
            for (; k + 4 <= i; k += 4) {
                s0 = fma(row[k], matrix[k * capacity + j], s0);
                s1 = fma(row[k + 1], matrix[(k + 1) * capacity + j], s1);
                s2 = fma(row[k + 2], matrix[(k + 2) * capacity + j], s2);
                s3 = fma(row[k + 3], matrix[(k + 3) * capacity + j], s3);
            }
            for (; k < i; ++k) s0 = fma(row[k], matrix[k * capacity + j], s0);
            matrix[i * capacity + j] = -((s0 + s1) + (s2 + s3)) / row[i];
        }
        if (t == 0) matrix[i * capacity + i] = 1.0 / row[i];
        __syncthreads();
    }
    if (t == 0) {
        loss[0] = (float)(-lambda * log_determinant);
        coefficients[0] = -lambda * alpha;
    }
}

/* d_embeddings [s] += the normalization's backward of dz_s = c0 P_s + c1 (z_s . v) v, Float64 until
 * the store. */
__device__ __forceinline__ double spectral_gradient(double const *tcr_product, double tcr, double const *vector,
                                                    double lipschitz, size_t s, size_t width, size_t k) {
    double value = tcr_product ? tcr * tcr_product[s * width + k] : 0.0;
    return vector ? fma(lipschitz, vector[k], value) : value;
}

__global__ void __launch_bounds__(row_threads)
    spectral_backward_kernel(double const *z, double const *norms, double const *tcr_product, double const *vector,
                             double const *projections, double const *coefficients, uint32_t const *rows_live,
                             size_t rows_capacity, size_t width, float *d_embeddings) {
    __shared__ double shared[row_threads];
    size_t s = blockIdx.x;
    if (s >= live_count(rows_live, rows_capacity)) return;
    double norm = norms[s];
    if (!(norm > 0)) return;
    double tcr = tcr_product ? coefficients[0] : 0.0, lipschitz = vector ? coefficients[1] * projections[s] : 0.0;
    double dot = 0;
    for (size_t k = threadIdx.x; k < width; k += row_threads)
        dot = fma(z[s * width + k], spectral_gradient(tcr_product, tcr, vector, lipschitz, s, width, k), dot);
    dot = block_sum(dot, shared);
    for (size_t k = threadIdx.x; k < width; k += row_threads) {
        double du = spectral_gradient(tcr_product, tcr, vector, lipschitz, s, width, k);
        d_embeddings[s * width + k] += (float)(fma(-z[s * width + k], dot, du) / norm);
    }
}

size_t tiles_of(size_t anchors_capacity, size_t candidates_capacity) {
    return ((anchors_capacity + tile - 1) / tile) * ((candidates_capacity + tile - 1) / tile);
}

} // namespace

extern "C" size_t uform_cuda_siglip_scratch(size_t anchors_capacity, size_t candidates_capacity, size_t widest,
                                            size_t widths_count) {
    size_t stack = anchors_capacity + candidates_capacity;
    return sizeof(float) * (2 * stack * widest + stack + anchors_capacity * candidates_capacity +
                            3 * widths_count * tiles_of(anchors_capacity, candidates_capacity));
}

/* A failed launch or copy of `entry`, noted as a status (the kernels' internal products return cudaError_t). */
static uform_status_t failed(cudaError_t code, char const *entry) { return uform_cuda_check(code, entry, "launch"); }

extern "C" uform_status_t uform_cuda_siglip(float const *embeddings, size_t widest, uint32_t const *anchors,
                                            uint32_t const *candidates, uint32_t const *counts, size_t anchors_capacity,
                                            size_t candidates_capacity, uint8_t const *labels, float const *weights,
                                            size_t const *widths, size_t widths_count, float const *scale,
                                            float const *bias, float *loss,
                                            float *d_embeddings, float *d_scale, float *d_bias, void *scratch,
                                            void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    for (size_t w = 0; w < widths_count; ++w)
        if (!widths[w] || widths[w] > widest)
            return uform_cuda_note(uform_invalid_argument_k, "siglip: Matryoshka width %zu is not 1..%zu", widths[w], widest);
    if (!anchors_capacity || !candidates_capacity || !widths_count)
        return uform_cuda_check(cudaMemsetAsync(loss, 0, sizeof(float), s), "siglip", "cudaMemsetAsync");
    int plant = uform_cuda_planted("siglip");
    /* planted 3: the live counts ignored, the capacities scored */
    stack_rows_t stack = {anchors, candidates, UFORM_PLANTED(3) ? NULL : counts, UFORM_PLANTED(3) ? NULL : counts + 1,
                          anchors_capacity, candidates_capacity};
    size_t rows = anchors_capacity + candidates_capacity, tiles = tiles_of(anchors_capacity, candidates_capacity);
    float *normalized = (float *)scratch, *d_normalized = normalized + rows * widest, *norms = d_normalized + rows * widest;
    float *weighted = norms + rows, *partials = weighted + anchors_capacity * candidates_capacity;
    dim3 logits_grid((unsigned)((candidates_capacity + tile - 1) / tile), (unsigned)((anchors_capacity + tile - 1) / tile));
    cudaError_t status;
    for (size_t w = 0; w < widths_count; ++w) {
        size_t width = widths[w];
        float *v = normalized + anchors_capacity * width, *dv = d_normalized + anchors_capacity * width;
        prefix_normalize_kernel<<<(unsigned)rows, row_threads, 0, s>>>(embeddings, widest, stack, width, normalized, norms);
        if ((status = cudaGetLastError())) return failed(status, "siglip");
        siglip_logits_kernel<<<logits_grid, tile_threads, 0, s>>>(normalized, width, stack, labels, weights, scale, bias, widths_count,
                                                                   weighted, partials + 3 * w * tiles, plant);
        if ((status = cudaGetLastError())) return failed(status, "siglip");
        /* dU = weighted V over the live candidates, dV = weighted^T U over the live anchors. */
        operand_t<float> weighted_rows = {weighted, candidates_capacity, 1}, weighted_columns = {weighted, 1, candidates_capacity};
        operand_t<float> v_columns = {v, 1, width}, u_columns = {normalized, 1, width};
        if ((status = gemm(weighted_rows, v_columns, anchors_capacity, stack.anchors_live, width, NULL,
                           candidates_capacity, stack.candidates_live, d_normalized, width, s)))
            return failed(status, "siglip");
        if ((status = gemm(weighted_columns, u_columns, candidates_capacity, stack.candidates_live, width,
                           NULL, anchors_capacity, stack.anchors_live, dv, width, s)))
            return failed(status, "siglip");
        prefix_normalize_backward_kernel<<<(unsigned)rows, row_threads, 0, s>>>(normalized, norms, d_normalized, stack, width,
                                                                               widest, d_embeddings, plant);
        if ((status = cudaGetLastError())) return failed(status, "siglip");
    }
    loss_finalize_kernel<<<1, finalize_threads, 0, s>>>(partials, widths_count * tiles, stack.anchors_live, anchors_capacity,
                                                        widths_count, loss, d_scale, d_bias);
    return uform_cuda_launched("siglip");
}

extern "C" size_t uform_cuda_maxsim_scratch(size_t anchors_capacity, size_t candidates_capacity) {
    return sizeof(float) * anchors_capacity * (candidates_capacity + 3);
}

extern "C" uform_status_t uform_cuda_maxsim(float const *colbert, uint32_t const *spans, uint32_t const *anchors,
                                            uint32_t const *candidates, uint32_t const *counts, size_t anchors_capacity,
                                            size_t candidates_capacity, uint8_t const *labels, float const *weights,
                                            float const *scale, float const *bias, float *loss, float *d_colbert, float *d_scale,
                                            float *d_bias, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (!anchors_capacity || !candidates_capacity)
        return uform_cuda_check(cudaMemsetAsync(loss, 0, sizeof(float), s), "maxsim", "cudaMemsetAsync");
    int plant = uform_cuda_planted("maxsim");
    pair_lists_t pairs = {anchors, candidates, counts, counts + 1, anchors_capacity, candidates_capacity};
    float *coefficients = (float *)scratch, *partials = coefficients + anchors_capacity * candidates_capacity;
    maxsim_query_kernel<<<(unsigned)anchors_capacity, maxsim_threads, 0, s>>>(colbert, spans, pairs, labels, weights, scale, bias,
                                                                            coefficients, partials, d_colbert, plant);
    cudaError_t status = cudaGetLastError();
    if (status) return failed(status, "maxsim");
    maxsim_document_kernel<<<(unsigned)candidates_capacity, maxsim_threads, 0, s>>>(colbert, spans, pairs, coefficients,
                                                                                  d_colbert, plant);
    if ((status = cudaGetLastError())) return failed(status, "maxsim");
    loss_finalize_kernel<<<1, finalize_threads, 0, s>>>(partials, anchors_capacity, counts, anchors_capacity, 1, loss,
                                                        d_scale, d_bias);
    return uform_cuda_launched("maxsim");
}

extern "C" uform_status_t uform_cuda_normalize_rows_forward(float const *raw, size_t rows, size_t width,
                                                            float *normalized, float *inverse_norms, void *stream) {
    if (!rows) return uform_ok_k;
    normalize_rows_forward_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, (cudaStream_t)stream>>>(raw, rows, width, normalized,
                                                                                             inverse_norms);
    return uform_cuda_launched("normalize_rows_forward");
}

extern "C" uform_status_t uform_cuda_normalize_rows_backward(float const *normalized, float const *inverse_norms,
                                                             float const *d_normalized, size_t rows, size_t width,
                                                             float *d_raw, void *stream) {
    if (!rows) return uform_ok_k;
    normalize_rows_backward_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, (cudaStream_t)stream>>>(
        normalized, inverse_norms, d_normalized, rows, width, d_raw, uform_cuda_planted("normalize_rows_backward"));
    return uform_cuda_launched("normalize_rows_backward");
}

extern "C" size_t uform_cuda_spectral_scratch(size_t rows_capacity, size_t width) {
    size_t dimension = rows_capacity < width ? rows_capacity : width;
    return sizeof(double) * (2 * rows_capacity * width + 2 * rows_capacity + 2 * dimension * dimension + 2 * width + 2);
}

extern "C" uform_status_t uform_cuda_spectral(float const *embeddings, size_t rows_capacity, size_t width,
                                              uint32_t const *rows, double tcr_lambda, double lipschitz_lambda,
                                              size_t lipschitz_iterations, float *tcr_loss, float *lipschitz_loss,
                                              float *d_embeddings, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int empty = !rows_capacity || !width, tcr = tcr_lambda > 0 && !empty, lipschitz = lipschitz_lambda > 0 && !empty;
    cudaError_t status;
    if (!tcr && (status = cudaMemsetAsync(tcr_loss, 0, sizeof(float), s)))
        return uform_cuda_check(status, "spectral", "cudaMemsetAsync");
    if (!lipschitz && (status = cudaMemsetAsync(lipschitz_loss, 0, sizeof(float), s)))
        return uform_cuda_check(status, "spectral", "cudaMemsetAsync");
    if (!tcr && !lipschitz) return uform_ok_k;
    /* The smaller Gram form: log det(I + a Z^T Z) = log det(I + a Z Z^T), Z (I + a Z^T Z)^-1 = (I + a Z Z^T)^-1 Z. */
    int by_rows = rows_capacity < width;
    size_t dimension = by_rows ? rows_capacity : width;
    if (tcr && dimension * sizeof(double) > 48 * 1024)
        return uform_cuda_note(uform_invalid_argument_k, "spectral: TCR's %zu x %zu Gram form exceeds 6144 rows", dimension,
                               dimension);
    int plant = uform_cuda_planted("spectral");
    double *z = (double *)scratch, *tcr_product = z + rows_capacity * width, *norms = tcr_product + rows_capacity * width;
    double *projections = norms + rows_capacity, *matrix = projections + rows_capacity, *inverse = matrix + dimension * dimension;
    double *vector = inverse + dimension * dimension, *product = vector + width, *coefficients = product + width;
    spectral_normalize_kernel<<<(unsigned)rows_capacity, row_threads, 0, s>>>(embeddings, width, rows, rows_capacity, z, norms);
    if ((status = cudaGetLastError())) return failed(status, "spectral");
    if (lipschitz) {
        lipschitz_kernel<<<1, factor_threads, 0, s>>>(z, rows_capacity, rows, width, lipschitz_iterations, lipschitz_lambda,
                                                      vector, product, projections, lipschitz_loss, coefficients, plant);
        if ((status = cudaGetLastError())) return failed(status, "spectral");
    }
    if (tcr) {
        operand_t<double> z_rows = {z, width, 1}, z_columns = {z, 1, width}, x_columns = {matrix, 1, dimension};
        uint32_t const *dimension_live = by_rows ? rows : NULL;
        if (by_rows) status = gemm(z_rows, z_rows, rows_capacity, rows, rows_capacity, rows, width, NULL, matrix, dimension, s);
        else status = gemm(z_columns, z_columns, width, NULL, width, NULL, rows_capacity, rows, matrix, dimension, s);
        if (status) return failed(status, "spectral");
        tcr_factor_kernel<<<1, factor_threads, dimension * sizeof(double), s>>>(matrix, dimension, dimension_live, rows,
                                                                                rows_capacity, width, tcr_lambda, tcr_loss,
                                                                                coefficients, plant);
        if ((status = cudaGetLastError())) return failed(status, "spectral");
        /* The inverse X^T X, then the gradient's product with Z on the side the form needs. */
        if ((status = gemm(x_columns, x_columns, dimension, dimension_live, dimension, dimension_live, dimension, dimension_live,
                           inverse, dimension, s)))
            return failed(status, "spectral");
        operand_t<double> inverse_rows = {inverse, dimension, 1}, inverse_columns = {inverse, 1, dimension};
        if (by_rows) status = gemm(inverse_rows, z_columns, rows_capacity, rows, width, NULL, rows_capacity, rows, tcr_product, width, s);
        else status = gemm(z_rows, inverse_columns, rows_capacity, rows, width, NULL, width, NULL, tcr_product, width, s);
        if (status) return failed(status, "spectral");
    }
    spectral_backward_kernel<<<(unsigned)rows_capacity, row_threads, 0, s>>>(z, norms, tcr ? tcr_product : NULL,
                                                                           lipschitz ? vector : NULL, projections,
                                                                           coefficients, rows, rows_capacity, width,
                                                                           d_embeddings);
    return uform_cuda_launched("spectral");
}
