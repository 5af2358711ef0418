/*  ops.cu: the position-wise kernels of the step: byte embedding, RMSNorm, M-RoPE and SwiGLU,
 *  forward and backward. Reductions run in a fixed order (no atomics), so results are bitwise
 *  repeatable. C-style CUDA behind the extern "C" entry points of cuda.h. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "cuda/cuda.h"

namespace {

constexpr unsigned block_threads = 256;

__global__ void embed_forward_kernel(uint16_t const *table, uint32_t const *values, size_t cells, size_t width,
                                     float *x, int plant) {
    size_t cell = blockIdx.x;
    uint32_t value = values[cell];
    if (plant == 1) value = (value + 1) % 258; /* planted: a shifted index */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) x[cell * width + i] = uform_bf16_to_f32(table[value * width + i]);
}

__global__ void embed_backward_kernel(float const *dx, uint32_t const *order, uint32_t const *offsets, size_t width,
                                      float *grad, int plant) {
    size_t value = blockIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x;
    if (column >= width) return;
    uint32_t first = offsets[value], last = offsets[value + 1];
    if (plant == 1 && last > first) last--; /* planted: the run's last cell dropped */
    float sum = 0;
    for (uint32_t j = first; j < last; ++j) sum += dx[(size_t)order[j] * width + column];
    grad[value * width + column] += sum;
}

__global__ void rmsnorm_forward_kernel(float const *x, float const *gain, size_t width, uint16_t *y, float *scales,
                                       int plant) {
    __shared__ float shared[block_threads];
    size_t cell = blockIdx.x;
    float const *row = x + cell * width;
    float squares = 0;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) squares += row[i] * row[i];
    float scale = rsqrtf(uform_block_reduce(squares, shared, 0) / (float)width + 1e-6f);
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) {
        float g = gain[plant == 1 ? (i + 1) % width : i]; /* planted: the gain read one column off */
        y[cell * width + i] = uform_f32_to_bf16(row[i] * scale * g);
    }
    if (threadIdx.x == 0) scales[cell] = scale;
}

__global__ void rmsnorm_backward_kernel(float const *x, float const *gain, float const *scales, float const *dy,
                                        size_t width, float *dx, uint16_t *dx_rounded, int plant) {
    __shared__ float shared[block_threads];
    size_t cell = blockIdx.x;
    float scale = scales[cell];
    float const *row = x + cell * width, *d_row = dy + cell * width;
    float dot = 0;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) dot += d_row[i] * gain[i] * row[i];
    float mean = uform_block_reduce(dot, shared, 0) * scale / (float)width;
    if (plant == 1) mean = 0; /* planted: the term through the shared scale dropped */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) {
        float value = dx[cell * width + i] + scale * (d_row[i] * gain[i] - row[i] * scale * mean);
        dx[cell * width + i] = value;
        if (dx_rounded) dx_rounded[cell * width + i] = uform_f32_to_bf16(value);
    }
}

constexpr size_t gain_group = 256; /* cells per partial: enough blocks, a short final reduction */

__global__ void rmsnorm_gain_partials_kernel(float const *x, float const *scales, float const *dy, size_t cells,
                                             size_t width, float *partials) {
    size_t column = blockIdx.x * blockDim.x + threadIdx.x, group = blockIdx.y;
    if (column >= width) return;
    size_t first = group * gain_group, last = first + gain_group < cells ? first + gain_group : cells;
    float sum = 0;
    for (size_t cell = first; cell < last; ++cell) sum += dy[cell * width + column] * x[cell * width + column] * scales[cell];
    partials[group * width + column] = sum;
}

__global__ void rmsnorm_gain_reduce_kernel(float const *partials, size_t groups, size_t width, float *gain_grad) {
    size_t column = blockIdx.x * blockDim.x + threadIdx.x;
    if (column >= width) return;
    float sum = 0;
    for (size_t group = 0; group < groups; ++group) sum += partials[group * width + column];
    gain_grad[column] += sum;
}

/* table [cells, 32] of (cos, sin): the angle in double, then one rounding each. */
__global__ void rope_table_kernel(int32_t const *positions, size_t cells, float2 *table, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * 32) return;
    size_t slot = index % 32, cell = index / 32;
    int axis = slot < 8 ? 0 : slot < 20 ? 1 : 2;
    if (plant == 1 && axis) axis = 3 - axis; /* planted: h and w swapped */
    double angle = (double)positions[cell * 3 + axis] * pow(10000.0, -(double)slot / 32.0);
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    table[index] = make_float2((float)cosine, (float)sine);
}

