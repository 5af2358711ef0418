/*  attention.cu: attention restricted to each segment of packed rows, forward and backward, one
 *  thread per (cell, head) holding its 64-wide vectors in registers. Correct and deterministic
 *  first; a tiled tensor-core kernel (or cuDNN's) replaces it once measured (docs/cuda.md). */
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "cuda/cuda.h"

namespace {

constexpr unsigned head_width = 64, threads = 128;

/* The keys a query of `cell` sees: its segment, [first, last). */
__device__ __forceinline__ void key_range(uint32_t const *spans, uint32_t const *segment_of, size_t cells, size_t cell,
                                          int plant, size_t *first, size_t *last) {
    uint32_t segment = segment_of[cell];
    *first = spans[2 * segment];
    *last = *first + spans[2 * segment + 1];
    if (plant == 1 && *last < cells) *last += 1; /* planted: the mask leaks one cell past the segment */
}

__device__ __forceinline__ float dot64(float const *a, uint16_t const *b) {
    float sum = 0;
#pragma unroll
    for (unsigned d = 0; d < head_width; ++d) sum += a[d] * uform_bf16_to_f32(b[d]);
    return sum;
}

__global__ void attention_forward_kernel(uint16_t const *qkv, uint32_t const *spans, uint32_t const *segment_of,
                                         size_t cells, size_t width, uint16_t *attended, float *log_sums, int plant) {
    size_t heads = width / head_width, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads) return;
    size_t cell = index / heads, head = index % heads, stride = 3 * width, first, last;
    key_range(spans, segment_of, cells, cell, plant, &first, &last);
    float q[head_width], output[head_width];
    for (unsigned d = 0; d < head_width; ++d) {
        q[d] = uform_bf16_to_f32(qkv[cell * stride + head * head_width + d]) * 0.125f;
        output[d] = 0;
    }
    float largest = -INFINITY, sum = 0;
    for (size_t key = first; key < last; ++key) { /* online softmax */
        float score = dot64(q, qkv + key * stride + width + head * head_width);
        float next = fmaxf(largest, score), rescale = expf(largest - next), weight = expf(score - next);
        sum = sum * rescale + weight;
        uint16_t const *v = qkv + key * stride + 2 * width + head * head_width;
        for (unsigned d = 0; d < head_width; ++d) output[d] = output[d] * rescale + weight * uform_bf16_to_f32(v[d]);
        largest = next;
    }
    for (unsigned d = 0; d < head_width; ++d) attended[cell * width + head * head_width + d] = uform_f32_to_bf16(output[d] / sum);
    log_sums[cell * heads + head] = largest + logf(sum);
}

/* dq of one (cell, head): sum over keys of dS k / 8, dS = p (dO . v - D), D = dO . O. */
__global__ void attention_backward_query_kernel(uint16_t const *qkv, uint16_t const *attended, float const *log_sums,
                                                float const *d_attended, uint32_t const *spans,
                                                uint32_t const *segment_of, size_t cells, size_t width,
                                                uint16_t *d_qkv, int plant) {
    size_t heads = width / head_width, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads) return;
    size_t cell = index / heads, head = index % heads, stride = 3 * width, first, last;
    key_range(spans, segment_of, cells, cell, 0, &first, &last);
    float q[head_width], d_out[head_width], dq[head_width], delta = 0;
    for (unsigned d = 0; d < head_width; ++d) {
        q[d] = uform_bf16_to_f32(qkv[cell * stride + head * head_width + d]) * 0.125f;
        d_out[d] = d_attended[cell * width + head * head_width + d];
        delta += d_out[d] * uform_bf16_to_f32(attended[cell * width + head * head_width + d]);
        dq[d] = 0;
    }
    if (plant == 2) delta = 0; /* planted: the softmax's shared term dropped */
    float log_sum = log_sums[cell * heads + head];
    for (size_t key = first; key < last; ++key) {
        uint16_t const *k = qkv + key * stride + width + head * head_width;
        float p = expf(dot64(q, k) - log_sum);
        float d_score = p * (dot64(d_out, qkv + key * stride + 2 * width + head * head_width) - delta) * 0.125f;
        for (unsigned d = 0; d < head_width; ++d) dq[d] += d_score * uform_bf16_to_f32(k[d]);
    }
    for (unsigned d = 0; d < head_width; ++d) d_qkv[cell * stride + head * head_width + d] = uform_f32_to_bf16(dq[d]);
}

