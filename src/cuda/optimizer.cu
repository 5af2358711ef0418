/*  optimizer.cu: Adafactor with a first moment (SPEC.md section 5) for a BF16 matrix (row and
 *  column means of G^2, the factored second moment) and for a Float32 vector (unfactored), update
 *  clipping by rms(U), the first moment, bias corrections and the store of the master. The step's
 *  rate and corrections are read from device memory, so one captured graph serves every step.
 *  Every reduction has a fixed order. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned threads = 256;

/* (1 - beta) comes from the host, computed in double: in Float32, 1 - 0.999f is off by 1e-5 relative. */
__global__ void row_moment_kernel(float const *gradient, size_t columns, float beta2, float complement2,
                                  float *row_moment) {
    __shared__ float shared[threads];
    size_t row = blockIdx.x;
    float sum = 0;
    for (size_t c = threadIdx.x; c < columns; c += threads) {
        float g = gradient[row * columns + c];
        sum += g * g + 1e-30f;
    }
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) row_moment[row] = beta2 * row_moment[row] + complement2 * (sum / (float)columns);
}

constexpr size_t column_chunk = 64; /* rows per partial column sum */

/* partials [chunks, columns]: each a serial sum over its 64 rows (coalesced across columns). */
__global__ void column_partials_kernel(float const *gradient, size_t rows, size_t columns, float *partials) {
    size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x, chunk = blockIdx.y;
    if (column >= columns) return;
    size_t first = chunk * column_chunk, last = first + column_chunk < rows ? first + column_chunk : rows;
    float sum = 0;
    for (size_t r = first; r < last; ++r) {
        float g = gradient[r * columns + column];
        sum += g * g + 1e-30f;
    }
    partials[chunk * columns + column] = sum;
}

__global__ void column_moment_kernel(float const *partials, size_t rows, size_t columns, float beta2, float complement2,
                                     float *column_moment) {
    size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x, chunks = (rows + column_chunk - 1) / column_chunk;
    if (column >= columns) return;
    float sum = 0;
    for (size_t chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * columns + column];
    column_moment[column] = beta2 * column_moment[column] + complement2 * (sum / (float)rows);
}

/* scratch[0] = mean(R); one block. */
__global__ void row_mean_kernel(float const *row_moment, size_t rows, float *scratch) {
    __shared__ float shared[threads];
    float sum = 0;
    for (size_t r = threadIdx.x; r < rows; r += threads) sum += row_moment[r];
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) scratch[0] = sum / (float)rows;
}

/* U = G / sqrt(V) with V's row and column factors rooted apart: R C for a row and a column that saw
 * only zeros is about 1e-66, which Float32 flushes to 0, and 0 rsqrt(0) is NaN. Planted (2): that product. */
__device__ __forceinline__ float update_of(float const *gradient, float const *row_moment, float const *column_moment,
                                           float row_mean, float correction2, size_t columns, size_t index, int plant) {
    float row = row_moment[index / columns], column = column_moment[index % columns];
    if (UFORM_PLANTED(2)) return gradient[index] * rsqrtf(row * column / row_mean / correction2);
    return gradient[index] * rsqrtf(row / row_mean) * rsqrtf(column / correction2);
}

/* Per-block partial sums of U^2 into scratch[2 + block]. */
__global__ void update_squares_kernel(float const *gradient, float const *row_moment, float const *column_moment,
                                      size_t count, size_t columns, float const *schedule, float *scratch, int plant) {
    __shared__ float shared[threads];
    float sum = 0, correction2 = UFORM_PLANTED(1) ? 1.0f : schedule[2]; /* planted: no bias correction of V */
    for (size_t index = blockIdx.x * (size_t)threads + threadIdx.x; index < count; index += (size_t)gridDim.x * threads) {
        float u = update_of(gradient, row_moment, column_moment, scratch[0], correction2, columns, index, plant);
        sum += u * u;
    }
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) scratch[2 + blockIdx.x] = sum;
}

/* scratch[1] = max(1, rms(U) / clip); one block of `threads`, partials in a fixed tree order. */
__global__ void shrink_kernel(size_t blocks, size_t count, float clip, float *scratch) {
    __shared__ float shared[threads];
    float sum = 0;
    for (size_t b = threadIdx.x; b < blocks; b += threads) sum += scratch[2 + b];
    sum = uform_block_reduce(sum, shared, 0);
    float shrink = sqrtf(sum / (float)count) / clip;
    if (threadIdx.x == 0) scratch[1] = shrink > 1.0f ? shrink : 1.0f;
}

__global__ void apply_kernel(uint16_t *weights, float const *gradient, float const *row_moment,
                             float const *column_moment, float *first_moment, size_t count, size_t columns,
                             float const *schedule, float beta1, float complement1, float weight_decay,
                             float const *scratch, int plant) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= count) return;
    float rate = schedule[0], correction1 = schedule[1], correction2 = UFORM_PLANTED(1) ? 1.0f : schedule[2];
    float u = update_of(gradient, row_moment, column_moment, scratch[0], correction2, columns, index, plant) / scratch[1];
    float m = beta1 * first_moment[index] + complement1 * u;
    first_moment[index] = m;
    float w = uform_bf16_to_f32(weights[index]);
    weights[index] = uform_f32_to_bf16(w - rate * (m / correction1 + weight_decay * w));
}

