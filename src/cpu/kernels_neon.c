/*  kernels_neon.c: the kernel table of AArch64 (NEON is part of every AArch64 CPU, so it needs no
 *  run-time check): kernels_widen.h over 4-lane vectors, tiles of up to 4 rows of A against one
 *  panel of 16 columns of B (16 accumulators, 8 widened B vectors of the 32 registers), and an int8
 *  product that widens both sides to int16 and multiply-accumulates into int32 (SMLAL), exactly, as
 *  every table's does. E4M3 widening is the generic table's lookup. Compiled only for AArch64. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

typedef float32x4_t uform_v_t;
#define UFORM_LANES 4
#define UFORM_TILE_ROWS_MOST 4
#define UFORM_TILE_PANELS_MOST 1
#define UFORM_WIDEN_TABLE uform_kernels_neon
#define UFORM_WIDEN_NAME "neon"
#define UFORM_WIDEN_E4M3 uform_widen_e4m3_generic
#define UFORM_WIDEN_INT8 uform_quantize_int8_neon, uform_gemm_int8_neon

static float uform_quantize_int8_neon(float const *source, size_t count, uint8_t *target);
static void uform_gemm_int8_neon(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                 float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                 size_t width, size_t depth);

static inline float32x4_t uform_v_zero(void) { return vdupq_n_f32(0.0f); }
static inline float32x4_t uform_v_set1(float x) { return vdupq_n_f32(x); }
static inline float32x4_t uform_v_load(float const *p) { return vld1q_f32(p); }
static inline void uform_v_store(float *p, float32x4_t x) { vst1q_f32(p, x); }
static inline float32x4_t uform_v_add(float32x4_t a, float32x4_t b) { return vaddq_f32(a, b); }
static inline float32x4_t uform_v_sub(float32x4_t a, float32x4_t b) { return vsubq_f32(a, b); }
static inline float32x4_t uform_v_mul(float32x4_t a, float32x4_t b) { return vmulq_f32(a, b); }
static inline float32x4_t uform_v_div(float32x4_t a, float32x4_t b) { return vdivq_f32(a, b); }
static inline float32x4_t uform_v_max(float32x4_t a, float32x4_t b) { return vmaxq_f32(a, b); }
static inline float32x4_t uform_v_min(float32x4_t a, float32x4_t b) { return vminq_f32(a, b); }
static inline float32x4_t uform_v_fma(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmaq_f32(c, a, b); }
static inline float32x4_t uform_v_fnma(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmsq_f32(c, a, b); }
static inline float32x4_t uform_v_round(float32x4_t x) { return vrndnq_f32(x); }
static inline float32x4_t uform_v_split(float32x4_t x, float32x4_t *whole) {
    *whole = vrndnq_f32(x);
    return vsubq_f32(x, *whole);
}
/* 2^n built in the exponent field: n stays in [-126, 127] for the clamped arguments of exp. */
static inline float32x4_t uform_v_scale(float32x4_t p, float32x4_t n) {
    int32x4_t exponent = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(exponent));
}
/* Summed as the x86 tables' halving (lanes i and i + 2, then the two), not in lane order. */
static inline float uform_v_sum(float32x4_t x) {
    float32x2_t half = vadd_f32(vget_low_f32(x), vget_high_f32(x));
    return vget_lane_f32(half, 0) + vget_lane_f32(half, 1);
}
static inline float uform_v_largest(float32x4_t x) { return vmaxvq_f32(x); }
/* E4M3 rounding in Float32's bits, as kernels_avx2.c's: a normal keeps 3 mantissa bits (ties to even),
 * a value under 2^-6 goes to a multiple of 2^-9 by the add-and-subtract of 2^23, the magnitude capped at 448. */
static inline float32x4_t uform_v_e4m3(float32x4_t x) {
    uint32x4_t bits = vreinterpretq_u32_f32(x);
    uint32x4_t sign = vandq_u32(bits, vdupq_n_u32(0x80000000u));
    uint32x4_t magnitude = vandq_u32(bits, vdupq_n_u32(0x7fffffffu));
    uint32x4_t odd = vandq_u32(vshrq_n_u32(magnitude, 20), vdupq_n_u32(1));
    uint32x4_t normal = vandq_u32(vaddq_u32(magnitude, vaddq_u32(odd, vdupq_n_u32(0x7ffff))), vdupq_n_u32(0xfff00000u));
    float32x4_t shifted = vaddq_f32(vmulq_f32(vreinterpretq_f32_u32(magnitude), vdupq_n_f32(512.0f)), vdupq_n_f32(8388608.0f));
    float32x4_t subnormal = vmulq_f32(vsubq_f32(shifted, vdupq_n_f32(8388608.0f)), vdupq_n_f32(0x1p-9f));
    uint32x4_t small = vcltq_u32(magnitude, vdupq_n_u32(0x3c800000));
    uint32x4_t chosen = vbslq_u32(small, vreinterpretq_u32_f32(subnormal), normal);
    chosen = vminq_u32(chosen, vdupq_n_u32(0x43e00000));
    return vreinterpretq_f32_u32(vorrq_u32(chosen, sign));
}
static inline float32x4_t uform_v_even(uint16_t const *pairs) {
    return vreinterpretq_f32_u32(vshlq_n_u32(vld1q_u32((uint32_t const *)(void const *)pairs), 16));
}
static inline float32x4_t uform_v_odd(uint16_t const *pairs) {
    return vreinterpretq_f32_u32(vandq_u32(vld1q_u32((uint32_t const *)(void const *)pairs), vdupq_n_u32(0xffff0000u)));
}
static inline void uform_v_store_bf16(uint16_t *target, float32x4_t x) {
    uint32x4_t bits = vreinterpretq_u32_f32(x);
    uint32x4_t odd = vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1));
    uint32x4_t rounded = vshrq_n_u32(vaddq_u32(bits, vaddq_u32(odd, vdupq_n_u32(0x7fff))), 16);
    uint32x4_t nan = vcgtq_u32(vandq_u32(bits, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000));
    uint32x4_t quiet = vorrq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(0x0040));
    vst1_u16(target, vmovn_u32(vbslq_u32(nan, quiet, rounded)));
}