/* dk and dv of one (key cell, head): sums over the queries that see it. */
__global__ void attention_backward_key_kernel(uint16_t const *qkv, uint16_t const *attended, float const *log_sums,
                                              float const *d_attended, uint32_t const *spans,
                                              uint32_t const *segment_of, size_t cells, size_t width, uint16_t *d_qkv,
                                              int plant) {
    size_t heads = width / head_width, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads) return;
    size_t key = index / heads, head = index % heads, stride = 3 * width, first, last;
    key_range(spans, segment_of, cells, key, 0, &first, &last); /* the queries of the key's own segment */
    float k[head_width], v[head_width], dk[head_width], dv[head_width];
    for (unsigned d = 0; d < head_width; ++d) {
        k[d] = uform_bf16_to_f32(qkv[key * stride + width + head * head_width + d]);
        v[d] = uform_bf16_to_f32(qkv[key * stride + 2 * width + head * head_width + d]);
        dk[d] = dv[d] = 0;
    }
    for (size_t query = first; query < last; ++query) {
        uint16_t const *q = qkv + query * stride + head * head_width;
        float const *d_out = d_attended + query * width + head * head_width;
        float score = 0, d_dot_v = 0, delta = 0;
        for (unsigned d = 0; d < head_width; ++d) {
            score += uform_bf16_to_f32(q[d]) * 0.125f * k[d];
            d_dot_v += d_out[d] * v[d];
            delta += d_out[d] * uform_bf16_to_f32(attended[query * width + head * head_width + d]);
        }
        if (plant == 2) delta = 0;
        float p = expf(score - log_sums[query * heads + head]), d_score = p * (d_dot_v - delta) * 0.125f;
        for (unsigned d = 0; d < head_width; ++d) {
            dv[d] += p * d_out[d];
            dk[d] += d_score * uform_bf16_to_f32(q[d]);
        }
    }
    for (unsigned d = 0; d < head_width; ++d) {
        d_qkv[key * stride + width + head * head_width + d] = uform_f32_to_bf16(dk[d]);
        d_qkv[key * stride + 2 * width + head * head_width + d] = uform_f32_to_bf16(dv[d]);
    }
}

} // namespace

extern "C" int uform_cuda_attention_forward(uint16_t const *qkv, uint32_t const *spans, uint32_t const *segment_of,
                                            size_t cells, size_t width, uint16_t *attended, float *log_sums,
                                            void *stream, int plant) {
    size_t count = cells * (width / head_width);
    if (!count) return 0;
    attention_forward_kernel<<<(unsigned)((count + threads - 1) / threads), threads, 0, (cudaStream_t)stream>>>(
        qkv, spans, segment_of, cells, width, attended, log_sums, plant);
    return (int)cudaGetLastError();
}

extern "C" int uform_cuda_attention_backward(uint16_t const *qkv, uint16_t const *attended, float const *log_sums,
                                             float const *d_attended, uint32_t const *spans,
                                             uint32_t const *segment_of, size_t cells, size_t width, uint16_t *d_qkv,
                                             void *stream, int plant) {
    size_t count = cells * (width / head_width);
    if (!count) return 0;
    unsigned blocks = (unsigned)((count + threads - 1) / threads);
    attention_backward_query_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(
        qkv, attended, log_sums, d_attended, spans, segment_of, cells, width, d_qkv, plant);
    attention_backward_key_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(
        qkv, attended, log_sums, d_attended, spans, segment_of, cells, width, d_qkv, plant);
    return (int)cudaGetLastError();
}