/* A Float32 vector (one block): unfactored V, clipping over the whole vector, Float32 master. */
__global__ void vector_kernel(float *weights, float const *gradient, float *moment, float *first_moment, size_t count,
                              float beta1, float complement1, float beta2, float complement2, float clip,
                              float weight_decay, float const *schedule, int plant) {
    __shared__ float shared[threads];
    float rate = schedule[0], correction1 = schedule[1], correction2 = UFORM_PLANTED(1) ? 1.0f : schedule[2];
    float sum = 0;
    for (size_t i = threadIdx.x; i < count; i += threads) {
        float g = gradient[i], v = beta2 * moment[i] + complement2 * (g * g + 1e-30f);
        moment[i] = v;
        float u = g * rsqrtf(v / correction2);
        sum += u * u;
    }
    sum = uform_block_reduce(sum, shared, 0);
    float shrink = sqrtf(sum / (float)count) / clip;
    shrink = shrink > 1.0f ? shrink : 1.0f;
    for (size_t i = threadIdx.x; i < count; i += threads) {
        float u = gradient[i] * rsqrtf(moment[i] / correction2) / shrink;
        float m = beta1 * first_moment[i] + complement1 * u;
        first_moment[i] = m;
        weights[i] -= rate * (m / correction1 + weight_decay * weights[i]);
    }
}

} // namespace

extern "C" size_t uform_cuda_adafactor_scratch(size_t rows, size_t columns) {
    size_t partials = (rows + column_chunk - 1) / column_chunk * columns;
    return 2 + (partials > rows + columns ? partials : rows + columns);
}

extern "C" void uform_cuda_adafactor_schedule(double learning_rate, double beta1, double beta2, size_t step,
                                             float schedule[3]) {
    /* In double, then one Float32 rounding: 1 - 0.999^t in Float32 loses digits. */
    schedule[0] = (float)learning_rate;
    schedule[1] = (float)(1.0 - pow(beta1, (double)step));
    schedule[2] = (float)(1.0 - pow(beta2, (double)step));
}

extern "C" uform_status_t uform_cuda_adafactor_matrix(uint16_t *weights, float const *gradient, float *row_moment,
                                                      float *column_moment, float *first_moment, size_t rows,
                                                      size_t columns, float const *schedule, double beta1,
                                                      double beta2, double clip, double weight_decay, float *scratch,
                                                      void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    size_t count = rows * columns;
    if (!count) return uform_ok_k;
    int plant = uform_cuda_planted("adafactor_matrix");
    size_t blocks = (count + threads - 1) / threads;
    if (blocks > rows + columns) blocks = rows + columns; /* the partials fit the caller's scratch */
    float complement1 = (float)(1.0 - beta1), complement2 = (float)(1.0 - beta2);
    row_moment_kernel<<<(unsigned)rows, threads, 0, s>>>(gradient, columns, (float)beta2, complement2, row_moment);
    dim3 partial_grid((unsigned)((columns + threads - 1) / threads), (unsigned)((rows + column_chunk - 1) / column_chunk));
    column_partials_kernel<<<partial_grid, threads, 0, s>>>(gradient, rows, columns, scratch + 2);
    column_moment_kernel<<<(unsigned)((columns + threads - 1) / threads), threads, 0, s>>>(
        scratch + 2, rows, columns, (float)beta2, complement2, column_moment);
    row_mean_kernel<<<1, threads, 0, s>>>(row_moment, rows, scratch);
    update_squares_kernel<<<(unsigned)blocks, threads, 0, s>>>(gradient, row_moment, column_moment, count, columns,
                                                               schedule, scratch, plant);
    shrink_kernel<<<1, threads, 0, s>>>(blocks, count, (float)clip, scratch);
    apply_kernel<<<(unsigned)((count + threads - 1) / threads), threads, 0, s>>>(
        weights, gradient, row_moment, column_moment, first_moment, count, columns, schedule, (float)beta1,
        complement1, (float)weight_decay, scratch, plant);
    return uform_cuda_launched("adafactor_matrix");
}

extern "C" uform_status_t uform_cuda_adafactor_vector(float *weights, float const *gradient, float *moment,
                                                      float *first_moment, size_t count, float const *schedule,
                                                      double beta1, double beta2, double clip, double weight_decay,
                                                      void *stream) {
    if (!count) return uform_ok_k;
    vector_kernel<<<1, threads, 0, (cudaStream_t)stream>>>(weights, gradient, moment, first_moment, count, (float)beta1,
                                                           (float)(1.0 - beta1), (float)beta2, (float)(1.0 - beta2),
                                                           (float)clip, (float)weight_decay, schedule,
                                                           uform_cuda_planted("adafactor_vector"));
    return uform_cuda_launched("adafactor_vector");
}
