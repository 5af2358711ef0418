/*  kernels_avx512_vector.h: kernels_widen.h's vector shims over 16-lane AVX-512 registers, shared by
 *  kernels_avx512f.c (AVX-512F alone: the BF16 store by integer rounding) and
 *  kernels_avx512_elementwise.c (UFORM_NATIVE_BF16 defined: the VCVTNEPS2BF16 store of AVX512-BF16). */
#ifndef UFORM_CPU_KERNELS_AVX512_VECTOR_H
#define UFORM_CPU_KERNELS_AVX512_VECTOR_H

#include <immintrin.h>
#include <stdint.h>

typedef __m512 uform_v_t;
#define UFORM_LANES 16

static inline __m512 uform_v_zero(void) { return _mm512_setzero_ps(); }
static inline __m512 uform_v_set1(float x) { return _mm512_set1_ps(x); }
static inline __m512 uform_v_load(float const *p) { return _mm512_loadu_ps(p); }
static inline void uform_v_store(float *p, __m512 x) { _mm512_storeu_ps(p, x); }
static inline __m512 uform_v_add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
static inline __m512 uform_v_sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
static inline __m512 uform_v_mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
static inline __m512 uform_v_div(__m512 a, __m512 b) { return _mm512_div_ps(a, b); }
static inline __m512 uform_v_max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
static inline __m512 uform_v_min(__m512 a, __m512 b) { return _mm512_min_ps(a, b); }
static inline __m512 uform_v_fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
static inline __m512 uform_v_fnma(__m512 a, __m512 b, __m512 c) { return _mm512_fnmadd_ps(a, b, c); }
static inline __m512 uform_v_round(__m512 x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT); }
/* VREDUCEPS (AVX512-DQ) gives x - round(x) in one step. */
static inline __m512 uform_v_split(__m512 x, __m512 *whole) {
#if defined(__AVX512DQ__)
    __m512 fraction = _mm512_reduce_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    *whole = _mm512_sub_ps(x, fraction);
    return fraction;
#else
    *whole = uform_v_round(x);
    return _mm512_sub_ps(x, *whole);
#endif
}
/* VSCALEFPS takes any n: results below the normal range come out subnormal, or zero under FTZ. */
#define UFORM_V_SCALE_ANY 1
static inline __m512 uform_v_scale(__m512 p, __m512 n) { return _mm512_scalef_ps(p, n); }
static inline float uform_v_sum(__m512 x) { return _mm512_reduce_add_ps(x); }
static inline float uform_v_largest(__m512 x) { return _mm512_reduce_max_ps(x); }
/* E4M3 rounding as kernels_avx2.c's, over 16 lanes. */
static inline __m512 uform_v_e4m3(__m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i sign = _mm512_and_si512(bits, _mm512_set1_epi32((int)0x80000000u));
    __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(magnitude, 20), _mm512_set1_epi32(1));
    __m512i normal = _mm512_and_si512(_mm512_add_epi32(magnitude, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7ffff))),
                                      _mm512_set1_epi32((int)0xfff00000u));
    __m512 shifted = _mm512_add_ps(_mm512_mul_ps(_mm512_castsi512_ps(magnitude), _mm512_set1_ps(512.0f)), _mm512_set1_ps(8388608.0f));
    __m512 subnormal = _mm512_mul_ps(_mm512_sub_ps(shifted, _mm512_set1_ps(8388608.0f)), _mm512_set1_ps(0x1p-9f));
    __mmask16 small = _mm512_cmplt_epi32_mask(magnitude, _mm512_set1_epi32(0x3c800000));
    __m512i chosen = _mm512_mask_blend_epi32(small, normal, _mm512_castps_si512(subnormal));
    chosen = _mm512_min_epi32(chosen, _mm512_set1_epi32(0x43e00000));
    return _mm512_castsi512_ps(_mm512_or_si512(chosen, sign));
}
static inline __m512 uform_v_even(uint16_t const *pairs) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(pairs), 16));
}
static inline __m512 uform_v_odd(uint16_t const *pairs) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512(pairs), _mm512_set1_epi32((int)0xffff0000u)));
}
#if defined(UFORM_NATIVE_BF16)
static inline void uform_v_store_bf16(uint16_t *target, __m512 x) {
    _mm256_storeu_si256((__m256i *)target, (__m256i)_mm512_cvtneps_pbh(x)); /* VCVTNEPS2BF16: nearest even, NaN quiet */
}
#define UFORM_V_STORE_BF16_TWO 1
static inline void uform_v_store_bf16_two(uint16_t *target, __m512 first, __m512 second) {
    _mm512_storeu_si512(target, (__m512i)_mm512_cvtne2ps_pbh(second, first)); /* VCVTNE2PS2BF16: the second operand lands first */
}
#else
static inline void uform_v_store_bf16(uint16_t *target, __m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x0040));
    _mm256_storeu_si256((__m256i *)target, _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet)));
}
#endif

#endif
