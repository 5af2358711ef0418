/*  common.cuh: the device helpers every kernel file shares: BF16 <-> Float32 (round to nearest
 *  even, as the CPU's numeric.h), M-RoPE's rotation of a pair and a block sum in a fixed tree order. */
#ifndef UFORM_CUDA_COMMON_CUH
#define UFORM_CUDA_COMMON_CUH

#include <stdint.h>

__device__ __forceinline__ float uform_bf16_to_f32(uint16_t value) { return __uint_as_float((uint32_t)value << 16); }

/* NaN stays a quiet NaN. */
__device__ __forceinline__ uint16_t uform_f32_to_bf16(float value) {
    uint32_t bits = __float_as_uint(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* M-RoPE's rotation of one pair (a, b) by (cos c, sin s) in place, stored BF16: a c - b s and b c + a s in
 * Float32, each product and sum rounded on its own (no fused multiply-add), so that every kernel that
 * rotates (rope, attention's loads) gets the same bits. */
__device__ __forceinline__ void uform_rotate_pair(uint16_t *a, uint16_t *b, float c, float s) {
    float first = uform_bf16_to_f32(*a), second = uform_bf16_to_f32(*b);
    *a = uform_f32_to_bf16(__fsub_rn(__fmul_rn(first, c), __fmul_rn(second, s)));
    *b = uform_f32_to_bf16(__fadd_rn(__fmul_rn(second, c), __fmul_rn(first, s)));
}

/* Sum (or max) over the block in a fixed tree order; `shared` holds blockDim.x floats, a power of 2. */
__device__ __forceinline__ float uform_block_reduce(float value, float *shared, int maximum) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            shared[threadIdx.x] = maximum ? fmaxf(shared[threadIdx.x], shared[threadIdx.x + half])
                                          : shared[threadIdx.x] + shared[threadIdx.x + half];
        __syncthreads();
    }
    float result = shared[0];
    __syncthreads();
    return result;
}

#endif