__global__ void rope_kernel(uint16_t *qkv, float2 const *table, size_t cells, size_t width, int direction) {
    size_t heads = width / 64, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads * 32) return;
    size_t slot = index % 32, head = (index / 32) % heads, cell = index / (32 * heads);
    float2 rotation = table[cell * 32 + slot];
    float c = rotation.x, s = rotation.y * (float)direction;
    for (size_t part = 0; part < 2; ++part) { /* q, then k */
        uint16_t *vector = qkv + cell * 3 * width + part * width + head * 64;
        float first = uform_bf16_to_f32(vector[slot]), second = uform_bf16_to_f32(vector[slot + 32]);
        vector[slot] = uform_f32_to_bf16(first * c - second * s);
        vector[slot + 32] = uform_f32_to_bf16(second * c + first * s);
    }
}

/* Eight hidden columns per thread, through 16-byte loads and stores (hidden_width % 8 == 0). */
__global__ void swiglu_forward_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                      int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x, groups = hidden_width / 8;
    if (index >= cells * groups) return;
    size_t cell = index / groups, i = index % groups * 8;
    uint4 gate = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + i);
    uint4 up = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width + i);
    uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
    uint4 result;
    uint16_t *r8 = reinterpret_cast<uint16_t *>(&result);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        float g = uform_bf16_to_f32(g8[e]), u = uform_bf16_to_f32(u8[e]);
        float sigmoid = 1.0f / (1.0f + expf(-g));
        float silu = plant == 1 ? sigmoid : g * sigmoid; /* planted: sigmoid in place of silu */
        r8[e] = uform_f32_to_bf16(silu * u);
    }
    *reinterpret_cast<uint4 *>(hidden + cell * hidden_width + i) = result;
}

__global__ void swiglu_backward_kernel(uint16_t const *gate_up, float const *d_hidden, size_t cells,
                                       size_t hidden_width, uint16_t *d_gate_up, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x, groups = hidden_width / 8;
    if (index >= cells * groups) return;
    size_t cell = index / groups, i = index % groups * 8;
    uint4 gate = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + i);
    uint4 up = *reinterpret_cast<uint4 const *>(gate_up + cell * 2 * hidden_width + hidden_width + i);
    float4 dh0 = *reinterpret_cast<float4 const *>(d_hidden + cell * hidden_width + i);
    float4 dh1 = *reinterpret_cast<float4 const *>(d_hidden + cell * hidden_width + i + 4);
    float dh8[8] = {dh0.x, dh0.y, dh0.z, dh0.w, dh1.x, dh1.y, dh1.z, dh1.w};
    uint16_t const *g8 = reinterpret_cast<uint16_t const *>(&gate), *u8 = reinterpret_cast<uint16_t const *>(&up);
    uint4 d_gate, d_up;
    uint16_t *dg8 = reinterpret_cast<uint16_t *>(&d_gate), *du8 = reinterpret_cast<uint16_t *>(&d_up);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        float g = uform_bf16_to_f32(g8[e]), u = uform_bf16_to_f32(u8[e]), dh = dh8[e];
        float sigmoid = 1.0f / (1.0f + expf(-g));
        float slope = plant == 1 ? sigmoid : sigmoid * (1.0f + g * (1.0f - sigmoid)); /* planted: a dropped term */
        dg8[e] = uform_f32_to_bf16(dh * u * slope);
        du8[e] = uform_f32_to_bf16(dh * g * sigmoid);
    }
    *reinterpret_cast<uint4 *>(d_gate_up + cell * 2 * hidden_width + i) = d_gate;
    *reinterpret_cast<uint4 *>(d_gate_up + cell * 2 * hidden_width + hidden_width + i) = d_up;
}

__global__ void round_kernel(float const *x, size_t count, uint16_t *y, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= count) return;
    float value = x[index];
    y[index] = plant == 1 ? (uint16_t)(__float_as_uint(value) >> 16) : uform_f32_to_bf16(value); /* planted: truncation */
}

/* result[0] = scale * sum(x), one block, a fixed order. */
__global__ void sum_kernel(float const *x, size_t count, float const *scale, float *result) {
    __shared__ float shared[1024];
    float sum = 0;
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) sum += x[i];
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) result[0] = sum * (scale ? *scale : 1.0f);
}

