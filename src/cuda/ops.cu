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
                                        size_t width, float *dx, int plant) {
    __shared__ float shared[block_threads];
    size_t cell = blockIdx.x;
    float scale = scales[cell];
    float const *row = x + cell * width, *d_row = dy + cell * width;
    float dot = 0;
    for (size_t i = threadIdx.x; i < width; i += blockDim.x) dot += d_row[i] * gain[i] * row[i];
    float mean = uform_block_reduce(dot, shared, 0) * scale / (float)width;
    if (plant == 1) mean = 0; /* planted: the term through the shared scale dropped */
    for (size_t i = threadIdx.x; i < width; i += blockDim.x)
        dx[cell * width + i] += scale * (d_row[i] * gain[i] - row[i] * scale * mean);
}

constexpr size_t gain_group = 32;

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

__global__ void rope_kernel(uint16_t *qkv, int32_t const *positions, size_t cells, size_t width, int direction,
                            int plant) {
    size_t heads = width / 64, index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * heads * 32) return;
    size_t slot = index % 32, head = (index / 32) % heads, cell = index / (32 * heads);
    int axis = slot < 8 ? 0 : slot < 20 ? 1 : 2;
    if (plant == 1 && axis) axis = 3 - axis; /* planted: h and w swapped */
    double angle = (double)positions[cell * 3 + axis] * pow(10000.0, -(double)slot / 32.0);
    double sine, cosine;
    sincos(angle, &sine, &cosine);
    float c = (float)cosine, s = (float)sine * (float)direction;
    for (size_t part = 0; part < 2; ++part) { /* q, then k */
        uint16_t *vector = qkv + cell * 3 * width + part * width + head * 64;
        float first = uform_bf16_to_f32(vector[slot]), second = uform_bf16_to_f32(vector[slot + 32]);
        vector[slot] = uform_f32_to_bf16(first * c - second * s);
        vector[slot + 32] = uform_f32_to_bf16(second * c + first * s);
    }
}

__global__ void swiglu_forward_kernel(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                      int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * hidden_width) return;
    size_t cell = index / hidden_width, i = index % hidden_width;
    float g = uform_bf16_to_f32(gate_up[cell * 2 * hidden_width + i]), u = uform_bf16_to_f32(gate_up[cell * 2 * hidden_width + hidden_width + i]);
    float sigmoid = 1.0f / (1.0f + expf(-g));
    float silu = plant == 1 ? sigmoid : g * sigmoid; /* planted: sigmoid in place of silu */
    hidden[index] = uform_f32_to_bf16(silu * u);
}

__global__ void swiglu_backward_kernel(uint16_t const *gate_up, float const *d_hidden, size_t cells,
                                       size_t hidden_width, uint16_t *d_gate_up, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= cells * hidden_width) return;
    size_t cell = index / hidden_width, i = index % hidden_width;
    float g = uform_bf16_to_f32(gate_up[cell * 2 * hidden_width + i]), u = uform_bf16_to_f32(gate_up[cell * 2 * hidden_width + hidden_width + i]);
    float dh = d_hidden[index], sigmoid = 1.0f / (1.0f + expf(-g));
    float slope = plant == 1 ? sigmoid : sigmoid * (1.0f + g * (1.0f - sigmoid)); /* planted: a dropped term */
    d_gate_up[cell * 2 * hidden_width + i] = uform_f32_to_bf16(dh * u * slope);
    d_gate_up[cell * 2 * hidden_width + hidden_width + i] = uform_f32_to_bf16(dh * g * sigmoid);
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
                                           size_t cells, size_t width, float *dx, float *gain_partials, void *stream,
                                           int plant) {
    if (!cells) return 0;
    rmsnorm_backward_kernel<<<(unsigned)cells, block_threads, 0, (cudaStream_t)stream>>>(x, gain, scales, dy, width, dx, plant);
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

extern "C" int uform_cuda_rope(uint16_t *qkv, int32_t const *positions, size_t cells, size_t width, int direction,
                               void *stream, int plant) {
    size_t count = cells * (width / 64) * 32;
    if (!count) return 0;
    rope_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(qkv, positions, cells, width, direction, plant);
    return launched();
}

extern "C" int uform_cuda_swiglu_forward(uint16_t const *gate_up, size_t cells, size_t hidden_width, uint16_t *hidden,
                                         void *stream, int plant) {
    size_t count = cells * hidden_width;
    if (!count) return 0;
    swiglu_forward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(gate_up, cells, hidden_width, hidden, plant);
    return launched();
}

extern "C" int uform_cuda_swiglu_backward(uint16_t const *gate_up, float const *d_hidden, size_t cells,
                                          size_t hidden_width, uint16_t *d_gate_up, void *stream, int plant) {
    size_t count = cells * hidden_width;
    if (!count) return 0;
    swiglu_backward_kernel<<<blocks_for(count, 256), 256, 0, (cudaStream_t)stream>>>(gate_up, d_hidden, cells, hidden_width,
                                                                                   d_gate_up, plant);
    return launched();
}
