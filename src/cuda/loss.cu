/*  loss.cu: the fused masked-byte cross-entropy: one block per scored row reads its 258 logits
 *  once into registers, reduces max and sum of exponentials in Float32, and writes the loss and
 *  the gradient directly, so probabilities never reach memory. */
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/cuda.h"
#include "cuda/plant.h"

namespace {

constexpr unsigned threads = 128, vocabulary = 258, per_thread = (vocabulary + threads - 1) / threads;

__global__ void cross_entropy_kernel(uint16_t const *logits, size_t stride, int32_t const *targets, float const *scale_pointer, float *losses,
                                     uint16_t *d_logits, int plant) {
    __shared__ float shared[threads];
    size_t row = blockIdx.x;
    float scale = *scale_pointer;
    int32_t target = targets[row];
    if (UFORM_PLANTED(2) && target < 0) target = 0; /* planted: the mask ignored, unscored rows scored */
    uint16_t *gradient = d_logits + row * stride;
    if (target < 0) {
        for (unsigned v = threadIdx.x; v < vocabulary; v += threads) gradient[v] = 0;
        if (threadIdx.x == 0) losses[row] = 0;
        return;
    }
    float values[per_thread], largest = -INFINITY;
    for (unsigned j = 0; j < per_thread; ++j) {
        unsigned v = threadIdx.x + j * threads;
        values[j] = v < vocabulary ? uform_bf16_to_f32(logits[row * stride + v]) : -INFINITY;
        largest = fmaxf(largest, values[j]);
    }
    shared[threadIdx.x] = largest;
    __syncthreads();
    for (unsigned half = threads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + half]);
        __syncthreads();
    }
    largest = shared[0];
    __syncthreads();
    float sum = 0;
    for (unsigned j = 0; j < per_thread; ++j)
        if (threadIdx.x + j * threads < vocabulary) sum += expf(values[j] - largest);
    shared[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = threads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    float log_sum = largest + logf(shared[0]);
    for (unsigned j = 0; j < per_thread; ++j) {
        unsigned v = threadIdx.x + j * threads;
        if (v >= vocabulary) continue;
        float probability = expf(values[j] - log_sum);
        float onehot = (v == (unsigned)target && !UFORM_PLANTED(1)) ? 1.0f : 0.0f; /* planted 1: the target's -1 dropped */
        gradient[v] = uform_f32_to_bf16((probability - onehot) * scale);
        if (v == (unsigned)target) losses[row] = log_sum - values[j];
    }
}

} // namespace

extern "C" uform_status_t uform_cuda_cross_entropy(uint16_t const *logits, size_t stride, int32_t const *targets,
                                                   size_t rows, float const *scale, float *losses, uint16_t *d_logits,
                                                   void *stream) {
    if (!rows) return uform_ok_k;
    cross_entropy_kernel<<<(unsigned)rows, threads, 0, (cudaStream_t)stream>>>(logits, stride, targets, scale, losses, d_logits,
                                                                              uform_cuda_planted("cross_entropy"));
    return uform_cuda_launched("cross_entropy");
}