unsigned blocks_for(size_t count, unsigned threads) { return (unsigned)((count + threads - 1) / threads); }

int launched(void) { return (int)cudaGetLastError(); }

} // namespace

extern "C" int uform_cuda_embed_forward(uint16_t const *table, uint32_t const *values, size_t cells, size_t width,
                                        float *x, void *stream, int plant) {
    if (!cells) return 0;
    embed_forward_kernel<<<(unsigned)cells, 128, 0, (cudaStream_t)stream>>>(table, values, cells, width, x, plant);
    return launched();
}

extern "C" int uform_cuda_embed_backward(float const *dx, uint32_t const *order, uint32_t const *offsets, size_t width,
                                         float *grad, void *stream, int plant) {
    dim3 grid(blocks_for(width, 128), 258);
    embed_backward_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(dx, order, offsets, width, grad, plant);
    return launched();
}

extern "C" int uform_cuda_rmsnorm_forward(float const *x, float const *gain, size_t cells, size_t width, uint16_t *y,
                                          float *scales, void *stream, int plant) {
    if (!cells) return 0;
    rmsnorm_forward_kernel<<<(unsigned)cells, block_threads, 0, (cudaStream_t)stream>>>(x, gain, width, y, scales, plant);
    return launched();
}

extern "C" int uform_cuda_rmsnorm_backward(float const *x, float const *gain, float const *scales, float const *dy,
                                           size_t cells, size_t width, float *dx, uint16_t *dx_rounded,
                                           float *gain_partials, void *stream, int plant) {
    if (!cells) return 0;
    rmsnorm_backward_kernel<<<(unsigned)cells, block_threads, 0, (cudaStream_t)stream>>>(x, gain, scales, dy, width, dx,
                                                                                        dx_rounded, plant);
    dim3 grid(blocks_for(width, 128), (unsigned)((cells + gain_group - 1) / gain_group));
    rmsnorm_gain_partials_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(x, scales, dy, cells, width, gain_partials);
    return launched();
}

extern "C" int uform_cuda_rmsnorm_gain_reduce(float const *gain_partials, size_t cells, size_t width, float *gain_grad,
                                              void *stream) {
    size_t groups = (cells + gain_group - 1) / gain_group;
    rmsnorm_gain_reduce_kernel<<<blocks_for(width, 128), 128, 0, (cudaStream_t)stream>>>(gain_partials, groups, width, gain_grad);
    return launched();
}

extern "C" int uform_cuda_rope_table(int32_t const *positions, size_t cells, float *table, void *stream, int plant) {
    if (!cells) return 0;
    rope_table_kernel<<<blocks_for(cells * 32, 256), 256, 0, (cudaStream_t)stream>>>(positions, cells, (float2 *)table, plant);
    return launched();
}

extern "C" int uform_cuda_rope(uint16_t *qkv, float const *table, size_t cells, size_t width, int direction,
                               void *stream) {
    size_t count = cells * (width / 64) * 32;
    if (!count) return 0;
    rope_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(qkv, (float2 const *)table, cells, width, direction);
    return launched();
}

extern "C" int uform_cuda_swiglu_forward(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                         void *stream, int plant) {
    size_t count = cells * hidden_width / 8;
    if (!count) return 0;
    if (hidden_width % 8) return (int)cudaErrorInvalidValue;
    swiglu_forward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(gate_up, cells, hidden_width, hidden, plant);
    return launched();
}

extern "C" int uform_cuda_swiglu_backward(uint16_t const *gate_up, float const *d_hidden, size_t cells,
                                          size_t hidden_width, uint16_t *d_gate_up, void *stream, int plant) {
    size_t count = cells * hidden_width / 8;
    if (!count) return 0;
    if (hidden_width % 8) return (int)cudaErrorInvalidValue;
    swiglu_backward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(gate_up, d_hidden, cells, hidden_width,
                                                                                   d_gate_up, plant);
    return launched();
}

extern "C" int uform_cuda_round_bf16(float const *x, size_t count, uint16_t *y, void *stream, int plant) {
    if (!count) return 0;
    round_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(x, count, y, plant);
    return launched();
}

extern "C" int uform_cuda_sum(float const *x, size_t count, float const *scale, float *result, void *stream) {
    sum_kernel<<<1, 1024, 0, (cudaStream_t)stream>>>(x, count, scale, result);
    return launched();
}
