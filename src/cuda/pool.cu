/*  pool.cu: the attention pool (SPEC.md section 3), one block per (segment, head): scores and
 *  weights in Float32 with fixed-order block reductions, pooled rows stored BF16 for pool.proj,
 *  and a backward whose every output has one owner, so results repeat bitwise. A span of length 0
 *  (a segment slot the batch leaves empty) reads no cell: its pooled row and query partials are 0. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned threads = 128, head_width = 64;

__global__ void pool_forward_kernel(uint16_t const *hidden, float const *query, uint32_t const *spans, size_t width,
                                    uint16_t *pooled, float *weights, int plant) {
    __shared__ float shared[threads];
    size_t heads = width / head_width, segment = blockIdx.x / heads, head = blockIdx.x % heads;
    size_t first = spans[2 * segment], length = spans[2 * segment + 1];
    if (UFORM_PLANTED(1)) length += 1; /* planted: the pool runs one cell past its segment */
    float const *q = query + head * head_width;
    float largest = -INFINITY;
    for (size_t t = threadIdx.x; t < length; t += threads) {
        uint16_t const *h = hidden + (first + t) * width + head * head_width;
        float score = 0;
        for (unsigned d = 0; d < head_width; ++d) score += q[d] * uform_bf16_to_f32(h[d]);
        score *= 0.125f;
        weights[(first + t) * heads + head] = score;
        largest = fmaxf(largest, score);
    }
    largest = uform_block_reduce(largest, shared, 1);
    float sum = 0;
    for (size_t t = threadIdx.x; t < length; t += threads) {
        float e = expf(weights[(first + t) * heads + head] - largest);
        weights[(first + t) * heads + head] = e;
        sum += e;
    }
    sum = uform_block_reduce(sum, shared, 0);
    for (size_t t = threadIdx.x; t < length; t += threads) weights[(first + t) * heads + head] /= sum;
    __syncthreads();
    if (threadIdx.x < head_width) {
        float total = 0;
        for (size_t t = 0; t < length; ++t)
            total += weights[(first + t) * heads + head] * uform_bf16_to_f32(hidden[(first + t) * width + head * head_width + threadIdx.x]);
        pooled[segment * width + head * head_width + threadIdx.x] = uform_f32_to_bf16(total);
    }
}

__global__ void pool_backward_kernel(uint16_t const *hidden, float const *query, float const *weights,
                                     float const *d_pooled, uint32_t const *spans, size_t width, float *d_hidden,
                                     float *query_partials, int plant) {
    __shared__ float shared[threads];
    __shared__ float d_pool[head_width];
    size_t heads = width / head_width, segment = blockIdx.x / heads, head = blockIdx.x % heads;
    size_t first = spans[2 * segment], length = spans[2 * segment + 1];
    if (threadIdx.x < head_width) d_pool[threadIdx.x] = d_pooled[segment * width + head * head_width + threadIdx.x];
    __syncthreads();
    float mean = 0; /* sum over t of alpha_t dalpha_t */
    for (size_t t = threadIdx.x; t < length; t += threads) {
        uint16_t const *h = hidden + (first + t) * width + head * head_width;
        float d_alpha = 0;
        for (unsigned d = 0; d < head_width; ++d) d_alpha += d_pool[d] * uform_bf16_to_f32(h[d]);
        mean += weights[(first + t) * heads + head] * d_alpha;
    }
    mean = uform_block_reduce(mean, shared, 0);
    if (UFORM_PLANTED(2)) mean = 0; /* planted: the softmax's shared term dropped */
    float const *q = query + head * head_width;
    for (size_t t = threadIdx.x; t < length; t += threads) {
        size_t cell = first + t;
        uint16_t const *h = hidden + cell * width + head * head_width;
        float d_alpha = 0, alpha = weights[cell * heads + head];
        for (unsigned d = 0; d < head_width; ++d) d_alpha += d_pool[d] * uform_bf16_to_f32(h[d]);
        float d_score = alpha * (d_alpha - mean) * 0.125f;
        for (unsigned d = 0; d < head_width; ++d) d_hidden[cell * width + head * head_width + d] += alpha * d_pool[d] + d_score * q[d];
    }
    __syncthreads();
    if (threadIdx.x < head_width) { /* the query's share of this segment, summed over cells in order */
        float total = 0;
        for (size_t t = 0; t < length; ++t) {
            size_t cell = first + t;
            uint16_t const *h = hidden + cell * width + head * head_width;
            float d_alpha = 0;
            for (unsigned d = 0; d < head_width; ++d) d_alpha += d_pool[d] * uform_bf16_to_f32(h[d]);
            total += weights[cell * heads + head] * (d_alpha - mean) * 0.125f * uform_bf16_to_f32(h[threadIdx.x]);
        }
        query_partials[segment * width + head * head_width + threadIdx.x] = total;
    }
}

__global__ void pool_query_reduce_kernel(float const *partials, size_t segments, size_t width, float *d_query) {
    size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (column >= width) return;
    float total = 0;
    for (size_t s = 0; s < segments; ++s) total += partials[s * width + column];
    d_query[column] += total;
}

} // namespace

extern "C" uform_status_t uform_cuda_pool_forward(uint16_t const *hidden, float const *query, uint32_t const *spans,
                                                  size_t segments, size_t width, uint16_t *pooled, float *weights,
                                                  void *stream) {
    size_t blocks = segments * (width / head_width);
    if (!blocks) return uform_ok_k;
    pool_forward_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(hidden, query, spans, width, pooled, weights,
                                                                                uform_cuda_planted("pool_forward"));
    return uform_cuda_launched("pool_forward");
}

extern "C" uform_status_t uform_cuda_pool_backward(uint16_t const *hidden, float const *query, float const *weights,
                                                   float const *d_pooled, uint32_t const *spans, size_t segments,
                                                   size_t width, float *d_hidden, float *query_partials, void *stream) {
    size_t blocks = segments * (width / head_width);
    if (!blocks) return uform_ok_k;
    pool_backward_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
        hidden, query, weights, d_pooled, spans, width, d_hidden, query_partials, uform_cuda_planted("pool_backward"));
    return uform_cuda_launched("pool_backward");
}

extern "C" uform_status_t uform_cuda_pool_query_reduce(float const *query_partials, size_t segments, size_t width,
                                                       float *d_query, void *stream) {
    pool_query_reduce_kernel<<<(unsigned)((width + 127) / 128), 128, 0, (cudaStream_t)stream>>>(query_partials, segments,
                                                                                            width, d_query);
    return uform_cuda_launched("pool_query_reduce");
}
