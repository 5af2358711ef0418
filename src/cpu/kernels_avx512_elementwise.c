/*  kernels_avx512_elementwise.c: the avx512bf16 (and amx) tables' softmax, SwiGLU, rounding, RMSNorm and E4M3 inputs:
 *  kernels_widen.h's bodies over 16-lane vectors with the native BF16 store (VCVTNEPS2BF16) in place
 *  of avx512f's integer rounding. Compiled with AVX512-BF16 flags and only called after a CPU check
 *  (kernels.c). */
#define UFORM_NATIVE_BF16 1
#include "cpu/kernels_avx512_vector.h"
#include "cpu/kernels_widen.h"

void uform_softmax_bf16_avx512bf16(float const *scores, size_t rows, size_t columns, size_t stride, float scale,
                                   uint16_t *probabilities, size_t probabilities_stride, float *sums) {
    uform_softmax_bf16_widen_(scores, rows, columns, stride, scale, probabilities, probabilities_stride, sums);
}

void uform_swiglu_bf16_avx512bf16(float const *gate_up, size_t rows, size_t width, uint16_t *hidden) {
    uform_swiglu_bf16_widen_(gate_up, rows, width, hidden);
}

void uform_round_bf16_avx512bf16(float const *source, uint16_t *target, size_t count) {
    uform_round_bf16_widen_(source, target, count);
}

float uform_quantize_e4m3_avx512bf16(float const *source, size_t count, uint16_t *target) {
    return uform_quantize_e4m3_widen_(source, count, target);
}

void uform_swiglu_f32_avx512bf16(float const *gate_up, size_t rows, size_t width, float *hidden) {
    uform_swiglu_f32_widen_(gate_up, rows, width, hidden);
}

float uform_rmsnorm_avx512bf16(float const *x, float const *gain, float *y, size_t width) {
    return uform_rmsnorm_widen_(x, gain, y, width);
}