#include "cpu/kernels_widen.h"

UFORM_WIDEN_TILE(1, 1)
UFORM_WIDEN_TILE(2, 1)
UFORM_WIDEN_TILE(3, 1)
UFORM_WIDEN_TILE(4, 1)
static uform_tile_t const uform_tiles_[UFORM_TILE_ROWS_MOST][UFORM_TILE_PANELS_MOST] = {
    {uform_tile_1_1_}, {uform_tile_2_1_}, {uform_tile_3_1_}, {uform_tile_4_1_}};
UFORM_WIDEN_GEMM(uform_tiles_)

/* ---- The int8 product ---- */

static float uform_quantize_int8_neon(float const *source, size_t count, uint8_t *target) {
    size_t whole = count - count % 4;
    float32x4_t largest = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < whole; i += 4) largest = vmaxq_f32(largest, vabsq_f32(vld1q_f32(source + i)));
    float most = vmaxvq_f32(largest);
    for (size_t i = whole; i < count; ++i) most = fabsf(source[i]) > most ? fabsf(source[i]) : most;
    float scale = most > 0 ? most / 127.0f : 1.0f, inverse = 1.0f / scale;
    for (size_t i = 0; i < whole; i += 4) {
        int32x4_t q = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(source + i), vdupq_n_f32(inverse))); /* nearest even */
        q = vaddq_s32(vminq_s32(vmaxq_s32(q, vdupq_n_s32(-127)), vdupq_n_s32(127)), vdupq_n_s32(128));
        uint16x4_t words = vmovn_u32(vreinterpretq_u32_s32(q));
        uint8x8_t bytes = vmovn_u16(vcombine_u16(words, words));
        vst1_lane_u32((uint32_t *)(void *)(target + i), vreinterpret_u32_u8(bytes), 0);
    }
    for (size_t i = whole; i < count; ++i) target[i] = (uint8_t)(128 + uform_int8_round(source[i] * inverse));
    for (size_t i = count; i < uform_int8_stride(count); ++i) target[i] = 128;
    return scale;
}

enum { uform_int8_rows_most_k = 4 };

/* Up to 4 rows against one panel of 16 columns: a quad of depth is 64 bytes of the panel, which VLD4
 * splits into its four depths of 16 columns; each widened to int16 and multiplied by the row's code
 * into four vectors of 4 int32 a row. */
static void uform_int8_tile_(uint8_t const *a, size_t a_stride, int8_t const *b, size_t quads, int rows,
                             int32_t const *corrections, float const *row_scales, float const *scales, float *c,
                             size_t c_stride, size_t columns) {
    int32x4_t sums[uform_int8_rows_most_k][4];
    for (int r = 0; r < uform_int8_rows_most_k; ++r)
        for (int v = 0; v < 4; ++v) sums[r][v] = vdupq_n_s32(0);
    for (size_t quad = 0; quad < quads; ++quad) {
        int8x16x4_t w = vld4q_s8(b + quad * 64);
        for (int k = 0; k < 4; ++k) {
            int16x8_t low = vmovl_s8(vget_low_s8(w.val[k])), high = vmovl_high_s8(w.val[k]);
            for (int r = 0; r < rows; ++r) {
                int16_t x = (int16_t)a[r * a_stride + 4 * quad + (size_t)k];
                sums[r][0] = vmlal_n_s16(sums[r][0], vget_low_s16(low), x);
                sums[r][1] = vmlal_high_n_s16(sums[r][1], low, x);
                sums[r][2] = vmlal_n_s16(sums[r][2], vget_low_s16(high), x);
                sums[r][3] = vmlal_high_n_s16(sums[r][3], high, x);
            }
        }
    }
    for (int r = 0; r < rows; ++r) { /* the correction taken back, both scales applied, as the generic table */
        int32_t totals[16];
        for (int v = 0; v < 4; ++v) vst1q_s32(totals + 4 * v, sums[r][v]);
        float *target = c + r * c_stride;
        for (size_t i = 0; i < columns; ++i) target[i] = (float)(totals[i] - corrections[i]) * row_scales[r] * scales[i];
    }
}

static void uform_gemm_int8_neon(uint8_t const *a, size_t a_stride, int8_t const *packed, int32_t const *corrections,
                                 float const *row_scales, float const *scales, float *c, size_t c_stride, size_t rows,
                                 size_t width, size_t depth) {
    size_t quads = uform_int8_stride(depth) / 4;
    for (size_t first = 0; first < width; first += 16) {
        size_t columns = width - first < 16 ? width - first : 16;
        for (size_t row = 0; row < rows; row += uform_int8_rows_most_k) {
            size_t count = rows - row < uform_int8_rows_most_k ? rows - row : uform_int8_rows_most_k;
            uform_int8_tile_(a + row * a_stride, a_stride, packed + first * quads * 4, quads, (int)count, corrections + first,
                             row_scales + row, scales + first, c + row * c_stride + first, c_stride, columns);
        }
    }
}
