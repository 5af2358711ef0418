/*  optimizer.cu: Adafactor with a first moment for a BF16 matrix (SPEC.md section 5): row and
 *  column means of G^2, the factored second moment, update clipping by rms(U), the first moment,
 *  bias corrections and the rounded store of the BF16 master. Every reduction has a fixed order. */
#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "cuda/cuda.h"

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

__global__ void column_moment_kernel(float const *gradient, size_t rows, size_t columns, float beta2,
                                     float complement2, float *column_moment) {
    size_t column = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (column >= columns) return;
    float sum = 0;
    for (size_t r = 0; r < rows; ++r) {
        float g = gradient[r * columns + column];
        sum += g * g + 1e-30f;
    }
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

__device__ __forceinline__ float update_of(float const *gradient, float const *row_moment, float const *column_moment,
                                           float row_mean, float correction2, size_t columns, size_t index) {
    float v = row_moment[index / columns] * column_moment[index % columns] / row_mean / correction2;
    return gradient[index] * rsqrtf(v);
}

/* Per-block partial sums of U^2 into scratch[2 + block]. */
__global__ void update_squares_kernel(float const *gradient, float const *row_moment, float const *column_moment,
                                      size_t count, size_t columns, float correction2, float *scratch) {
    __shared__ float shared[threads];
    float sum = 0;
    for (size_t index = blockIdx.x * (size_t)threads + threadIdx.x; index < count; index += (size_t)gridDim.x * threads) {
        float u = update_of(gradient, row_moment, column_moment, scratch[0], correction2, columns, index);
        sum += u * u;
    }
    sum = uform_block_reduce(sum, shared, 0);
    if (threadIdx.x == 0) scratch[2 + blockIdx.x] = sum;
}

/* scratch[1] = max(1, rms(U) / clip); one block, partials added in block order. */
__global__ void shrink_kernel(size_t blocks, size_t count, float clip, float *scratch) {
    if (threadIdx.x != 0) return;
    float sum = 0;
    for (size_t b = 0; b < blocks; ++b) sum += scratch[2 + b];
    float shrink = sqrtf(sum / (float)count) / clip;
    scratch[1] = shrink > 1.0f ? shrink : 1.0f;
}

__global__ void apply_kernel(uint16_t *weights, float const *gradient, float const *row_moment,
                             float const *column_moment, float *first_moment, size_t count, size_t columns,
                             float correction1, float correction2, float rate, float beta1, float complement1,
                             float weight_decay, float const *scratch) {
    size_t index = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (index >= count) return;
    float u = update_of(gradient, row_moment, column_moment, scratch[0], correction2, columns, index) / scratch[1];
    float m = beta1 * first_moment[index] + complement1 * u;
    first_moment[index] = m;
    float w = uform_bf16_to_f32(weights[index]);
    weights[index] = uform_f32_to_bf16(w - rate * (m / correction1 + weight_decay * w));
}

} // namespace

extern "C" int uform_cuda_adafactor_matrix(uint16_t *weights, float const *gradient, float *row_moment,
                                           float *column_moment, float *first_moment, size_t rows, size_t columns,
                                           double learning_rate, double beta1, double beta2, double clip,
                                           double weight_decay, size_t step, float *scratch, void *stream, int plant) {
    cudaStream_t s = (cudaStream_t)stream;
    size_t count = rows * columns;
    if (!count) return 0;
    /* Bias corrections in double on the host, then one Float32 rounding. */
    float correction2 = plant == 1 ? 1.0f : (float)(1.0 - pow(beta2, (double)step)); /* planted: no correction */
    float correction1 = (float)(1.0 - pow(beta1, (double)step));
    size_t blocks = (count + threads - 1) / threads;
    if (blocks > rows + columns) blocks = rows + columns; /* the partials fit the caller's scratch */
    float complement1 = (float)(1.0 - beta1), complement2 = (float)(1.0 - beta2);
    row_moment_kernel<<<(unsigned)rows, threads, 0, s>>>(gradient, columns, (float)beta2, complement2, row_moment);
    column_moment_kernel<<<(unsigned)((columns + threads - 1) / threads), threads, 0, s>>>(
        gradient, rows, columns, (float)beta2, complement2, column_moment);
    row_mean_kernel<<<1, threads, 0, s>>>(row_moment, rows, scratch);
    update_squares_kernel<<<(unsigned)blocks, threads, 0, s>>>(gradient, row_moment, column_moment, count, columns,
                                                               correction2, scratch);
    shrink_kernel<<<1, 32, 0, s>>>(blocks, count, (float)clip, scratch);
    apply_kernel<<<(unsigned)((count + threads - 1) / threads), threads, 0, s>>>(
        weights, gradient, row_moment, column_moment, first_moment, count, columns, correction1, correction2,
        (float)learning_rate, (float)beta1, complement1, (float)weight_decay, scratch);
    return (int)cudaGetLastError();
}
